package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/config"
)

// SessionHeader optionally sets session.id. It is consumed by hookproxy and
// never forwarded upstream.
const SessionHeader = "X-Hookproxy-Session"

// forwardedHeaders are removed by httputil.ReverseProxy before Rewrite runs; hookproxy
// puts the client's own values back so that every client header reaches the upstream
// untouched, and adds none of its own.
var forwardedHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// newTransport is the one upstream transport of a server: keep-alive pools sized for a
// proxy, HTTP/2 to TLS upstreams, connect-phase timeouts from the configuration and no
// overall timeout, because a model stream may legitimately run for many minutes. Client
// disconnects cancel upstream calls through the request context instead.
func newTransport(l config.Limits) *http.Transport {
	d := &net.Dialer{Timeout: l.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		// No proxy from the environment: a stray HTTPS_PROXY must not route provider
		// traffic through a host nobody configured (config upstreamProxy names one).
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return pooledCopyConn{c}, nil
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   l.TLSHandshakeTimeout,
		ResponseHeaderTimeout: l.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		// A request hookproxy has read and rendered is written from memory: with a write
		// buffer larger than a typical model request, headers and body leave in one write
		// from a buffer the connection keeps, instead of a fresh 32 KiB copy buffer per
		// request (which the kernel must page in) and a write per chunk.
		WriteBufferSize: 64 << 10,
	}
}

// pooledCopyConn is an upstream connection that copies a streamed request body through a
// pooled buffer. Over HTTP/1 the transport flushes the headers of a body it cannot see is
// in memory, then hands the body to the connection's ReadFrom; a TCP connection cannot
// splice from an HTTP body and falls back to a fresh copy buffer sized to the body (up
// to 32 KiB) per request — an allocation that grows with the body on the no-subscription
// path. (Over TLS the transport writes through tls.Conn instead, and HTTP/2 uses its own
// pooled frame buffers.)
type pooledCopyConn struct{ net.Conn }

func (c pooledCopyConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(writerOnly{c.Conn}, r, buf)
}

// writerOnly hides the connection's own ReadFrom from io.CopyBuffer, which would
// otherwise call it instead of using the buffer.
type writerOnly struct{ io.Writer }

// setOutboundBody makes body the upstream request's body (replayable, with its length).
// When hookproxy reads the answer, the client's Accept-Encoding is dropped so that the
// transport negotiates and undoes compression itself: what hookproxy decodes, taps or
// merges is the upstream's JSON.
func setOutboundBody(out *http.Request, body []byte, readsAnswer bool) {
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.Header.Del("Content-Length")
	if readsAnswer {
		out.Header.Del("Accept-Encoding")
	}
}

// newReverseProxy builds the route's forwarding engine for plain and fast-path requests,
// which go through it untouched. A boundary request's lifecycle forwards through a
// reverse proxy of its own with the same settings (lifecycle.forward), whose hooks are
// the lifecycle's methods.
func (rt *route) newReverseProxy() *httputil.ReverseProxy {
	rp := &httputil.ReverseProxy{}
	rt.setupReverseProxy(rp, rt.rewrite, rt.modifyResponse, rt.proxyError, rt.s.transport)
	rp.ErrorLog = zap.NewStdLog(rt.s.log.Named("reverseproxy"))
	return rp
}

// setupReverseProxy gives rp the route's forwarding settings and the given hooks.
func (rt *route) setupReverseProxy(rp *httputil.ReverseProxy, rewrite func(*httputil.ProxyRequest),
	modify func(*http.Response) error, onError func(http.ResponseWriter, *http.Request, error), t http.RoundTripper) {
	rp.Rewrite, rp.ModifyResponse, rp.ErrorHandler, rp.Transport = rewrite, modify, onError, t
	// Zero: httputil already flushes every write of an SSE or unknown-length (chunked)
	// response, so streams are relayed as they arrive; a response of known length is
	// written without a flush per copy, which saves a syscall on every JSON answer.
	rp.FlushInterval = 0
	rp.BufferPool = copyBuffers
	if rt.rp != nil {
		rp.ErrorLog = rt.rp.ErrorLog
	}
}

// rewrite is the fast path's Rewrite: the upstream target, and a small body read whole.
func (rt *route) rewrite(pr *httputil.ProxyRequest) {
	rt.target(pr)
	if st := stateFrom(pr.In.Context()); st != nil && st.small != nil {
		pr.Out.Body = io.NopCloser(bytes.NewReader(st.small))
	}
}

// target points the upstream request at the route's upstream: the stripped path under the
// upstream's base path, the query, and the client's headers as they came.
func (rt *route) target(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	rest, restRaw := rt.strip(in.URL)
	u := *rt.upstream
	u.Path, u.RawPath = joinPath(rt.upstream, rest, restRaw)
	switch {
	case rt.upstream.RawQuery == "":
		u.RawQuery = in.URL.RawQuery
	case in.URL.RawQuery != "":
		u.RawQuery = rt.upstream.RawQuery + "&" + in.URL.RawQuery
	}
	u.Fragment, u.RawFragment = "", ""
	out.URL = &u
	out.Host = "" // the Host header names the upstream, never the client's value
	for _, h := range forwardedHeaders {
		if v, ok := in.Header[h]; ok {
			out.Header[h] = v
		}
	}
	out.Header.Del(SessionHeader)
	out.Header.Del(AgentHeader) // hookproxy's own, like the session header
}

