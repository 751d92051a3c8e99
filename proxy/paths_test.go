package proxy

import (
	"net/http"
	"strings"
	"testing"
)

func TestPathVariantsAreExaminedOrRefused(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	send := func(method, path string) int {
		req, _ := http.NewRequest(method, px.URL+path, strings.NewReader(body))
		req.URL.Opaque = path // send the path exactly as written
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		method, path string
		status       int
		examined     bool // model.request.before ran
	}{
		{"POST", "/openai/v1/chat/completions", 200, true}, // control
		{"POST", "/openai/v1/chat/completions/", 200, true},
		{"POST", "/openai/V1/Chat/Completions", 200, true},
		{"POST", "/openai//v1/chat/completions", 400, false},
		{"POST", "/openai/v1/./chat/completions", 400, false},
		{"POST", "/openai/v1/x/../chat/completions", 400, false},
		{"POST", "/openai/v1/x/%2e%2e/chat/completions", 400, false},
		{"POST", "/openai/v1\\chat\\completions", 400, false},
		{"PUT", "/openai/v1/chat/completions", 405, false},
		{"POST", "/plain/a/../b", 400, false},
	}
	for _, tc := range tests {
		before, upBefore := len(pol.intercepted()), len(up.requests())
		got := send(tc.method, tc.path)
		examined := len(pol.intercepted()) > before
		forwarded := len(up.requests()) > upBefore
		if got != tc.status || examined != tc.examined || forwarded != (tc.status == 200) {
			t.Errorf("%s %s: status %d examined %v forwarded %v; want %d %v", tc.method, tc.path, got, examined, forwarded, tc.status, tc.examined)
		}
	}
}
