package admin

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// protectedOpts mounts one state-changing endpoint that answers with the caller's name.
func protectedOpts(auth *Auth) Options {
	return Options{Auth: auth, Protected: func(r chi.Router) {
		r.Post("/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "decided by "+Caller(r.Context()))
		})
	}}
}

func staticToken(name, secret string) Token {
	return Token{Name: name, Secret: func() (string, error) { return secret, nil }}
}

func post(t *testing.T, url, authz string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"decision":"approve"}`))
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminTokenRequiredOnProtectedEndpoints(t *testing.T) {
	base := serve(t, protectedOpts(&Auth{Tokens: []Token{staticToken("admin", "s3cret-one"), staticToken("alice", "s3cret-two")}}))
	for _, tc := range []struct {
		name, authz string
		status      int
		body        string
	}{
		{"no header", "", http.StatusUnauthorized, "unauthorized"},
		{"wrong token", "Bearer s3cret-on", http.StatusUnauthorized, "not valid"},
		{"token with extra byte", "Bearer s3cret-one!", http.StatusUnauthorized, "not valid"},
		{"basic scheme", "Basic s3cret-one", http.StatusUnauthorized, "unauthorized"},
		{"token as the whole header", "s3cret-one", http.StatusUnauthorized, "unauthorized"},
		// Controls: the right tokens pass, and the decider is named after the token.
		{"default token", "Bearer s3cret-one", http.StatusOK, "decided by admin"},
		{"named token, scheme in lower case", "bearer s3cret-two", http.StatusOK, "decided by alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, base+"/approvals/x", tc.authz)
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Fatalf("got %d %q, want %d containing %q", status, body, tc.status, tc.body)
			}
		})
	}
	// Loopback is no excuse once a token is configured.
	if status, _ := post(t, base+"/approvals/x", ""); status != http.StatusUnauthorized {
		t.Fatalf("a loopback client without the token got %d", status)
	}
	// The unprotected probes stay open to the kubelet without a token.
	if resp, _ := do(t, http.MethodGet, base+"/healthz", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

// Without a token the protected endpoints serve loopback peers only, judged from the
// connection, not from forwarding headers.
func TestAdminWithoutTokenServesLoopbackOnly(t *testing.T) {
	h := New(protectedOpts(nil))
	for _, tc := range []struct {
		peer   string
		header string
		status int
	}{
		{"192.0.2.10:51000", "", http.StatusForbidden},
		{"[2001:db8::1]:51000", "", http.StatusForbidden},
		{"192.0.2.10:51000", "127.0.0.1", http.StatusForbidden}, // a forged X-Forwarded-For changes nothing
		{"127.0.0.1:51000", "", http.StatusOK},                  // control
		{"[::1]:51000", "", http.StatusOK},                      // control
	} {
		req := httptest.NewRequest(http.MethodPost, "/approvals/x", strings.NewReader(`{}`))
		req.RemoteAddr = tc.peer
		if tc.header != "" {
			req.Header.Set("X-Forwarded-For", tc.header)
			req.Header.Set("X-Real-IP", tc.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("peer %s (forwarded %q): got %d %q, want %d", tc.peer, tc.header, rec.Code, rec.Body.String(), tc.status)
		}
		if tc.status == http.StatusOK && rec.Body.String() != "decided by "+LoopbackCaller {
			t.Errorf("caller: %q", rec.Body.String())
		}
	}
	// Over real loopback HTTP too.
	base := serve(t, protectedOpts(nil))
	if status, body := post(t, base+"/approvals/x", ""); status != http.StatusOK || body != "decided by loopback" {
		t.Fatalf("loopback without a token: %d %q", status, body)
	}
}

// A token kept in a file is read per request: a rotation applies at once, and a token
// that cannot be read refuses rather than opening the endpoint.
func TestAdminTokenFileRotationAndUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func() (string, error) {
		b, err := os.ReadFile(path)
		return strings.TrimSpace(string(b)), err
	}
	base := serve(t, protectedOpts(&Auth{Tokens: []Token{{Name: "ops", Secret: read}}}))
	if status, _ := post(t, base+"/approvals/x", "Bearer first"); status != http.StatusOK {
		t.Fatalf("first token: %d", status)
	}
	if err := os.WriteFile(path, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if status, _ := post(t, base+"/approvals/x", "Bearer first"); status != http.StatusUnauthorized {
		t.Fatalf("rotated-out token: %d", status)
	}
	if status, _ := post(t, base+"/approvals/x", "Bearer second"); status != http.StatusOK {
		t.Fatalf("rotated-in token: %d", status)
	}
	_ = os.Remove(path)
	if status, _ := post(t, base+"/approvals/x", "Bearer second"); status != http.StatusServiceUnavailable {
		t.Fatalf("unreadable token: %d", status)
	}
	// An empty secret never matches an empty-looking token.
	empty := serve(t, protectedOpts(&Auth{Tokens: []Token{{Name: "x", Secret: func() (string, error) { return "", errors.New("gone") }}}}))
	if status, _ := post(t, empty+"/approvals/x", "Bearer  "); status != http.StatusUnauthorized {
		t.Fatalf("blank bearer: %d", status)
	}
}

func TestManifestWithApprovalsAdvertisesAsk(t *testing.T) {
	has := func(m CapabilityManifest) bool {
		for _, e := range m.Events {
			if e.Event == "tool.before" {
				for _, x := range e.Capabilities.Effects {
					if x == "ask" {
						return true
					}
				}
			}
		}
		return false
	}
	base := Manifest()
	if has(base) {
		t.Fatal("the manifest without an approval path advertises ask")
	}
	if !has(WithApprovals(base)) {
		t.Fatal("WithApprovals does not advertise ask")
	}
	if has(base) {
		t.Fatal("WithApprovals changed its argument")
	}
}

// The manifest with approvals is still valid against the protocol's schema, and ask stays
// inside tool.before's per-event bound.
func TestManifestWithApprovalsValidates(t *testing.T) {
	if err := ahptest.Validate(t, "capabilities-response.schema.json", discovery(t, WithApprovals(Manifest()))); err != nil {
		t.Fatal(err)
	}
	for _, e := range WithApprovals(Manifest()).Events {
		for _, eff := range e.Capabilities.Effects {
			if eff == ahp.EffectAsk && !slices.Contains(ahp.EventBounds[e.Event].Effects, eff) {
				t.Errorf("%s: ask exceeds the per-event bound", e.Event)
			}
		}
	}
}
