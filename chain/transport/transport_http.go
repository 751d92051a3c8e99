package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// Retry budget of one delivery. Every retry also stays inside the caller's deadline
// (AHP-CORE-004): the backoff wait ends with the context and no new attempt starts after it.
const (
	httpRetryMax     = 3
	httpRetryWaitMin = 10 * time.Millisecond
	httpRetryWaitMax = 50 * time.Millisecond
	// observeDrainBytes bounds how much of an observe reply body is read (and discarded)
	// so the connection can be reused; the body carries no protocol meaning.
	observeDrainBytes = 4 << 10
)

// httpTransport delivers over the AHP HTTP binding (AHP-HTTP-001).
type httpTransport struct {
	id       string
	url      string
	creds    *credentials
	maxReply int64
	log      *zap.Logger
	rt       *http.Transport // one keep-alive pool per backend
	client   *retryablehttp.Client
}

var _ Transport = (*httpTransport)(nil)

func newHTTP(b registration.Backend, opts Options, log *zap.Logger) (*httpTransport, error) {
	u, err := url.Parse(b.Transport.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("backend %s: transport url must be an absolute http(s) URL", b.ID)
	}
	// TLS verification stays on (platform trust); plain http is confined to loopback by
	// registration validation (AHP spec, base/transports/http.md "TLS").
	rt := cleanhttp.DefaultPooledTransport()
	// cleanhttp keeps GOMAXPROCS+1 idle connections per host: on a proxy pinned to one core
	// that is two, so 16 requests in flight opened and closed a connection to the backend
	// for most events (a loopback connect per request, and TIME_WAIT piling up). Every
	// request in flight may hold one connection to each backend; keep as many idle.
	rt.MaxIdleConnsPerHost = maxIdlePerBackend
	rt.MaxIdleConns = maxIdlePerBackend
	if opts.RootCAs != nil {
		rt.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	}
	t := &httpTransport{
		id:       b.ID,
		url:      b.Transport.URL,
		creds:    newCredentials(b.Authentication, opts),
		maxReply: opts.MaxReplyBytes,
		log:      log,
		rt:       rt,
	}
	t.client = &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: rt,
			// Redirects are never followed (AHP-HTTP-001): the 3xx itself is the answer,
			// and the bearer token never travels to another location.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Logger:       zapLeveled{log},
		RetryWaitMin: httpRetryWaitMin,
		RetryWaitMax: httpRetryWaitMax,
		RetryMax:     httpRetryMax,
		CheckRetry:   retryPolicy,
		Backoff:      jitterBackoff,
		// Hand back the last response or error unchanged so that it is classified here,
		// not summarised by the library into text that would hide the status.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return t, nil
}

// maxIdlePerBackend bounds the idle keep-alive connections kept to one backend.
const maxIdlePerBackend = 256

// Intercept posts hooks/intercept and returns the raw response body (AHP-HTTP-001).
func (t *httpTransport) Intercept(ctx context.Context, id string, params *ahp.InterceptParams) ([]byte, error) {
	frame, err := interceptFrame(id, params)
	if err != nil {
		return nil, err
	}
	resp, err := t.post(ctx, frame)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	if isRedirect(resp.StatusCode) {
		return nil, fail(KindRedirect, "backend answered HTTP %d redirect; redirects are not followed", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		// Only the numeric status: the reason phrase and body are backend-supplied.
		return nil, fail(KindHTTPStatus, "backend answered HTTP %d, want 200", resp.StatusCode)
	}
	if err := checkJSONContentType(resp.Header.Values("Content-Type")); err != nil {
		return nil, err
	}
	if resp.ContentLength > t.maxReply {
		return nil, fail(KindOversized, "reply of %d bytes exceeds the %d-byte limit", resp.ContentLength, t.maxReply)
	}
	// Read one byte past the limit so an oversized reply fails explicitly instead of being
	// truncated into something that might parse: a limit is never met by truncation.
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.maxReply+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxFailure(ctx, "reading the reply")
		}
		return nil, fail(KindConnection, "reading the reply: %v", netCause(err))
	}
	if int64(len(body)) > t.maxReply {
		return nil, fail(KindOversized, "reply exceeds the %d-byte limit", t.maxReply)
	}
	if ferr := checkReplyFrame(body); ferr != nil {
		return nil, ferr
	}
	return body, nil
}

// Observe posts the hooks/observe notification; any 2xx is delivery, the body is ignored.
func (t *httpTransport) Observe(ctx context.Context, params *ahp.ObserveParams) error {
	frame, err := observeFrame(params)
	if err != nil {
		return err
	}
	resp, err := t.post(ctx, frame)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, observeDrainBytes))
	switch {
	case isRedirect(resp.StatusCode):
		return fail(KindRedirect, "backend answered HTTP %d redirect to an observation; redirects are not followed", resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fail(KindHTTPStatus, "backend answered HTTP %d to an observation, want 202 or 204", resp.StatusCode)
	}
	return nil
}

