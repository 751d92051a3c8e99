package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/config"
)

// TestUpstreamFailureReason: when the upstream cannot be reached, the 502 says why —
// connection refused, DNS, TLS — in the route's provider format, and carries neither the
// API key of the request's header nor the one in its query.
func TestUpstreamFailureReason(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer tlsUp.Close()
	plainUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer plainUp.Close()

	const key = "sk-proj-UPSTREAMFAILUREKEY0123456789"
	for _, up := range []struct {
		desc, url, want string
	}{
		{"connection refused", refused, "connection refused (" + strings.TrimPrefix(refused, "http://") + ")"},
		{"DNS", "https://hookproxy-upstream-test.invalid", "DNS lookup of hookproxy-upstream-test.invalid failed"},
		{"TLS unknown authority", tlsUp.URL, "TLS: the upstream's certificate is signed by an unknown authority"},
		{"TLS to a plain HTTP port", "https://" + strings.TrimPrefix(plainUp.URL, "http://"), "TLS handshake failed"},
	} {
		t.Run(up.desc, func(t *testing.T) {
			cfg := &config.Config{Source: "urn:hookproxy:test", Routes: []config.Route{
				{Prefix: "/openai", API: config.APIOpenAI, Upstream: up.url},
				{Prefix: "/anthropic", API: config.APIAnthropic, Upstream: up.url},
				{Prefix: "/gemini", API: config.APIGemini, Upstream: up.url},
			}}
			srv := startProxy(t, cfg, nil, Options{})
			for _, api := range []struct {
				path, body, messagePath string
				header                  map[string]string
				shape                   func(gjson.Result) bool
			}{
				{"/openai/v1/chat/completions?api-key=" + key, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, "error.message",
					map[string]string{"Authorization": "Bearer " + key},
					func(r gjson.Result) bool { return r.Get("error.type").Exists() }},
				{"/anthropic/v1/messages?key=" + key, `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "error.message",
					map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"},
					func(r gjson.Result) bool { return r.Get("type").String() == "error" && r.Get("error.type").Exists() }},
				{"/gemini/v1beta/models/gemini-2.5-flash:generateContent?key=" + key, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "error.message",
					map[string]string{"x-goog-api-key": key},
					func(r gjson.Result) bool { return r.Get("error.code").Int() == 502 && r.Get("error.status").Exists() }},
			} {
				status, _, body := post(t, srv.URL+api.path, api.body, api.header)
				if status != http.StatusBadGateway {
					t.Errorf("%s: status %d, want 502: %s", api.path[:8], status, body)
					continue
				}
				res := gjson.ParseBytes(body)
				if !api.shape(res) {
					t.Errorf("%s: not the provider's error format: %s", api.path[:8], body)
				}
				if msg := res.Get(api.messagePath).String(); !strings.Contains(msg, up.want) {
					t.Errorf("%s: message %q lacks %q", api.path[:8], msg, up.want)
				}
				if strings.Contains(string(body), key) || strings.Contains(string(body), "key=") {
					t.Errorf("%s: the 502 carries the request's credential: %s", api.path[:8], body)
				}
			}
		})
	}
}
