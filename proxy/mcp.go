package proxy

// MCP routes (`api: mcp`): hookproxy in front of an MCP server that speaks Streamable
// HTTP (MCP 2025-06-18 / 2025-11-25). Every request is relayed as is, with one exception:
// a POST that carries a tools/call request while tool.before or tool.after is subscribed.
// Such a POST is read whole, each call is settled through tool.before and enforced here
// (refused, rewritten, answered from a supplied result, or forwarded), and the server's
// answer — JSON or an SSE stream — is read for the results, which pass tool.after before
// the caller sees them. The JSON lives in mapping/mcp; this file and its mcp_* siblings
// hold the HTTP side.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// MCP Streamable HTTP headers hookproxy reads. Every MCP header (these, MCP-Protocol-Version,
// Last-Event-ID, Mcp-Method, Mcp-Name) is relayed both ways untouched.
const (
	mcpSessionHeader     = "Mcp-Session-Id"
	mcpParamHeaderPrefix = "Mcp-Param-" // MCP 2026-07-28 (SEP-2243): argument values mirrored in headers
)

// NewMCPHandler is the MCPHandlerFactory of `api: mcp` routes; the serve command passes it
// in Options.MCPHandler.
func NewMCPHandler(env MCPRoute) (http.Handler, error) {
	up, err := parseUpstream(env.Upstream)
	if err != nil {
		return nil, err
	}
	prefix, err := cleanPrefix(env.Route.Prefix)
	if err != nil {
		return nil, err
	}
	if env.Transport == nil {
		return nil, errors.New("mcp: no upstream transport")
	}
	h := &mcpHandler{env: env, prefix: prefix, upstream: up, serverID: env.Route.ServerID, log: env.Logger}
	if h.serverID == "" {
		h.serverID = prefix // config.Route documents the prefix as the default server id
	}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	h.env.Limits = env.Limits.WithDefaults()
	if env.Pins != nil {
		h.pins = &pinEnv{pinner: env.Pins, chain: env.Chain, auditor: env.Auditor, log: h.log, source: env.Source}
	}
	h.connURL = connectionURL(up)
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      env.Transport,
		FlushInterval:  -1, // SSE streams (POST answers, the GET stream) are relayed as they arrive
		ErrorHandler:   h.proxyError,
		ModifyResponse: h.modifyResponse,
		BufferPool:     copyBuffers,
		ErrorLog:       zap.NewStdLog(h.log.Named("mcp-reverseproxy")),
	}
	return h, nil
}

var _ MCPHandlerFactory = NewMCPHandler

// connectionURL is tool.mcp.connection.url: the upstream without userinfo, query or
// fragment. A query may carry an API key, and the descriptor must never hold credentials
// (AHP spec, execution-payloads.md).
func connectionURL(up *url.URL) string {
	u := *up
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// mcpHandler serves one MCP route. Requests arrive with the route prefix stripped.
type mcpHandler struct {
	env      MCPRoute
	prefix   string
	serverID string
	upstream *url.URL
	connURL  string
	log      *zap.Logger
	rp       *httputil.ReverseProxy
	pins     *pinEnv // nil when pinning is off (mcp_pins.go)
}

// mcpSubs says which tool events have a matching subscription.
type mcpSubs struct {
	before, beforeIntercept bool
	after, afterIntercept   bool
}

// subscriptions asks the chain on every request, so a changed registration is honoured.
func (h *mcpHandler) subscriptions() mcpSubs {
	if h.env.Chain == nil {
		return mcpSubs{}
	}
	var s mcpSubs
	in, ob := h.env.Chain.Subscribed(ahp.EventToolBefore)
	s.before, s.beforeIntercept = in || ob, in
	in, ob = h.env.Chain.Subscribed(ahp.EventToolAfter)
	s.after, s.afterIntercept = in || ob, in
	return s
}

// ServeHTTP relays every request untouched, except POSTs while a tool event is subscribed:
// those go through serveCalls, which relays them untouched too unless they hold a
// tools/call. With no subscription nothing is even parsed (the fast path).
func (h *mcpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		if h.pins != nil {
			var done bool
			if r, done = h.servePinned(w, r); done {
				return
			}
		}
		if subs := h.subscriptions(); subs.before || subs.after {
			h.serveCalls(w, r, subs)
			return
		}
	case http.MethodGet, http.MethodDelete, http.MethodOptions:
		// Streamable HTTP sends JSON-RPC by POST only: a body on another method would
		// reach the server unexamined (a server may still read a tools/call from it).
		// OPTIONS stays open, bodiless, for a browser client's CORS preflight.
		if hasBody(r) {
			h.writeRPCError(w, http.StatusBadRequest, nil, mcp.CodeInvalidRequest,
				"hookproxy refuses a "+r.Method+" request with a body: MCP messages are sent with POST")
			return
		}
		if r.Method == http.MethodGet && h.subscriptions().after {
			h.forwardWith(w, r, &mcpState{getStream: true})
			return
		}
	default:
		// PUT, PATCH and the rest are no Streamable HTTP method; forwarded, a tools/call
		// in their body would run unexamined.
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		h.writeRPCError(w, http.StatusMethodNotAllowed, nil, mcp.CodeInvalidRequest,
			"hookproxy does not accept "+r.Method+" on an MCP endpoint: Streamable HTTP uses POST, GET and DELETE")
		return
	}
	h.forward(w, r)
}

