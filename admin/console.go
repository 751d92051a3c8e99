package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/pinning"
)

// The console is server-rendered HTML (html/template) with one small vanilla script for
// what must change without a reload: the live view (server-sent events) and the approvals
// queue. Everything is embedded, so the single binary serves it offline; there is nothing
// to build. Data reaches the page only as template text or as JSON set with textContent,
// never as markup, so a tool name or reason cannot inject script.
//
//go:embed ui
var consoleFS embed.FS

// ConsoleOptions configure the console (/ui/ on the admin listener).
type ConsoleOptions struct {
	// Window is the bounded window of recent decisions (required to show any).
	Window *Window
	// Health describes the chain in force and the state store; nil shows none.
	Health func() Health
	// Approvals serves the approvals API (GET /approvals?state=, GET and POST
	// /approvals/{id}, GET /approvals/events); nil hides the Approvals page. The console
	// calls it in-process with the request's own authorization.
	Approvals http.Handler
	// Shadow reports whether the configuration in force has a shadow chain; nil or false
	// hides the Shadow page. Its settlements reach the page through Window.
	Shadow func() bool
	// Pins returns the current tool-definition pinning (nil: off, which hides the Pins
	// page). The page reads the pins and pending definitions from it, and the recent
	// changes and findings from Window.
	Pins func() *pinning.Pinner
	// Scrub is applied to each tool description the Pins page shows (the audit log's
	// credential scrubber); nil shows no description.
	Scrub func(string) string
	// Auth is the admin listener's authentication, which the console sits behind (nil:
	// no token, loopback clients only).
	Auth   *Auth
	Logger *zap.Logger
}

// Health is what the Health page shows besides the window's backend statistics.
type Health struct {
	Generation   uint64
	Registration string // where the chain came from
	Hooks        []HookView
	Store        StoreView
	AuditPath    string
	AuditDropped uint64
	AuditQueue   int
}

// HookView is one backend of the chain in force.
type HookView struct {
	ID, Transport, Target string // Target: policy name, URL or command (no credentials)
	Subscriptions         []SubscriptionView
}

// SubscriptionView is one subscription of a backend.
type SubscriptionView struct {
	Events        []string
	Mode          string
	FailurePolicy string
	TimeoutMs     int
}

// StoreView is the state store's status.
type StoreView struct {
	Backend string
	Down    bool
}

const (
	consoleCookie = "hookproxy_console"
	// pageLimit bounds the decisions one page lists.
	pageLimit = 200
	// sseKeepAlive keeps idle event streams open through proxies.
	sseKeepAlive = 15 * time.Second
)

type console struct {
	opts  ConsoleOptions
	pages map[string]*template.Template
	log   *zap.Logger
}

// NewConsole returns the console's handler, to be mounted at /ui.
func NewConsole(opts ConsoleOptions) http.Handler {
	c := &console{opts: opts, log: opts.Logger, pages: map[string]*template.Template{}}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	funcs := template.FuncMap{
		"since": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
		"date":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
		"join":  strings.Join,
		"outcomes": func() []string {
			return []string{"forwarded", "rewritten", "refused", "stopped", "supplied", "forwarded_unexamined"}
		},
	}
	funcs["short"] = shortDigest
	funcs["counts"] = sortedCounts
	for _, p := range []string{"live", "sessions", "session", "approvals", "health", "shadow", "pins", "login"} {
		c.pages[p] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(consoleFS, "ui/layout.html", "ui/"+p+".html"))
	}
	static, _ := fs.Sub(consoleFS, "ui/static")

	r := chi.NewRouter()
	r.Get("/login", c.loginPage)
	r.Post("/login", c.login)
	r.Group(func(r chi.Router) {
		r.Use(c.authorize)
		r.Handle("/static/*", http.StripPrefix("/ui/static/", http.FileServer(http.FS(static))))
		r.Get("/", c.live)
		r.Get("/events", c.events)
		r.Get("/sessions", c.sessions)
		r.Get("/sessions/{id}", c.session)
		r.Get("/health", c.health)
		r.Get("/shadow", c.shadowPage)
		r.Get("/pins", c.pinsPage)
		r.Post("/pins/{action}", c.reviewPin)
		r.Get("/approvals", c.approvals)
		r.Get("/approvals/events", c.approvalEvents)
		r.Post("/approvals/{id}", c.decide)
		r.Post("/logout", c.logout)
	})
	return r
}

