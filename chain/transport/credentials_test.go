package transport

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/registration"
)

// lastAuthorization is the Authorization header of the backend's latest request.
func lastAuthorization(rec *recorder) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.headers) == 0 {
		return nil
	}
	return rec.headers[len(rec.headers)-1].Values("Authorization")
}

// TestTokenRefFileIsReReadOnRotation: a tokenRef naming a file (a mounted secret) is read
// at every delivery, so a rotated secret is used from the next delivery on, in both the
// file: and the bare-path form.
func TestTokenRefFileIsReReadOnRotation(t *testing.T) {
	srv, rec := newBackendServer(t, jsonReply(replyBody))
	path := filepath.Join(t.TempDir(), "token")
	for _, ref := range []string{"file:" + path, path} {
		t.Run(ref, func(t *testing.T) {
			b := httpBackend(srv.URL)
			b.Authentication = &registration.Authentication{Type: "bearer", TokenRef: ref}
			tr := mustNew(t, b, Options{})
			for _, tok := range []string{"tok-before-rotation", "tok-after-rotation"} {
				if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if _, err := intercept(t, tr, "evt_1", 2*time.Second); err != nil {
					t.Fatal(err)
				}
				if got := lastAuthorization(rec); len(got) != 1 || got[0] != "Bearer "+tok {
					t.Fatalf("Authorization = %q, want Bearer %s", got, tok)
				}
			}
			// A removed secret is a credentials failure, and the backend is not contacted.
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			before := rec.hits.Load()
			_, err := intercept(t, tr, "evt_1", 2*time.Second)
			wantKind(t, err, KindCredentials)
			if rec.hits.Load() != before {
				t.Fatal("the backend was contacted without credentials")
			}
		})
	}
}

// issuer is a loopback OAuth authorization server (TLS, RFC 8414 metadata, a
// client-credentials token endpoint) that records what it was asked.
type issuer struct {
	srv       *httptest.Server
	tokens    atomic.Int32 // token requests that were answered with a token
	mu        sync.Mutex
	resources []string
	expiresIn int
	redirect  string // when set, the token endpoint redirects there
}

const (
	testClientID     = "hookproxy-test"
	testClientSecret = "cs-91c4-never-logged"
	testResource     = "https://policy.example.test/ahp"
)

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{expiresIn: 3600}
	is.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"issuer": is.srv.URL, "token_endpoint": is.srv.URL + "/token",
				"grant_types_supported": []string{"client_credentials"},
			})
		case "/token":
			if is.redirect != "" {
				http.Redirect(w, r, is.redirect, http.StatusTemporaryRedirect)
				return
			}
			_ = r.ParseForm()
			id, secret, ok := r.BasicAuth()
			if !ok {
				id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
			}
			if r.PostForm.Get("grant_type") != "client_credentials" || id != testClientID || secret != testClientSecret {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
				return
			}
			is.mu.Lock()
			is.resources = append(is.resources, r.PostForm.Get("resource"))
			expires := is.expiresIn
			is.mu.Unlock()
			n := is.tokens.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"access_token": "at-" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": expires,
			})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(is.srv.Certificate())
	return p
}

func oauthBackend(url, issuerURL string) registration.Backend {
	b := httpBackend(url)
	b.Authentication = &registration.Authentication{Type: "oauth", Issuer: issuerURL, Resource: testResource,
		ClientID: testClientID, Flow: "client_credentials", ClientSecretRef: "env:HOOKPROXY_TEST_CLIENT_SECRET"}
	return b
}

// TestOAuthClientCredentials: the token comes from the issuer named in the registration
// (its RFC 8414 metadata, then its token endpoint, with the client secret from
// clientSecretRef and the backend as the RFC 8707 resource), is sent as the bearer token,
// and is cached until it expires or the backend rejects it (AHP-AUTH-001: the portable
// bindings are bearer and oauth).
func TestOAuthClientCredentials(t *testing.T) {
	t.Setenv("HOOKPROXY_TEST_CLIENT_SECRET", testClientSecret)
	is := newIssuer(t)
	var reject atomic.Bool
	srv, rec := newBackendServer(t, func(w http.ResponseWriter, r *http.Request, n int32) {
		if reject.Swap(false) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		jsonReply(replyBody)(w, r, n)
	})
	tr := mustNew(t, oauthBackend(srv.URL, is.srv.URL), Options{RootCAs: is.roots()})

	for i := 0; i < 2; i++ {
		if _, err := intercept(t, tr, "evt_1", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := lastAuthorization(rec); len(got) != 1 || got[0] != "Bearer at-1" {
			t.Fatalf("delivery %d: Authorization = %q, want the issued token", i, got)
		}
	}
	if n := is.tokens.Load(); n != 1 {
		t.Fatalf("%d token requests for two deliveries, want 1 (cached until expiry)", n)
	}
	is.mu.Lock()
	resources := append([]string(nil), is.resources...)
	is.mu.Unlock()
	if len(resources) != 1 || resources[0] != testResource {
		t.Errorf("token requested for resources %q, want %q", resources, testResource)
	}

	// The backend rejects the cached token: the same delivery is re-sent once, with a
	// fresh token, inside its deadline.
	reject.Store(true)
	before := rec.hits.Load()
	if _, err := intercept(t, tr, "evt_1", 5*time.Second); err != nil {
		t.Fatalf("after a 401 on a cached token: %v", err)
	}
	if got := lastAuthorization(rec); len(got) != 1 || got[0] != "Bearer at-2" || rec.hits.Load() != before+2 {
		t.Fatalf("after a 401: Authorization = %q after %d requests, want a fresh token on the one re-send", got, rec.hits.Load()-before)
	}
}

// TestOAuthRejectedFreshTokenIsNotRetried: a 401 to a token acquired for this very
// delivery is final (one re-send at most, never a loop), and a bearer secret is never
// re-sent after a 401 (there is no other secret to try).
func TestOAuthRejectedFreshTokenIsNotRetried(t *testing.T) {
	t.Setenv("HOOKPROXY_TEST_CLIENT_SECRET", testClientSecret)
	t.Setenv("HOOKPROXY_TEST_TOKEN", "tok-static")
	is := newIssuer(t)
	srv, rec := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) { w.WriteHeader(http.StatusUnauthorized) })
	bearer := httpBackend(srv.URL)
	bearer.Authentication = &registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_TOKEN"}
	for _, tc := range []struct {
		desc     string
		b        registration.Backend
		wantHits int32
	}{
		{desc: "oauth: the first token is fresh, so no re-send", b: oauthBackend(srv.URL, is.srv.URL), wantHits: 1},
		{desc: "bearer", b: bearer, wantHits: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tr := mustNew(t, tc.b, Options{RootCAs: is.roots()})
			before := rec.hits.Load()
			_, err := intercept(t, tr, "evt_1", 5*time.Second)
			wantKind(t, err, KindHTTPStatus)
			if n := rec.hits.Load() - before; n != tc.wantHits {
				t.Fatalf("%d requests, want %d", n, tc.wantHits)
			}
		})
	}
}