// forward relays a request as is, streaming both bodies: GET (the server's stream, with
// Last-Event-ID for resumption), DELETE (session end) and every POST of the fast path.
func (h *mcpHandler) forward(w http.ResponseWriter, r *http.Request) {
	h.forwardWith(w, r, &mcpState{})
}

// forwardWith is forward with the state the reverse proxy hooks read.
func (h *mcpHandler) forwardWith(w http.ResponseWriter, r *http.Request, st *mcpState) {
	limit := h.env.Limits.MaxRequestBytes
	if r.ContentLength > limit {
		h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, mcp.CodeInvalidRequest, h.tooLargeMessage())
		return
	}
	out := r.WithContext(context.WithValue(r.Context(), mcpStateKey{}, st))
	if r.Body != nil && r.Body != http.NoBody {
		st.body = newLimitedBody(r.Body, r.ContentLength, limit)
		var relay *relayBody
		w, relay = streamRelay(w, r, st.body)
		defer relay.finish()
		out.Body = relay
	}
	h.rp.ServeHTTP(w, out)
}

func (h *mcpHandler) tooLargeMessage() string {
	return "request body exceeds the proxy limit of " + strconv.FormatInt(h.env.Limits.MaxRequestBytes, 10) + " bytes"
}

// rewrite points the outbound request at the upstream. The MCP endpoint is one URL, so the
// route itself ("/mcp/files" or "/mcp/files/") addresses the upstream URL exactly; a longer
// path is appended to it.
func (h *mcpHandler) rewrite(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	u := *h.upstream
	if in.URL.Path != "" && in.URL.Path != "/" {
		u.Path, u.RawPath = joinPath(h.upstream, in.URL.Path, in.URL.RawPath)
	}
	switch {
	case h.upstream.RawQuery == "":
		u.RawQuery = in.URL.RawQuery
	case in.URL.RawQuery != "":
		u.RawQuery = h.upstream.RawQuery + "&" + in.URL.RawQuery
	}
	u.Fragment, u.RawFragment = "", ""
	out.URL = &u
	out.Host = "" // the Host header names the upstream (MCP servers check it against DNS rebinding)
	for _, name := range forwardedHeaders {
		if v, ok := in.Header[name]; ok {
			out.Header[name] = v
		}
	}
	out.Header.Del(SessionHeader)
	if st := mcpStateFrom(in.Context()); st != nil && st.x != nil {
		st.x.prepareOutbound(out)
	} else if st != nil && st.getStream {
		out.Header.Del("Accept-Encoding") // the stream is read: identity only
	}
}