// modifyResponse is the fast path's ModifyResponse.
func (rt *route) modifyResponse(resp *http.Response) error { return rt.checkRedirect(resp) }

// checkRedirect refuses an upstream redirect unless the route allows them: an SDK that
// follows it re-sends its original body — unexamined, unredacted — to wherever Location
// points. The answer is a 502 in the provider's format naming only the host.
func (rt *route) checkRedirect(resp *http.Response) error {
	if rt.allowRedirects || resp.StatusCode < 300 || resp.StatusCode > 399 || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	target := "another location"
	if u, err := resp.Request.URL.Parse(loc); err == nil && u.Host != "" {
		target = u.Host
	}
	resp.Body.Close()
	return rt.upstreamFailure("the upstream answered with a redirect (HTTP "+strconv.Itoa(resp.StatusCode)+" to "+target+"), which hookproxy does not pass on; set allowRedirects on the route to allow it",
		fmt.Errorf("upstream redirect %d", resp.StatusCode))
}

// proxyError is the fast path's error path: transport failures and a request body over
// the limit.
func (rt *route) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if st := stateFrom(r.Context()); st != nil && st.body != nil && st.body.exceeded.Load() {
		err = rt.tooLarge(rt.s.limits.MaxRequestBytes)
	}
	rt.s.writeError(w, r, rt, rt.forwardFailure(r, err))
}

// forwardFailure is the error a failed forward answers with: an interruption when the
// client went away, a body cut off by the rate guard, otherwise err (a transport failure,
// or the error a ModifyResponse hook returned).
func (rt *route) forwardFailure(r *http.Request, err error) error {
	if r.Context().Err() != nil {
		err = errInterrupted
	}
	if tooSlow(r.Context()) {
		err = rt.bodyTooSlow()
	}
	return err
}

// strip removes the route prefix from the request path (the prefix is stripped before
// forwarding). chi routed the request here, so the prefix is present.
func (rt *route) strip(u *url.URL) (path, raw string) {
	path = strings.TrimPrefix(u.Path, rt.prefix)
	if u.RawPath != "" {
		raw = strings.TrimPrefix(u.RawPath, rt.prefix)
	}
	return path, raw
}

// joinPath appends the stripped request path to the upstream's base path with exactly one
// slash between them; an empty rest addresses the base itself.
func joinPath(base *url.URL, rest, restRaw string) (path, raw string) {
	if rest == "" {
		if base.Path == "" {
			return "/", ""
		}
		return base.Path, base.RawPath
	}
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
		if restRaw != "" {
			restRaw = "/" + restRaw
		}
	}
	path = strings.TrimSuffix(base.Path, "/") + rest
	if base.RawPath == "" && restRaw == "" {
		return path, ""
	}
	baseRaw := base.EscapedPath()
	if restRaw == "" {
		restRaw = (&url.URL{Path: rest}).EscapedPath()
	}
	return path, strings.TrimSuffix(baseRaw, "/") + restRaw
}

// limitedBody enforces cfg.Limits.MaxRequestBytes on a streamed request body without
// buffering it (fast path). Exceeding the limit fails the upstream write; the error path
// then answers 413.
//
// A body that declares its length ends at that length without a further read of the
// inbound body. The transport reads once more after the declared length, to check the body
// was not longer; but net/http's server closes an inbound body as soon as the handler
// writes response headers, and a read after that fails, which makes the transport drop the
// upstream connection — cutting a stream the upstream has already begun to answer
// (golang/go#40747). The server never delivers more than the declared length anyway.
type limitedBody struct {
	rc        io.ReadCloser
	remaining int64
	declared  bool        // remaining counts down the declared length, not the limit
	exceeded  atomic.Bool // written by the transport's writer, read by the error path
}

// newLimitedBody wraps an inbound body of declared length (-1 when unknown) under limit;
// the caller has already refused a declared length over the limit.
func newLimitedBody(rc io.ReadCloser, declared, limit int64) *limitedBody {
	if declared >= 0 && declared <= limit {
		return &limitedBody{rc: rc, remaining: declared, declared: true}
	}
	return &limitedBody{rc: rc, remaining: limit}
}

