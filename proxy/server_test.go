package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/config"
)

func TestUnknownPrefixIs404AndNothingForwarded(t *testing.T) {
	up := newUpstream(t, nil)
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	for _, path := range []string{"/", "/nope/v1/chat/completions", "/openaiX/v1/models", "/OPENAI/v1/models"} {
		status, h, body := post(t, px.URL+path, `{}`, nil)
		if status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, status)
		}
		if !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: content type %q", path, h.Get("Content-Type"))
		}
		mustJSON(t, body)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("upstream received %d requests for unknown prefixes", n)
	}
}

func TestPrefixStrippedAndQueryKept(t *testing.T) {
	up := newUpstream(t, nil)
	cfg := &config.Config{Routes: []config.Route{
		{Prefix: "/openai", API: config.APIOpenAI, Upstream: up.URL},
		{Prefix: "/based/", API: config.APIPassthrough, Upstream: up.URL + "/base/"},
		{Prefix: "/q", API: config.APIPassthrough, Upstream: up.URL + "/v?key=1"},
	}}
	px := startProxy(t, cfg, nil, Options{})
	tests := []struct {
		desc, method, path, wantPath, wantQuery string
	}{
		{"chat endpoint", "POST", "/openai/v1/chat/completions?api-version=2", "/v1/chat/completions", "api-version=2"},
		{"other endpoint", "GET", "/openai/v1/models?limit=2&after=x", "/v1/models", "limit=2&after=x"},
		{"upstream base path", "GET", "/based/x/y?z=1", "/base/x/y", "z=1"},
		{"exact prefix", "GET", "/based", "/base/", ""},
		{"upstream query merged", "GET", "/q/w?a=b", "/v/w", "key=1&a=b"},
	}
	for i, tc := range tests {
		req, _ := http.NewRequest(tc.method, px.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		reqs := up.requests()
		if len(reqs) != i+1 {
			t.Fatalf("%s: upstream saw %d requests", tc.desc, len(reqs))
		}
		got := reqs[i]
		if got.Path != tc.wantPath || got.RawQuery != tc.wantQuery || got.Method != tc.method {
			t.Errorf("%s: upstream got %s %s?%s, want %s %s?%s", tc.desc, got.Method, got.Path, got.RawQuery,
				tc.method, tc.wantPath, tc.wantQuery)
		}
		if !strings.HasPrefix(up.URL, "http://"+got.Host) {
			t.Errorf("%s: Host header %q is not the upstream's", tc.desc, got.Host)
		}
	}
}

func TestCredentialsForwardedSessionHeaderConsumed(t *testing.T) {
	up := newUpstream(t, nil)
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	hdr := map[string]string{
		"Authorization":       "Bearer sk-test-0123456789",
		"X-Api-Key":           "ant-key-abcdef",
		"Anthropic-Version":   "2023-06-01",
		"X-Custom":            "kept",
		"X-Hookproxy-Session": "sess-1",
	}
	for _, path := range []string{"/openai/v1/chat/completions", "/anthropic/v1/messages", "/plain/anything"} {
		post(t, px.URL+path, `{"model":"m","messages":[]}`, hdr)
	}
	for _, got := range up.requests() {
		for _, k := range []string{"Authorization", "X-Api-Key", "Anthropic-Version", "X-Custom"} {
			if got.Header.Get(k) != hdr[k] {
				t.Errorf("%s: header %s = %q, want %q", got.Path, k, got.Header.Get(k), hdr[k])
			}
		}
		if v := got.Header.Values("X-Hookproxy-Session"); len(v) != 0 {
			t.Errorf("%s: X-Hookproxy-Session forwarded: %q", got.Path, v)
		}
		if v := got.Header.Get("X-Forwarded-For"); v != "" {
			t.Errorf("%s: proxy added X-Forwarded-For %q", got.Path, v)
		}
	}
}

func TestPassThroughIsByteIdentical(t *testing.T) {
	// A body with odd spacing, unknown fields, escapes and non-ASCII: it must arrive
	// exactly as sent when nothing subscribes, and the response must come back as sent.
	body := "{ \"model\":\"gpt-4o\" ,\n\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9llo ✓\"}],\n\t\"x_unknown\":{\"a\":[1,2.50,true]}  }"
	respBody := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],  "extra":1}`
	up := newUpstream(t, jsonResponder(200, respBody))
	tests := []struct {
		desc  string
		chain func(t *testing.T) *fakePolicy
	}{
		{"nil chain", nil},
		{"only unrelated subscriptions", func(t *testing.T) *fakePolicy { return &fakePolicy{} }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up.mu.Lock()
			up.reqs = nil
			up.mu.Unlock()
			var opts Options
			cfg := testConfig(up.URL)
			var px = startProxy(t, cfg, nil, opts)
			if tc.chain != nil {
				pol := tc.chain(t)
				ch := newTestChain(t, pol, intercept("workspace.change.before"), observe("session.end"))
				px = startProxy(t, cfg, ch, opts)
				defer func() {
					if n := len(pol.intercepted()) + len(pol.observations()); n != 0 {
						t.Errorf("policy saw %d deliveries", n)
					}
				}()
			}
			status, _, got := post(t, px.URL+"/openai/v1/chat/completions", body, nil)
			if status != 200 || string(got) != respBody {
				t.Fatalf("client got %d %s", status, got)
			}
			if r := up.only(t); string(r.Body) != body {
				t.Fatalf("upstream body differs:\n got %q\nwant %q", r.Body, body)
			}
		})
	}
}

func TestRequestBodyLimitIs413InProviderFormat(t *testing.T) {
	up := newUpstream(t, nil)
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
	for _, withChain := range []bool{false, true} {
		cfg := testConfig(up.URL)
		cfg.Limits.MaxRequestBytes = 1024
		var pol *fakePolicy
		px := startProxy(t, cfg, nil, Options{})
		if withChain {
			pol = &fakePolicy{}
			px = startProxy(t, cfg, newTestChain(t, pol, intercept("model.request.before")), Options{})
		}
		for _, chunked := range []bool{false, true} {
			for _, route := range []string{"/openai/v1/chat/completions", "/anthropic/v1/messages"} {
				var rd io.Reader = strings.NewReader(big)
				if chunked {
					rd = io.MultiReader(strings.NewReader(big)) // unknown length: sent chunked
				}
				req, _ := http.NewRequest("POST", px.URL+route, rd)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestEntityTooLarge {
					t.Fatalf("chain=%v chunked=%v %s: status %d %s", withChain, chunked, route, resp.StatusCode, b)
				}
				v := mustJSON(t, b)
				if strings.HasPrefix(route, "/anthropic") {
					if v["type"] != "error" || v["error"].(map[string]any)["type"] != "request_too_large" {
						t.Errorf("anthropic 413 body %s", b)
					}
				} else if e, ok := v["error"].(map[string]any); !ok || e["type"] != "invalid_request_error" {
					t.Errorf("openai 413 body %s", b)
				}
			}
		}
		if pol != nil && len(pol.intercepted()) != 0 {
			t.Errorf("a hook was called for an oversized body")
		}
	}
	for _, r := range up.requests() {
		if len(r.Body) > 1024 {
			t.Errorf("upstream received a %d-byte body over the limit", len(r.Body))
		}
	}
}

func TestMalformedJSONIs400WithoutHooks(t *testing.T) {
	up := newUpstream(t, nil)
	pol := &fakePolicy{}
	ch := newTestChain(t, pol, intercept("model.request.before", "turn.start", "tool.after"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	for _, route := range []string{"/openai/v1/chat/completions", "/anthropic/v1/messages"} {
		status, _, body := post(t, px.URL+route, `{"model":"m","messages":[{"role":"user",`, nil)
		if status != http.StatusBadRequest {
			t.Fatalf("%s: status %d %s", route, status, body)
		}
		v := mustJSON(t, body)
		if strings.HasPrefix(route, "/anthropic") {
			if v["type"] != "error" || v["error"].(map[string]any)["type"] != "invalid_request_error" {
				t.Errorf("anthropic 400 body %s", body)
			}
		} else if v["error"].(map[string]any)["type"] != "invalid_request_error" {
			t.Errorf("openai 400 body %s", body)
		}
	}
	if n := len(pol.intercepted()); n != 0 {
		t.Errorf("%d hooks called for a malformed body", n)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("malformed body forwarded %d times", n)
	}
}

func TestPassThroughStreamDeliversFirstChunkBeforeUpstreamEnds(t *testing.T) {
	release := make(chan struct{})
	gateTimedOut := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release: // the client has read the first event through the proxy
		case <-time.After(10 * time.Second):
			close(gateTimedOut)
		}
		for i := 2; i <= 3; i++ {
			_, _ = io.WriteString(w, "data: {\"n\":"+string(rune('0'+i))+"}\n\n")
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	req, _ := http.NewRequest("POST", px.URL+"/openai/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if first != "data: {\"n\":1}\n" {
		t.Fatalf("first line %q", first)
	}
	select {
	case <-gateTimedOut:
		t.Fatal("the first event reached the client only after the upstream finished")
	default:
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !bytes.Contains(rest, []byte("[DONE]")) {
		t.Fatalf("rest of stream %q", rest)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	for _, tc := range []struct {
		desc  string
		chain bool
	}{{"fast path", false}, {"boundary path", true}} {
		t.Run(tc.desc, func(t *testing.T) {
			started = make(chan struct{})
			cancelled = make(chan struct{})
			var px = startProxy(t, testConfig(up.URL), nil, Options{})
			if tc.chain {
				px = startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept("model.request.before", "tool.before")), Options{})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", px.URL+"/openai/v1/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			select {
			case <-started:
			case <-time.After(5 * time.Second):
				t.Fatal("upstream never called")
			}
			cancel()
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("upstream request context was not cancelled after the client disconnected")
			}
			<-errc
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		desc  string
		route config.Route
	}{
		{"mcp not yet supported", config.Route{Prefix: "/mcp", API: config.APIMCP, Upstream: "http://127.0.0.1:1/mcp"}},
		{"unknown api", config.Route{Prefix: "/x", API: "grpc", Upstream: "http://127.0.0.1:1"}},
		{"relative prefix", config.Route{Prefix: "x", API: config.APIPassthrough, Upstream: "http://127.0.0.1:1"}},
		{"pattern prefix", config.Route{Prefix: "/{id}", API: config.APIPassthrough, Upstream: "http://127.0.0.1:1"}},
		{"no scheme", config.Route{Prefix: "/x", API: config.APIPassthrough, Upstream: "127.0.0.1:1"}},
		{"credentials in upstream", config.Route{Prefix: "/x", API: config.APIPassthrough, Upstream: "https://u:p@example.com"}},
	}
	for _, tc := range tests {
		if _, err := New(&config.Config{Routes: []config.Route{tc.route}}, nil, Options{}); err == nil {
			t.Errorf("%s: New accepted %+v", tc.desc, tc.route)
		}
	}
	dup := &config.Config{Routes: []config.Route{
		{Prefix: "/a", API: config.APIPassthrough, Upstream: "http://127.0.0.1:1"},
		{Prefix: "/a/", API: config.APIPassthrough, Upstream: "http://127.0.0.1:2"},
	}}
	if _, err := New(dup, nil, Options{}); err == nil {
		t.Error("duplicate prefixes accepted")
	}
}

func TestUpstreamUnreachableIs502InProviderFormat(t *testing.T) {
	up := newUpstream(t, nil)
	addr := up.URL
	up.Close() // nothing listens there any more
	px := startProxy(t, testConfig(addr), nil, Options{})
	status, _, body := post(t, px.URL+"/anthropic/v1/messages", `{"model":"m","messages":[]}`, nil)
	if status != http.StatusBadGateway {
		t.Fatalf("status %d %s", status, body)
	}
	v := mustJSON(t, body)
	if v["type"] != "error" || v["error"].(map[string]any)["type"] != "api_error" {
		t.Errorf("body %s", body)
	}
}
