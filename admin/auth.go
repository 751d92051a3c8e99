package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"go.uber.org/zap"
)

// Token is one named bearer token of the admin listener. Secret is called per request,
// so a token kept in a file can be rotated without a restart.
type Token struct {
	Name   string
	Secret func() (string, error)
}

// Auth guards the admin endpoints that change state (approvals, and later pins and the
// console). With Tokens, a request must carry "Authorization: Bearer <one of them>",
// from any peer. Without, only loopback peers are served — judged from the connection's
// address, never from headers such as X-Forwarded-For, which any client can write.
type Auth struct {
	Tokens []Token
	Logger *zap.Logger
}

// LoopbackCaller is the caller name recorded for a request served without a token
// (no token configured, loopback peer).
const LoopbackCaller = "loopback"

type callerKey struct{}

// Caller returns the name of the token that authenticated the request (LoopbackCaller
// when none is configured), or "" outside a protected handler.
func Caller(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// Wrap returns next behind the authentication check.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	log := zap.NewNop()
	if a != nil && a.Logger != nil {
		log = a.Logger
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a == nil || len(a.Tokens) == 0 {
			if !loopbackPeer(r.RemoteAddr) {
				log.Warn("admin: refused a non-loopback client: no admin token is configured",
					zap.String("peer", r.RemoteAddr), zap.String("path", r.URL.Path))
				writeText(w, http.StatusForbidden, "forbidden: this admin endpoint serves loopback clients only unless admin.token is configured\n")
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, LoopbackCaller)))
			return
		}
		given, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookproxy admin"`)
			writeText(w, http.StatusUnauthorized, "unauthorized: an admin token is required (Authorization: Bearer TOKEN)\n")
			return
		}
		name, err := a.match(given)
		if err != nil {
			// A configured token that cannot be read now (file removed, variable unset)
			// refuses everyone rather than opening the endpoint.
			log.Error("admin: a configured token cannot be read", zap.Error(err))
			writeText(w, http.StatusServiceUnavailable, "admin token unavailable\n")
			return
		}
		if name == "" {
			log.Warn("admin: refused a wrong token", zap.String("peer", r.RemoteAddr), zap.String("path", r.URL.Path))
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookproxy admin", error="invalid_token"`)
			writeText(w, http.StatusUnauthorized, "unauthorized: the admin token is not valid\n")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, name)))
	})
}

// match returns the name of the token equal to given ("" for none). Every token is
// compared, in constant time over equal-length digests, so timing tells nothing about
// which token or how much of it matched.
func (a *Auth) match(given string) (string, error) {
	g := sha256.Sum256([]byte(given))
	found := ""
	var firstErr error
	for _, t := range a.Tokens {
		s, err := t.Secret()
		if err != nil || s == "" {
			if firstErr == nil && err != nil {
				firstErr = err
			}
			continue
		}
		d := sha256.Sum256([]byte(s))
		if subtle.ConstantTimeCompare(g[:], d[:]) == 1 && found == "" {
			found = t.Name
		}
	}
	if found == "" && firstErr != nil {
		return "", firstErr
	}
	return found, nil
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" header (the scheme is
// case-insensitive, RFC 7235 §2.1).
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// loopbackPeer reports whether the connection's remote address is a loopback address.
func loopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