// ---- authorization ----

// authorize puts the console behind the admin listener's authentication (Auth): with
// tokens, the Bearer token, or — for a browser, which cannot add a header to a page load
// or an EventSource — the session cookie the login form sets; without, loopback peers
// only. A page load without either is sent to the login form; anything else gets the
// Auth's own refusal.
func (c *console) authorize(next http.Handler) http.Handler {
	guarded := c.opts.Auth.Wrap(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.tokens() || r.Header.Get("Authorization") != "" {
			guarded.ServeHTTP(w, r)
			return
		}
		if ck, err := r.Cookie(consoleCookie); err == nil {
			if name := c.cookieCaller(ck.Value); name != "" {
				// A cookie rides along on requests other sites start: a state change must
				// come from a page of this origin.
				if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
					writeText(w, http.StatusForbidden, "forbidden: cross-origin request\n")
					return
				}
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, name)))
				return
			}
		}
		if r.Method == http.MethodGet && acceptsHTML(r) {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// tokens reports whether any admin token is configured.
func (c *console) tokens() bool { return c.opts.Auth != nil && len(c.opts.Auth.Tokens) > 0 }

// sessionValue is the cookie value for a token: a digest of it, never the token, so the
// cookie cannot be replayed as a Bearer token and a rotated token ends every session.
func sessionValue(name, secret string) string {
	sum := sha256.Sum256([]byte("hookproxy console session\x00" + name + "\x00" + secret))
	return hex.EncodeToString(sum[:])
}

// cookieCaller returns the name of the token whose session value v is ("" for none).
func (c *console) cookieCaller(v string) string {
	found := ""
	for _, t := range c.opts.Auth.Tokens {
		s, err := t.Secret()
		if err != nil || s == "" {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(v), []byte(sessionValue(t.Name, s))) == 1 && found == "" {
			found = t.Name
		}
	}
	return found
}

// sameOrigin reports whether a browser request came from a page of this origin: the
// browser's own Sec-Fetch-Site says so where it is sent (every current browser); else the
// Origin header must name this host. An opaque origin ("null") is not this origin.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true
}

