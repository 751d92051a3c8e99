package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// contractApprovals implements the approvals API the console is a client of (GET
// /approvals?state=, GET/POST /approvals/{id}, GET /approvals/events) over records in
// memory, so the console's page is tested against the contract alone.
type contractApprovals struct {
	mu      sync.Mutex
	records []map[string]any
	posts   []map[string]string // decisions received, with the caller
}

func (c *contractApprovals) routes() http.Handler {
	r := chi.NewRouter()
	r.Get("/approvals", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		out := []map[string]any{}
		for _, rec := range c.records {
			pending := rec["state"] == "pending"
			if st := r.URL.Query().Get("state"); st == "all" || (st == "decided") != pending {
				out = append(out, rec)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	r.Get("/approvals/events", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": ready\n\n")
	})
	r.Post("/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		if json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, rec := range c.records {
			if rec["id"] != chi.URLParam(r, "id") {
				continue
			}
			if rec["state"] != "pending" || body["digest"] != "" && body["digest"] != rec["digest"] {
				w.WriteHeader(http.StatusConflict)
				return
			}
			body["by"] = Caller(r.Context())
			c.posts = append(c.posts, body)
			rec["state"], rec["decidedBy"], rec["reason"] = body["decision"]+"d", body["by"], body["reason"]
			if body["decision"] == "deny" {
				rec["state"] = "denied"
			}
			_ = json.NewEncoder(w).Encode(rec)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})
	return r
}

const testConsoleToken = "console-unit-token-8d2f"

