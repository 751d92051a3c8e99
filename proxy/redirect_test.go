package proxy

import (
	"io"

	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"

	"github.com/tidwall/gjson"
)

func TestUpstreamRedirectNotPassedOn(t *testing.T) {
	// A redirect-following client must not re-send its body to where the upstream points.
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{}`))
	}))
	defer other.Close()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"key AKIAIOSFODNN7EXAMPLE"}]}`
	for _, mode := range []string{"proxy", "allowRedirects", "direct"} {
		elsewhere.Store(0)
		url := up.URL + "/v1/chat/completions"
		if mode != "direct" {
			cfg := testConfig(up.URL)
			cfg.Routes[0].AllowRedirects = mode == "allowRedirects"
			url = startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept("model.request.before")), Options{}).URL + chatPath
		}
		resp, err := http.Post(url, "application/json", strings.NewReader(body)) // follows redirects
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch mode {
		case "proxy":
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(gjson.GetBytes(b, "error.message").String(), "redirect") || elsewhere.Load() != 0 {
				t.Errorf("proxy: %d %s, other host got %d requests", resp.StatusCode, b, elsewhere.Load())
			}
		default: // controls: the redirect is followed
			if elsewhere.Load() != 1 {
				t.Errorf("%s: other host got %d requests", mode, elsewhere.Load())
			}
		}
	}
}

func TestUpstreamProxyOnlyWhenConfigured(t *testing.T) {
	if newTransport(testConfig("http://x").Limits.WithDefaults()).Proxy != nil {
		t.Fatal("the upstream transport reads a proxy from the environment")
	}
	var proxied atomic.Int32
	outbound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1) // an HTTP proxy gets the absolute URL
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(chatText))
	}))
	defer outbound.Close()
	cfg := testConfig("http://upstream.invalid")
	cfg.UpstreamProxy = outbound.URL
	px := startProxy(t, cfg, nil, Options{})
	status, _, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[]}`, nil)
	if status != 200 || proxied.Load() != 1 {
		t.Fatalf("%d %s, proxied %d", status, got, proxied.Load())
	}
}

func TestEchoedCredentialsNeverReachEvents(t *testing.T) {
	const goog, cookie, org, qkey = "AIzaSyD-echoed-google-key-000", "sess-cookie-value-123456", "org-echoed12345678", "query-key-abcdef123"
	echo := `{"error":{"message":"bad key ` + goog + ` cookie ` + cookie + ` org ` + org + ` q ` + qkey + `","type":"invalid_request_error"}}`
	up := newUpstream(t, jsonResponder(401, echo))
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, observe("model.error")), Options{})
	_, _, got := post(t, px.URL+chatPath+"?key="+qkey, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Goog-Api-Key": goog, "Cookie": "a=" + cookie, "OpenAI-Organization": org})
	if !strings.Contains(string(got), goog) {
		t.Fatalf("control: the upstream's body reaches the client unchanged: %s", got)
	}
	me := waitObserved(t, pol, "model.error", 1)
	msg := me[0].Error.Message
	for _, s := range []string{goog, cookie, org, qkey} {
		if strings.Contains(msg, s) {
			t.Errorf("model.error carries %s: %s", s, msg)
		}
	}
	if !strings.Contains(msg, "bad key") {
		t.Errorf("message lost its text: %s", msg)
	}
}

func TestMCPServerRedirectNotPassedOn(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	})
	for _, allow := range []bool{false, true} {
		elsewhere.Store(0)
		cfg := mcpRouteConfig(up.URL + "/mcp")
		cfg.Routes[0].AllowRedirects = allow
		srv := startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept(ahp.EventToolBefore)), Options{MCPHandler: NewMCPHandler})
		status, _, got := mcpPost(t, srv.URL+"/mcp/files", mcpReadCall, nil)
		if !allow && (status != http.StatusBadGateway || !strings.Contains(string(got), "redirect") || elsewhere.Load() != 0) {
			t.Errorf("redirect passed on: %d %s", status, got)
		}
		if allow && elsewhere.Load() == 0 {
			t.Errorf("control: with allowRedirects the client follows the redirect (%d)", status)
		}
	}
}