func (h *mcpHandler) modifyResponse(resp *http.Response) error {
	// An MCP server's redirect is not passed on either: a client that follows it re-sends
	// its tools/call, unexamined, elsewhere.
	if !h.env.Route.AllowRedirects && resp.StatusCode >= 300 && resp.StatusCode <= 399 &&
		resp.StatusCode != http.StatusNotModified && resp.Header.Get("Location") != "" {
		resp.Body.Close()
		return errMCPRedirect
	}
	st := mcpStateFrom(resp.Request.Context())
	switch {
	case st != nil && st.x != nil:
		if st.x.readsResponse() {
			// The results the chain checks must be what the client decodes: a server that
			// compresses anyway is decoded, or refused (content_coding.go).
			if err := decodeResponseBody(resp); err != nil {
				resp.Body.Close()
				return err
			}
		}
		return st.x.onResponse(resp)
	case st != nil && st.pinList != nil:
		return h.pinListResponse(resp, st.pinList)
	case st != nil && st.getStream:
		// The session stream is read too: a server that compresses it anyway is decoded.
		if err := decodeResponseBody(resp); err != nil {
			resp.Body.Close()
			return err
		}
		return h.filterGetStream(resp)
	}
	return nil
}

var errMCPRedirect = errors.New("mcp server redirect")

// proxyError answers transport failures (and an over-limit streamed body) with a JSON-RPC
// error, so an MCP client reports it like any server error.
func (h *mcpHandler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away: nobody to answer
	}
	st := mcpStateFrom(r.Context())
	if st != nil && st.body != nil && st.body.exceeded.Load() {
		h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, mcp.CodeInvalidRequest, h.tooLargeMessage())
		return
	}
	var id []byte
	if st != nil && st.x != nil {
		st.x.onForwardError()
		id = st.x.body.SingleID()
	}
	var ce *codingError
	if errors.As(err, &ce) {
		h.writeRPCError(w, http.StatusBadGateway, id, mcp.CodeInternalError, codingRefusal("the MCP server answered", err))
		return
	}
	if errors.Is(err, errMCPRedirect) {
		h.writeRPCError(w, http.StatusBadGateway, id, mcp.CodeInternalError, "the MCP server answered with a redirect, which hookproxy does not pass on (set allowRedirects on the route to allow it)")
		return
	}
	if errors.Is(err, errMCPEncodedStream) {
		h.writeRPCError(w, http.StatusBadGateway, id, mcp.CodeInternalError, "hookproxy: "+err.Error())
		return
	}
	h.log.Warn("mcp upstream request failed", zap.String("route", h.prefix), zap.String("error", safeError(err)))
	h.writeRPCError(w, http.StatusBadGateway, id, mcp.CodeInternalError, "hookproxy could not reach the MCP server")
}

// writeRPCError is the one place the handler answers with its own JSON-RPC error.
func (h *mcpHandler) writeRPCError(w http.ResponseWriter, status int, id []byte, code int, message string) {
	hd := w.Header()
	hd.Del("Content-Length")
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mcp.ErrorResponse(id, code, message, nil))
}

// mcpState travels in the request context from the handler to the reverse proxy hooks.
type mcpState struct {
	body      *limitedBody // fast path: the streamed, limited request body
	x         *mcpExchange // tools/call path
	getStream bool         // a GET while tool.after is subscribed: responses are refused (mcp_get_stream.go)
	pinList   *mcpPinList  // a tools/list while pinning is on (mcp_pins.go)
}

type mcpStateKey struct{}

func mcpStateFrom(ctx context.Context) *mcpState {
	st, _ := ctx.Value(mcpStateKey{}).(*mcpState)
	return st
}

// mcpReadError turns a failed body read into the answer for it.
func (h *mcpHandler) mcpReadError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, mcp.CodeInvalidRequest, h.tooLargeMessage())
	case r.Context().Err() != nil:
	default:
		h.writeRPCError(w, http.StatusBadRequest, nil, mcp.CodeParseError, fmt.Sprintf("hookproxy could not read the request body: %s", safeError(err)))
	}
}

// mcpCodingError answers a request body hookproxy could not decode from its
// Content-Encoding.
func (h *mcpHandler) mcpCodingError(w http.ResponseWriter, err error) {
	var ce *codingError
	switch {
	case errors.Is(err, errBodyTooLarge):
		h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, mcp.CodeInvalidRequest, h.tooLargeMessage())
	case errors.As(err, &ce):
		h.writeRPCError(w, http.StatusUnsupportedMediaType, nil, mcp.CodeInvalidRequest, codingRefusal("the request body is", err))
	default:
		h.writeRPCError(w, http.StatusBadRequest, nil, mcp.CodeParseError, "hookproxy could not decode the request body from its Content-Encoding: "+safeError(err))
	}
}
