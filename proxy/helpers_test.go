package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// recorded is exactly what the fake upstream received.
type recorded struct {
	Method, Path, RawPath, RawQuery, Host string
	Header                                http.Header
	Body                                  []byte
}

// fakeUpstream is an httptest server that records every request and answers with
// respond (default: 200 {"ok":true}).
type fakeUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	respond func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newUpstream(t testing.TB, respond func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{respond: respond}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, recorded{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath,
			RawQuery: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		if u.respond != nil {
			u.respond(w, r, body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *fakeUpstream) requests() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.reqs...)
}

// only returns the single request the upstream received.
func (u *fakeUpstream) only(t testing.TB) recorded {
	t.Helper()
	reqs := u.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream received %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

func jsonResponder(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func sseResponder(events ...string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

// testConfig routes /openai and /anthropic (and /plain as passthrough) to upstream.
func testConfig(upstream string) *config.Config {
	return &config.Config{
		Source: "urn:hookproxy:test",
		Routes: []config.Route{
			{Prefix: "/openai", API: config.APIOpenAI, Upstream: upstream},
			{Prefix: "/anthropic", API: config.APIAnthropic, Upstream: upstream},
			{Prefix: "/plain", API: config.APIPassthrough, Upstream: upstream},
		},
	}
}

// startProxy is all an end-to-end test needs: proxy.New + httptest.NewServer.
func startProxy(t testing.TB, cfg *config.Config, ch *chain.Chain, opts Options) *httptest.Server {
	t.Helper()
	s, err := New(cfg, ch, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); _ = s.Close() })
	return srv
}

// fakePolicy is an in-process interceptor whose effects a test scripts per event.
type fakePolicy struct {
	mu       sync.Mutex
	calls    []*ahp.InterceptParams
	observed []*ahp.Event
	effects  func(ev *ahp.Event) []ahp.Effect
	fail     error
}

func (f *fakePolicy) Intercept(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.Params)
	f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	res := ahp.NoEffects()
	if f.effects != nil {
		if effs := f.effects(req.Params.Event); effs != nil {
			res.Effects = effs
		}
	}
	return res, nil
}

func (f *fakePolicy) Observe(_ context.Context, p *ahp.ObserveParams) error {
	f.mu.Lock()
	f.observed = append(f.observed, p.Event)
	f.mu.Unlock()
	return nil
}

func (f *fakePolicy) intercepted() []*ahp.InterceptParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*ahp.InterceptParams(nil), f.calls...)
}

func (f *fakePolicy) observations() []*ahp.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*ahp.Event(nil), f.observed...)
}

// callsOf returns the intercepted events of one type.
func (f *fakePolicy) callsOf(typ string) []*ahp.InterceptParams {
	var out []*ahp.InterceptParams
	for _, p := range f.intercepted() {
		if p.Event.Type == typ {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakePolicy) observedOf(typ string) []*ahp.Event {
	var out []*ahp.Event
	for _, e := range f.observations() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// sub is one subscription of the test backend.
type sub struct {
	events []string
	mode   string // intercept | observe
}

// newTestChain registers policy as backend "test-backend" with the given subscriptions
// (intercept subscriptions fail closed, body content).
func newTestChain(t testing.TB, policy *fakePolicy, subs ...sub) *chain.Chain {
	t.Helper()
	return newTestChainWith(t, policy, subs...)
}

// newTestChainWith is newTestChain for any interceptor.
func newTestChainWith(t testing.TB, policy ahp.Interceptor, subs ...sub) *chain.Chain {
	t.Helper()
	b := registration.Backend{ID: "test-backend", Transport: registration.Transport{Type: registration.TransportInProcess, Policy: "fake"}}
	for _, s := range subs {
		rs := registration.Subscription{Events: s.events, Mode: s.mode, Content: map[string]string{"default": "body"}}
		if s.mode == registration.ModeIntercept {
			rs.TimeoutMs, rs.FailurePolicy = 5000, registration.FailClosed
		}
		b.Subscriptions = append(b.Subscriptions, rs)
	}
	doc := &registration.Document{ProtocolVersion: ahp.ProtocolVersion, Hooks: []registration.Backend{b}}
	ch, err := chain.New(doc, chain.Options{
		Source:         "urn:hookproxy:test",
		ObserveTimeout: 2 * time.Second,
		Policies: map[string]transport.PolicyFactory{
			"fake": func(json.RawMessage) (ahp.Interceptor, error) { return policy, nil },
		},
	})
	if err != nil {
		t.Fatalf("chain.New: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func intercept(events ...string) sub { return sub{events: events, mode: registration.ModeIntercept} }
func observe(events ...string) sub   { return sub{events: events, mode: registration.ModeObserve} }

// assertValidIntercepts checks every hooks/intercept request the policy received against
// the protocol's JSON Schema: hookproxy's events and advertisements must be valid AHP.
func assertValidIntercepts(t *testing.T, f *fakePolicy) {
	t.Helper()
	for _, p := range f.intercepted() {
		frame, err := json.Marshal(ahp.Request{JSONRPC: "2.0", ID: json.RawMessage(`"` + p.Event.ID + `"`),
			Method: ahp.MethodIntercept, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := ahptest.ValidIfAvailable(t, "intercept-request.schema.json", frame); err != nil {
			t.Errorf("%s intercept request is not valid AHP: %v\n%s", p.Event.Type, err, frame)
		}
	}
}

func assertValidObservations(t *testing.T, f *fakePolicy) {
	t.Helper()
	for _, ev := range f.observations() {
		frame, err := json.Marshal(ahp.Request{JSONRPC: "2.0", Method: ahp.MethodObserve,
			Params: &ahp.ObserveParams{ProtocolVersion: ahp.ProtocolVersion, Event: ev}})
		if err != nil {
			t.Fatal(err)
		}
		if err := ahptest.ValidIfAvailable(t, "observe-notification.schema.json", frame); err != nil {
			t.Errorf("%s observation is not valid AHP: %v\n%s", ev.Type, err, frame)
		}
	}
}

// post sends body to url with headers and returns status, headers and body.
func post(t testing.TB, url, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// mustJSON decodes b into a generic value, failing the test on invalid JSON.
func mustJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// textOf joins the text of every part of every message.
func textOf(items []ahp.Message) string {
	var b bytes.Buffer
	for _, m := range items {
		for _, p := range m.Parts {
			b.WriteString(p.TextOf())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func msgs(t testing.TB, v ...ahp.Message) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func textMessage(id, role, text string) ahp.Message {
	return ahp.Message{ID: id, Role: role, Parts: []ahp.Part{ahp.TextPart(id+".0", text)}}
}

var errBackendDown = errors.New("dial tcp 10.0.0.7:443: connection refused (token=hunter2)")

// waitObserved waits until the policy has received n observations of typ. Observations are
// owned by the request, but a client can finish reading a Content-Length body before the
// handler returns, so a test waits for the handler instead of racing it.
func waitObserved(t testing.TB, f *fakePolicy, typ string, n int) []*ahp.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := f.observedOf(typ)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}