// Close drops idle keep-alive connections; in-flight requests end with their contexts.
func (t *httpTransport) Close() error {
	t.rt.CloseIdleConnections()
	return nil
}

// post sends frame with retries inside ctx. On success the caller owns resp.Body.
func (t *httpTransport) post(ctx context.Context, frame []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, cached, err := t.postOnce(ctx, frame)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			return resp, err
		}
		// A 401 is an authentication rejection: a cached OAuth token is dropped, and the
		// delivery is re-sent once with a fresh one, inside the same deadline (AHP spec,
		// capability-auth.md "Failure and timing"). A bearer secret is never swapped for
		// another in answer to a 401.
		t.creds.rejected(ctx)
		if !cached || attempt > 0 {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, observeDrainBytes))
		resp.Body.Close()
	}
}

// postOnce is one delivery (with go-retryablehttp's retries of unanswered attempts).
// cached reports whether its Authorization came from a cached OAuth token.
func (t *httpTransport) postOnce(ctx context.Context, frame []byte) (resp *http.Response, cached bool, err error) {
	if ctx.Err() != nil {
		return nil, false, ctxFailure(ctx, "before sending")
	}
	// Credentials are resolved at delivery time, inside the deadline (AHP-AUTH-001).
	authz, cached, cerr := t.creds.authorization(ctx)
	if cerr != nil {
		return nil, false, cerr
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, t.url, frame)
	if err != nil {
		return nil, false, fail(KindConnection, "building the request: %v", netCause(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err = t.client.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return nil, false, ctxFailure(ctx, "waiting for the backend")
		}
		return nil, false, fail(KindConnection, "request failed: %v", netCause(err))
	}
	return resp, cached, nil
}

// validBearerToken accepts printable ASCII without spaces, so a token can never split or
// inject a header line.
func validBearerToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// retryPolicy retries only attempts that brought back no answer: connection failures and
// 502/503/504 from a gateway or an overloaded backend. A successful response or any other
// status is final (AHP-CORE-004), and nothing is retried once ctx has ended.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return retryableNetError(err), nil
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, nil
	}
	return false, nil
}

// retryableNetError excludes failures that a retry cannot fix: certificate problems and
// an unusable URL.
func retryableNetError(err error) bool {
	var (
		verr  *tls.CertificateVerificationError
		uaerr x509.UnknownAuthorityError
		herr  x509.HostnameError
		cierr x509.CertificateInvalidError
	)
	if errors.As(err, &verr) || errors.As(err, &uaerr) || errors.As(err, &herr) || errors.As(err, &cierr) {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return !strings.Contains(err.Error(), "unsupported protocol scheme")
}

// jitterBackoff waits about lo·2^n capped at hi, with up to 50% jitter (never below lo), and ignores
// Retry-After: the subscription deadline, not the backend, bounds the wait.
func jitterBackoff(lo, hi time.Duration, attempt int, _ *http.Response) time.Duration {
	d := lo << min(attempt, 8)
	if d > hi || d <= 0 {
		d = hi
	}
	w := d/2 + rand.N(d/2+1)
	return max(w, lo)
}

func isRedirect(code int) bool { return code >= 300 && code <= 399 }

// checkJSONContentType requires exactly one application/json media type; a charset, when
// given, must be UTF-8 (AHP-HTTP-001).
func checkJSONContentType(values []string) error {
	if len(values) != 1 {
		return fail(KindMalformed, "reply has %d Content-Type headers, want one application/json", len(values))
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return fail(KindMalformed, "reply content type is not application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return fail(KindMalformed, "reply charset is not UTF-8")
	}
	return nil
}

// netCause strips the *url.Error wrapper (method and URL, which may carry a query the
// operator considers private) and the retry library's summary, keeping the network cause.
func netCause(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// zapLeveled routes go-retryablehttp's logging to zap at debug level: retries are expected
// and the chain records the outcome that matters.
type zapLeveled struct{ log *zap.Logger }

func (z zapLeveled) Error(msg string, kv ...any) { z.log.Sugar().Debugw("http: "+msg, kv...) }
func (z zapLeveled) Info(msg string, kv ...any)  { z.log.Sugar().Debugw("http: "+msg, kv...) }
func (z zapLeveled) Debug(msg string, kv ...any) { z.log.Sugar().Debugw("http: "+msg, kv...) }
func (z zapLeveled) Warn(msg string, kv ...any)  { z.log.Sugar().Debugw("http: "+msg, kv...) }

var _ retryablehttp.LeveledLogger = zapLeveled{}
