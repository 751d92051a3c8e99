package backend

import (
	"crypto/subtle"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Handler returns the HTTP binding of the backend (AHP-HTTP-001). AHP defines no
// sub-routes: the harness POSTs to the exact URL it was configured with, so every path is
// answered the same way.
//
//   - with WithBearerToken, a missing or wrong Authorization: 401 with
//     WWW-Authenticate: Bearer, before anything else is read;
//   - any method but POST: 405 with Allow: POST;
//   - a Content-Type other than application/json (charset utf-8 allowed), several of them,
//     or any Content-Encoding: 415;
//   - a body over the frame limit (DefaultMaxFrameBytes): 413; an unreadable body: 400;
//   - a request: 200 with one JSON-RPC response, errors included (AHP-HTTP-001);
//   - a notification (hooks/observe): 204 with no body once delivered; one that fails
//     validation gets 400, still without a JSON-RPC body.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.token != "" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookproxy backend"`)
		http.Error(w, "AHP backend: a valid bearer token is required", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "AHP backend: POST one JSON-RPC message", http.StatusMethodNotAllowed)
		return
	}
	if !jsonContentType(r.Header.Values("Content-Type")) {
		http.Error(w, "AHP backend: Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	if len(r.Header.Values("Content-Encoding")) > 0 {
		// The binding carries plain UTF-8 JSON; a compressed body could also hide its real
		// size from the limit below.
		http.Error(w, "AHP backend: Content-Encoding is not supported", http.StatusUnsupportedMediaType)
		return
	}
	if r.ContentLength > s.maxFrame {
		http.Error(w, "AHP backend: message too large", http.StatusRequestEntityTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxFrame))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "AHP backend: message too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "AHP backend: cannot read the request body", http.StatusBadRequest)
		return
	}
	out := s.respond(r.Context(), body)
	switch {
	case out.reply != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out.reply)
	case out.rejected:
		w.WriteHeader(http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// authorized checks the single Authorization header against the configured token in
// constant time, so the comparison does not reveal how much of a guess was right.
func (s *Server) authorized(r *http.Request) bool {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.token)) == 1
}

// jsonContentType accepts exactly one Content-Type header naming application/json, with
// no parameter other than charset=utf-8.
func jsonContentType(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}