func acceptsHTML(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") }

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.tokens() {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next")), "Failed": r.URL.Query().Has("failed")})
}

// login checks the token typed into the form and sets the session cookie: HttpOnly (no
// script reads it), SameSite=Strict (no other site sends it), scoped to /ui/.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.FormValue("next"))
	if !c.tokens() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	given := r.FormValue("token")
	name, err := c.opts.Auth.match(given)
	if err != nil || name == "" {
		c.log.Warn("console: refused a sign-in with a wrong token", zap.String("peer", r.RemoteAddr))
		http.Redirect(w, r, "/ui/login?failed=1&next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: sessionValue(name, given), Path: "/ui/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect inside the console.
func safeNext(n string) string {
	if !strings.HasPrefix(n, "/ui/") || strings.HasPrefix(n, "//") || strings.Contains(n, "\\") {
		return "/ui/"
	}
	return n
}

// ---- pages ----

func (c *console) render(w http.ResponseWriter, page string, data map[string]any) {
	data["Page"] = page
	data["Approvals"] = c.opts.Approvals != nil
	data["Shadow"] = c.shadowOn()
	data["Pins"] = c.pinner() != nil
	data["Login"] = c.tokens()
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, data); err != nil {
		c.log.Error("console: render", zap.String("page", page), zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Only this origin's own script and style; no framing.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	// Links out of the console carry no address of it; its own requests keep their Origin.
	h.Set("Referrer-Policy", "same-origin")
	_, _ = buf.WriteTo(w)
}

func filterOf(r *http.Request) Filter {
	q := r.URL.Query()
	return Filter{Route: q.Get("route"), Session: q.Get("session"), Boundary: q.Get("boundary"),
		Outcome: q.Get("outcome"), Policy: q.Get("policy")}
}

func (c *console) live(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r)
	c.render(w, "live", map[string]any{"Filter": f, "Decisions": c.opts.Window.Recent(f, pageLimit)})
}

func (c *console) sessions(w http.ResponseWriter, _ *http.Request) {
	c.render(w, "sessions", map[string]any{"Sessions": c.opts.Window.Sessions()})
}

// requestGroup is one proxied request of a session's timeline.
type requestGroup struct {
	RequestID string
	Route     string
	Start     time.Time
	Status    int
	Decisions []Decision
}

func (c *console) session(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var groups []*requestGroup
	for _, d := range c.opts.Window.Session(id) {
		var g *requestGroup
		if n := len(groups); n > 0 && d.RequestID != "" && groups[n-1].RequestID == d.RequestID {
			g = groups[n-1]
		} else {
			g = &requestGroup{RequestID: d.RequestID, Route: d.Route, Start: d.Time}
			groups = append(groups, g)
		}
		if d.UpstreamStatus != 0 {
			g.Status = d.UpstreamStatus
		}
		g.Decisions = append(g.Decisions, d)
	}
	if groups == nil {
		w.WriteHeader(http.StatusNotFound)
	}
	c.render(w, "session", map[string]any{"ID": id, "Requests": groups})
}

func (c *console) health(w http.ResponseWriter, _ *http.Request) {
	var h *Health
	if c.opts.Health != nil {
		v := c.opts.Health()
		h = &v
	}
	c.render(w, "health", map[string]any{"Health": h, "Backends": c.opts.Window.Backends()})
}

// events streams the decisions matching the query's filter as they are added.
func (c *console) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok || c.opts.Window == nil {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	f := filterOf(r)
	subscribe, rollout := c.opts.Window.Subscribe, r.URL.Query().Get("rollout") != ""
	if rollout {
		// The Shadow and Pins pages: only what changes them, a shadow disagreement or a
		// tool-definitions decision; they fetch their part again on each.
		subscribe = c.opts.Window.SubscribeWithShadow
	}
	ch, cancel := subscribe()
	defer cancel()
	sseHeaders(w)
	fl.Flush()
	tick := time.NewTicker(sseKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			_, _ = io.WriteString(w, ": keep-alive\n\n")
			fl.Flush()
		case d := <-ch:
			if !f.Match(&d) || rollout && d.Shadow == nil && d.EventType != EventToolDefinitions {
				continue
			}
			b, err := json.Marshal(d)
			if err != nil {
				continue
			}
			_, _ = io.WriteString(w, "event: decision\ndata: ")
			_, _ = w.Write(b)
			_, _ = io.WriteString(w, "\n\n")
			fl.Flush()
		}
	}
}

func sseHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// ---- approvals (a client of the approvals API, in-process) ----

// approvalRecord is the approvals API's record (the fields the console shows).
type approvalRecord struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	Route     string    `json:"route"`
	Session   string    `json:"session"`
	Tool      struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"tool"`
	Digest    string    `json:"digest"`
	AskedBy   []string  `json:"askedBy"`
	Reasons   []string  `json:"reasons"`
	DecidedBy string    `json:"decidedBy"`
	DecidedAt time.Time `json:"decidedAt"`
	Reason    string    `json:"reason"`
}

// Left is the time left before a pending record expires, rounded to seconds.
func (a approvalRecord) Left() string {
	d := time.Until(a.ExpiresAt).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

// InputText is the call's arguments as indented JSON.
func (a approvalRecord) InputText() string {
	var compact, out bytes.Buffer
	if json.Compact(&compact, a.Tool.Input) != nil || json.Indent(&out, compact.Bytes(), "", "  ") != nil {
		return string(a.Tool.Input)
	}
	return out.String()
}

// callAPI sends one request to the approvals API in-process, as the console's caller.
func (c *console) callAPI(ctx context.Context, method, target string, body []byte) (int, []byte) {
	// The console already authorized its caller: the request runs with that caller
	// (Caller names the decider) on the API's handler without a second check.
	req := httptest.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	req.RemoteAddr = "127.0.0.1:0"
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	c.opts.Approvals.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func (c *console) listApprovals(ctx context.Context, state string) ([]approvalRecord, error) {
	code, body := c.callAPI(ctx, http.MethodGet, "/approvals?state="+state, nil)
	if code != http.StatusOK {
		return nil, &apiError{code, body}
	}
	var out []approvalRecord
	if err := json.Unmarshal(body, &out); err != nil {
		// The contract allows a wrapping object too: {"approvals": [...]}.
		var wrapped struct {
			Approvals []approvalRecord `json:"approvals"`
		}
		if err2 := json.Unmarshal(body, &wrapped); err2 != nil {
			return nil, err
		}
		out = wrapped.Approvals
	}
	return out, nil
}

type apiError struct {
	code int
	body []byte
}

func (e *apiError) Error() string {
	return "approvals API answered HTTP " + http.StatusText(e.code) + ": " + strings.TrimSpace(string(e.body))
}

func (c *console) approvals(w http.ResponseWriter, r *http.Request) {
	if c.opts.Approvals == nil {
		http.NotFound(w, r)
		return
	}
	data := map[string]any{"Notice": r.URL.Query().Get("notice")}
	pending, err := c.listApprovals(r.Context(), "pending")
	if err != nil {
		data["Error"] = err.Error()
	}
	decided, err := c.listApprovals(r.Context(), "decided")
	if err != nil {
		data["Error"] = err.Error()
	}
	data["Pending"], data["Decided"] = pending, decided
	c.render(w, "approvals", data)
}

// decide posts the form's decision to the approvals API and returns to the queue.
func (c *console) decide(w http.ResponseWriter, r *http.Request) {
	if c.opts.Approvals == nil {
		http.NotFound(w, r)
		return
	}
	decision := r.FormValue("decision")
	if decision != "approve" && decision != "deny" {
		http.Error(w, `decision must be "approve" or "deny"`, http.StatusBadRequest)
		return
	}
	// The digest shown with the call goes along: the decision applies to that exact call
	// and is refused (409) if the record is about another.
	body, _ := json.Marshal(map[string]string{"decision": decision, "reason": r.FormValue("reason"), "digest": r.FormValue("digest")})
	id := chi.URLParam(r, "id")
	code, resp := c.callAPI(r.Context(), http.MethodPost, "/approvals/"+url.PathEscape(id), body)
	notice := decision + "d " + id
	if decision == "deny" {
		notice = "denied " + id
	}
	switch code {
	case http.StatusOK:
	case http.StatusNotFound:
		notice = "no approval " + id
	case http.StatusConflict:
		notice = id + " was already decided or has expired"
	default:
		notice = (&apiError{code, resp}).Error()
	}
	http.Redirect(w, r, "/ui/approvals?notice="+url.QueryEscape(notice), http.StatusSeeOther)
}

// approvalEvents relays the approvals API's event stream to the page, which reloads its
// queue on each event.
func (c *console) approvalEvents(w http.ResponseWriter, r *http.Request) {
	if c.opts.Approvals == nil {
		http.NotFound(w, r)
		return
	}
	req := r.Clone(r.Context())
	req.URL = &url.URL{Path: "/approvals/events"}
	req.RequestURI = "/approvals/events"
	req.RemoteAddr = "127.0.0.1:0"
	req.Header = http.Header{"Accept": {"text/event-stream"}}
	c.opts.Approvals.ServeHTTP(w, req)
}