// TestOAuthTokenExpiry: a token whose lifetime is inside oauth2's safety margin is never
// reused: each delivery acquires a fresh one.
func TestOAuthTokenExpiry(t *testing.T) {
	t.Setenv("HOOKPROXY_TEST_CLIENT_SECRET", testClientSecret)
	is := newIssuer(t)
	is.expiresIn = 5 // under oauth2's 10 s expiry margin: expired on arrival
	srv, rec := newBackendServer(t, jsonReply(replyBody))
	tr := mustNew(t, oauthBackend(srv.URL, is.srv.URL), Options{RootCAs: is.roots()})
	for i, want := range []string{"Bearer at-1", "Bearer at-2"} {
		if _, err := intercept(t, tr, "evt_1", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := lastAuthorization(rec); len(got) != 1 || got[0] != want {
			t.Fatalf("delivery %d: Authorization = %q, want %s", i, got, want)
		}
	}
}

// TestOAuthFailuresNeverSendTheRequest: a wrong client secret, an issuer whose token
// endpoint redirects (the secret must not follow it), an untrusted issuer certificate and
// an issuer without metadata are credentials failures; the backend is never contacted and
// no error text carries the secret. An ordinary client following the same redirect is the
// control that the redirect was really answered.
func TestOAuthFailuresNeverSendTheRequest(t *testing.T) {
	elsewhere, elseRec := newBackendServer(t, jsonReply(`{}`))
	tests := []struct {
		desc   string
		secret string
		setup  func(is *issuer) (issuerURL string, opts Options)
	}{
		{desc: "wrong client secret", secret: "cs-wrong", setup: func(is *issuer) (string, Options) {
			return is.srv.URL, Options{RootCAs: is.roots()}
		}},
		{desc: "token endpoint redirects", secret: testClientSecret, setup: func(is *issuer) (string, Options) {
			is.redirect = elsewhere.URL + "/steal"
			return is.srv.URL, Options{RootCAs: is.roots()}
		}},
		{desc: "issuer certificate not trusted", secret: testClientSecret, setup: func(is *issuer) (string, Options) {
			return is.srv.URL, Options{}
		}},
		{desc: "issuer without metadata", secret: testClientSecret, setup: func(is *issuer) (string, Options) {
			return is.srv.URL + "/tenant-absent", Options{RootCAs: is.roots()}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv("HOOKPROXY_TEST_CLIENT_SECRET", tc.secret)
			is := newIssuer(t)
			iss, opts := tc.setup(is)
			if is.redirect != "" {
				// Control: an ordinary client does follow this redirect to the other server.
				c := is.srv.Client()
				resp, err := c.Post(is.srv.URL+"/token", "application/x-www-form-urlencoded", strings.NewReader("grant_type=client_credentials"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if elseRec.hits.Load() != 1 {
					t.Fatalf("control: the redirect did not reach the other server")
				}
			}
			srv, rec := newBackendServer(t, jsonReply(replyBody))
			tr := mustNew(t, oauthBackend(srv.URL, iss), opts)
			_, err := intercept(t, tr, "evt_1", 5*time.Second)
			wantKind(t, err, KindCredentials)
			if strings.Contains(err.Error(), tc.secret) {
				t.Fatalf("error %q carries the client secret", err)
			}
			if rec.hits.Load() != 0 {
				t.Fatal("the backend was contacted without a token")
			}
		})
	}
	if n := elseRec.hits.Load(); n != 1 {
		t.Fatalf("the redirect target received %d requests, want only the control's: credentials followed a redirect", n)
	}
}
