package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/mapping"
)

// httpError is an answer hookproxy gives in place of the upstream's: a refusal, a client
// error or an upstream failure, already rendered in the route's provider format. Every
// such answer leaves through writeError (one error path, as in httputil.ReverseProxy).
type httpError struct {
	status int
	body   []byte
	cause  error // local diagnostic; logged, never sent
}

func (e *httpError) Error() string {
	if e.cause != nil {
		return "http " + strconv.Itoa(e.status) + ": " + e.cause.Error()
	}
	return "http " + strconv.Itoa(e.status)
}

func (e *httpError) Unwrap() error { return e.cause }

// errInterrupted reports that the client went away while hooks or the upstream ran.
var errInterrupted = errors.New("client request cancelled")

// errorBody renders an error for this route: in the provider's format when the route has
// a translator, else in the common {"error":{...}} shape.
func (rt *route) errorBody(status int, errType, code, message string) []byte {
	if rt.errT != nil {
		return rt.errT.ErrorBody(status, errType, code, message)
	}
	var c any
	if code != "" {
		c = code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": errType, "code": c}})
	return b
}

func (rt *route) provider() string {
	if rt.errT != nil {
		return rt.errT.Provider()
	}
	return ""
}

func (rt *route) badRequest(reason string, cause error) *httpError {
	return &httpError{status: http.StatusBadRequest, cause: cause, body: rt.errorBody(http.StatusBadRequest,
		mapping.InvalidRequestType(rt.provider()), "", "hookproxy could not parse the request: "+reason)}
}

func (rt *route) tooLarge(limit int64) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, body: rt.errorBody(http.StatusRequestEntityTooLarge,
		mapping.TooLargeType(rt.provider()), "", "request body exceeds the proxy limit of "+strconv.FormatInt(limit, 10)+" bytes")}
}

func (rt *route) upstreamFailure(message string, cause error) *httpError {
	return &httpError{status: http.StatusBadGateway, cause: cause, body: rt.errorBody(http.StatusBadGateway,
		mapping.UpstreamFailureType(rt.provider()), "", message)}
}

// badPath answers a request whose path cannot be examined as sent.
func (rt *route) badPath(cause error) *httpError {
	return &httpError{status: http.StatusBadRequest, cause: cause, body: rt.errorBody(http.StatusBadRequest,
		mapping.InvalidRequestType(rt.provider()), "", "hookproxy refuses this request path: "+cause.Error())}
}

// methodRefused answers a mapped endpoint called with a method that could carry input
// past the chain.
func (rt *route) methodRefused(method, endpoint string) *httpError {
	return &httpError{status: http.StatusMethodNotAllowed, body: rt.errorBody(http.StatusMethodNotAllowed,
		mapping.InvalidRequestType(rt.provider()), "", method+" "+endpoint+" is not accepted by hookproxy: this endpoint takes POST")}
}

// unmappedRefused answers input sent to an endpoint the route does not examine.
func (rt *route) unmappedRefused(endpoint string) *httpError {
	return &httpError{status: http.StatusForbidden, body: rt.errorBody(http.StatusForbidden,
		mapping.DeniedType(rt.provider()), "hookproxy.unmapped_endpoint",
		"hookproxy does not forward input to "+endpoint+" unexamined; this route enforces "+rt.enforced()+" (set unmapped: forward on the route to allow it)")}
}

// upgradeRefused answers a WebSocket upgrade on a model route: 426, in the provider's
// format, naming HTTP as the way in.
func (rt *route) upgradeRefused() *httpError {
	return &httpError{status: http.StatusUpgradeRequired, body: rt.errorBody(http.StatusUpgradeRequired,
		mapping.InvalidRequestType(rt.provider()), "websocket_not_supported",
		"hookproxy enforces hooks on HTTP only: WebSocket connections to this model API are not relayed; send the request over HTTP")}
}

func (rt *route) internalError(cause error) *httpError {
	return &httpError{status: http.StatusInternalServerError, cause: cause, body: rt.errorBody(http.StatusInternalServerError,
		mapping.UpstreamFailureType(rt.provider()), "", "hookproxy internal error")}
}

// refusal renders a settled denial as HTTP 403 in the provider's own format, so the
// client's SDK raises its usual error. A fail-closed (synthetic) denial names the backend and never
// carries backend error text (AHP-FAIL-001).
func (rt *route) refusal(d *chain.Denial) *httpError {
	reason, code := denialText(d)
	return &httpError{status: http.StatusForbidden, body: rt.errorBody(http.StatusForbidden,
		mapping.DeniedType(rt.provider()), code, reason)}
}

// denialText returns the reason and code to show for a denial.
func denialText(d *chain.Denial) (reason, code string) {
	switch {
	case d == nil:
		return "Request denied by policy.", chain.CodeDenied
	case d.Synthetic && d.Code == chain.CodeBackendInvalidReply:
		// The backend answered, but its reply broke the protocol: say so, so that the
		// operator does not hunt for an outage (the code tells programs the same).
		return invalidReplyReason(d.BackendID), chain.CodeBackendInvalidReply
	case d.Synthetic:
		return failClosedReason(d.BackendID), chain.CodeFailClosed
	}
	reason, code = d.Reason, d.Code
	if reason == "" {
		reason = "Request denied by policy."
	}
	if code == "" {
		code = chain.CodeDenied
	}
	return reason, code
}

func invalidReplyReason(backendID string) string {
	if backendID == "" {
		backendID = "(unnamed)"
	}
	return "Required policy backend " + backendID + " sent a reply that violates the hook protocol; it was refused."
}

func failClosedReason(backendID string) string {
	if backendID == "" {
		return "Required policy backend unavailable."
	}
	return "Required policy backend " + backendID + " unavailable."
}

// writeError is the one place hookproxy answers with its own error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, rt *route, err error) {
	var he *httpError
	switch {
	case errors.As(err, &he):
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client is gone: nobody to answer.
		s.logAt(r.Context(), zapcore.DebugLevel, "client went away", zap.String("route", rt.prefix), zap.String("path", r.URL.Path))
		return
	default:
		he = rt.upstreamFailure(upstreamFailureMessage(err), err)
	}
	if he.status >= 500 {
		s.logAt(r.Context(), zapcore.WarnLevel, "request failed", zap.String("route", rt.prefix), zap.String("path", r.URL.Path),
			zap.Int("status", he.status), zap.String("error", safeError(he.cause)))
	} else {
		s.logAt(r.Context(), zapcore.DebugLevel, "request answered by hookproxy", zap.String("route", rt.prefix),
			zap.String("path", r.URL.Path), zap.Int("status", he.status))
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(he.status)
	_, _ = w.Write(he.body)
}

// safeError renders an error for logs without the URL of a *url.Error, whose query may
// carry credentials (some APIs take keys as query parameters).
func safeError(err error) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + safeError(ue.Err)
	}
	return err.Error()
}