func newTestConsole(t *testing.T, ap *contractApprovals) (*httptest.Server, *Window) {
	t.Helper()
	win := NewWindow(3)
	h := New(Options{
		Auth:    &Auth{Tokens: []Token{{Name: "ops", Secret: func() (string, error) { return testConsoleToken, nil }}}},
		Console: &ConsoleOptions{Window: win, Approvals: ap.routes()},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, win
}

// signIn posts the token to the login form and returns a client holding the session cookie.
func signIn(t *testing.T, srv *httptest.Server) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {testConsoleToken}, "next": {"/ui/approvals"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/approvals" {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == consoleCookie {
			ck = k
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/", ck)
	}
	if strings.Contains(ck.Value, testConsoleToken) {
		t.Fatalf("the session cookie carries the token")
	}
	return c
}

func decide(t *testing.T, c *http.Client, srv *httptest.Server, id string, form url.Values, site string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/approvals/"+id, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", site)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// TestConsoleApprovalsPage: the Approvals page lists the pending call (tool, input,
// digest, reasons) and the decided history; a decision posted from the page reaches the
// API with the digest shown and the signed-in token's name; a replay is reported as
// already decided. A decision from another site riding on the session cookie is refused
// (control: the same request from the console's own page is accepted).
func TestConsoleApprovalsPage(t *testing.T) {
	ap := &contractApprovals{records: []map[string]any{
		{"id": "apr_1", "state": "pending", "createdAt": time.Now(), "expiresAt": time.Now().Add(time.Minute),
			"route": "/openai", "session": "ses_1", "tool": map[string]any{"name": "Bash", "input": map[string]string{"command": "git push"}},
			"digest": "sha256:abc", "askedBy": []string{"hookproxy.builtin.tools"}, "reasons": []string{"needs approval (rule push)"}},
		{"id": "apr_0", "state": "expired", "tool": map[string]any{"name": "Bash"}, "reason": "approval timed out"},
	}}
	srv, _ := newTestConsole(t, ap)
	c := signIn(t, srv)

	resp, err := c.Get(srv.URL + "/ui/approvals")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{`id="approval-apr_1"`, "git push", "sha256:abc", "needs approval (rule push)", "approval timed out", `value="sha256:abc"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("approvals page lacks %q", want)
		}
	}

	form := url.Values{"decision": {"approve"}, "reason": {"ok to push"}, "digest": {"sha256:abc"}}
	if r := decide(t, c, srv, "apr_1", form, "cross-site"); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site decision: %d, want 403", r.StatusCode)
	}
	if len(ap.posts) != 0 {
		t.Fatalf("a cross-site decision reached the API: %v", ap.posts)
	}
	r := decide(t, c, srv, "apr_1", form, "same-origin")
	if r.StatusCode != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "approved+apr_1") {
		t.Fatalf("decision from the page: %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	if len(ap.posts) != 1 || ap.posts[0]["decision"] != "approve" || ap.posts[0]["digest"] != "sha256:abc" || ap.posts[0]["by"] != "ops" {
		t.Fatalf("the API received %v, want the approval with the digest, by ops", ap.posts)
	}
	r = decide(t, c, srv, "apr_1", form, "same-origin")
	if !strings.Contains(r.Header.Get("Location"), url.QueryEscape("already decided")) {
		t.Fatalf("a replayed decision: %q", r.Header.Get("Location"))
	}
	if r := decide(t, c, srv, "apr_9", form, "same-origin"); !strings.Contains(r.Header.Get("Location"), "no+approval") {
		t.Fatalf("an unknown approval: %q", r.Header.Get("Location"))
	}
}

// TestConsoleWindow: the window keeps the last N decisions, filters them, summarises
// sessions and backends, and a live subscriber that does not read never blocks Add.
func TestConsoleWindow(t *testing.T) {
	w := NewWindow(3)
	_, cancel := w.Subscribe() // never read
	defer cancel()
	for i := range subscriberBuffer + 10 {
		w.Add(Decision{EventID: fmt.Sprint(i), Session: "s" + fmt.Sprint(i%2), Route: "/openai", EventType: "tool.before",
			Enforcement: map[bool]string{true: "refused", false: "forwarded"}[i%2 == 1], RequestID: fmt.Sprint(i),
			Interceptors: []DecisionInterceptor{{Backend: "b", Outcome: "accepted", LatencyMs: float64(i)}}})
	}
	all := w.Recent(Filter{}, 10)
	if len(all) != 3 || all[0].EventID != fmt.Sprint(subscriberBuffer+9) || all[2].EventID != fmt.Sprint(subscriberBuffer+7) {
		t.Fatalf("window = %v, want the last 3, newest first", all)
	}
	if got := w.Recent(Filter{Outcome: "refused"}, 10); len(got) != 2 || !got[0].Refused() || !got[1].Refused() {
		t.Fatalf("refused filter: %v", got)
	}
	if got := w.Recent(Filter{Policy: "other"}, 10); len(got) != 0 {
		t.Fatalf("policy filter: %v", got)
	}
	ss := w.Sessions()
	if len(ss) != 2 || ss[0].Decisions+ss[1].Decisions != 3 {
		t.Fatalf("sessions: %+v", ss)
	}
	if b := w.Backends(); len(b) != 1 || b[0].Calls != 3 || b[0].MaxMs != float64(subscriberBuffer+9) {
		t.Fatalf("backends: %+v", b)
	}
}

// TestConsoleEscapesText: a tool name or reason is text on every page, never markup.
func TestConsoleEscapesText(t *testing.T) {
	srv, win := newTestConsole(t, &contractApprovals{})
	win.Add(Decision{EventID: "e1", Session: "s1", EventType: "tool.before", Tool: `<script>alert(1)</script>`,
		Enforcement: "refused", Denial: &DecisionDenial{Reason: `<img src=x onerror=alert(2)>`, Code: "c"}})
	for _, p := range []string{"/ui/", "/ui/sessions/s1"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+testConsoleToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(b), "<script>alert") || strings.Contains(string(b), "<img src=x") ||
			!strings.Contains(string(b), "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s (%d) does not show the text escaped:\n%s", p, resp.StatusCode, b)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", p, csp)
		}
	}
}

// TestConsoleWithoutTokenLoopbackOnly: with no admin token the console serves loopback
// peers (control) and refuses any other peer, whatever its headers say.
func TestConsoleWithoutTokenLoopbackOnly(t *testing.T) {
	h := New(Options{Console: &ConsoleOptions{Window: NewWindow(10)}})
	for _, tc := range []struct {
		peer string
		want int
	}{{"127.0.0.1:5000", http.StatusOK}, {"[::1]:5000", http.StatusOK}, {"10.1.2.3:5000", http.StatusForbidden}, {"192.168.0.9:5000", http.StatusForbidden}} {
		for _, path := range []string{"/ui/", "/ui/sessions", "/ui/health"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.RemoteAddr = tc.peer
			req.Header.Set("X-Forwarded-For", "127.0.0.1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("GET %s from %s: %d, want %d", path, tc.peer, rec.Code, tc.want)
			}
		}
	}
}