var errBodyTooLarge = errors.New("request body exceeds the proxy limit")

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.remaining <= 0 {
		if b.declared {
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			b.exceeded.Store(true)
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.rc.Read(p)
	b.remaining -= int64(n)
	if b.declared && b.remaining == 0 && err == nil {
		err = io.EOF // lets the transport finish the request without another read
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// readAllLimited reads a whole body of at most limit bytes (boundary path). A body that
// declares its length (sizeHint) is read into a buffer of exactly that size: no growing,
// no spare capacity to allocate and clear, which for a 32 KiB request is a quarter of
// the buffer. A body longer than it declared still works, through the growing path.
const maxUpfront = 256 << 10

// upfrontPool holds the maxUpfront-byte buffers the start of a long body is read into.
var upfrontPool = sync.Pool{New: func() any { b := make([]byte, maxUpfront); return &b }}

func readAllLimited(r io.Reader, limit, sizeHint int64) ([]byte, error) {
	return readAll(r, limit, sizeHint, false)
}

// readAll is readAllLimited; with pooled set, a body of 64 KiB or more that keeps its
// declaration is read into a pooled buffer, or into one with its pool class's capacity
// that can serve a later body once it is released (body_pool.go). Only a body that may be
// released is read so: any other would take buffers from the pool and leave the rest of
// their class's capacity allocated and cleared for nothing.
func readAll(r io.Reader, limit, sizeHint int64, pooled bool) ([]byte, error) {
	if sizeHint <= 0 || sizeHint > limit {
		return readAllGrowing(r, nil, limit)
	}
	// The declared length sizes the buffer only up to maxUpfront, and past it up to
	// twice what has arrived: the buffer grows with the bytes that arrive, never from a
	// length a client merely declared, and a body that keeps its declaration (an agent's
	// 400 KiB history) is copied once, into a buffer of its exact size (of its class's,
	// pooled).
	var buf []byte
	n := 0
	if pooled {
		// A buffer an earlier request left (body_pool.go): it costs no memory, whatever
		// the client declared.
		buf = pooledBodyBuffer(sizeHint)
	}
	switch {
	case buf != nil:
	case sizeHint > maxUpfront:
		// The first maxUpfront bytes go to a reused buffer: only the buffer the body ends
		// in is allocated, instead of a first one that is copied out and dropped.
		staged := upfrontPool.Get().(*[]byte)
		var err error
		n, err = io.ReadFull(r, *staged)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			// Shorter than declared: what arrived is the body.
			body := bytes.Clone((*staged)[:n])
			upfrontPool.Put(staged)
			return body, nil
		case err != nil:
			upfrontPool.Put(staged)
			return nil, err
		}
		buf = bodyBuffer(min(sizeHint, 2*int64(n)), sizeHint, pooled)
		copy(buf, *staged)
		upfrontPool.Put(staged)
	default:
		buf = bodyBuffer(sizeHint, sizeHint, pooled)
	}
	for {
		for n < len(buf) {
			k, err := r.Read(buf[n:])
			n += k
			if err == io.EOF {
				return buf[:n], nil // shorter than declared: what arrived is the body
			}
			if err != nil {
				return nil, err
			}
		}
		if int64(n) >= sizeHint {
			break
		}
		next := bodyBuffer(min(sizeHint, 2*int64(n)), sizeHint, pooled)
		copy(next, buf)
		buf = next
	}
	// Full: in the usual case the next read says EOF without touching the connection.
	var probe [1]byte
	for {
		k, err := r.Read(probe[:])
		if k > 0 {
			return readAllGrowing(r, append(buf, probe[0]), limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readBody reads a request body whole under limits.maxRequestBytes (boundary path and
// read-backs). A body over the limit, one that trickles in (body_guard.go) or one the
// client abandoned ends in the answer for it.
func (rt *route) readBody(r *http.Request, pooled bool) ([]byte, error) {
	limit := rt.s.limits.MaxRequestBytes
	if r.ContentLength > limit {
		return nil, rt.tooLarge(limit)
	}
	body, err := readAll(r.Body, limit, r.ContentLength, pooled)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return nil, rt.tooLarge(limit)
	case errors.Is(err, errBodyTooSlow):
		return nil, rt.bodyTooSlow()
	case err != nil && r.Context().Err() != nil:
		return nil, errInterrupted
	case err != nil:
		return nil, rt.badRequest("the request body could not be read", err)
	}
	return body, nil
}

// readAllGrowing appends the rest of r to prefix, failing once the whole exceeds limit.
func readAllGrowing(r io.Reader, prefix []byte, limit int64) ([]byte, error) {
	if int64(len(prefix)) > limit {
		return nil, errBodyTooLarge
	}
	buf := bytes.NewBuffer(prefix)
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1-int64(len(prefix))))
	if err != nil {
		return nil, err
	}
	if int64(len(prefix))+n > limit {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), nil
}

// requestState travels in the request context from the fast path's handler to the route
// reverse proxy's hooks.
type requestState struct {
	body  *limitedBody
	small []byte // a small body read whole, sent from memory
}

type stateKey struct{}

func withState(ctx context.Context, st *requestState) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

func stateFrom(ctx context.Context) *requestState {
	st, _ := ctx.Value(stateKey{}).(*requestState)
	return st
}

// copyBuffers pools the reverse proxy's copy buffers, so relaying a body allocates
// nothing proportional to its size.
var copyBuffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (bp *bufferPool) Get() []byte  { return *(bp.p.Get().(*[]byte)) }
func (bp *bufferPool) Put(b []byte) { bp.p.Put(&b) }

// isEventStream reports whether a Content-Type is an SSE stream.
func isEventStream(contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}
