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

func TestUnmappedEndpointsRefusedUnlessOpened(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `{"object":"list","data":[]}`))
	body := `{"model":"text-embedding-3-small","input":"key AKIAIOSFODNN7EXAMPLE"}`
	for _, forward := range []bool{false, true} {
		cfg := testConfig(up.URL)
		if forward {
			cfg.Routes[0].Unmapped, cfg.Routes[1].Unmapped = "forward", "forward"
		}
		log := &auditLog{}
		px := startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept("model.request.before")), Options{Auditor: log.auditor()})
		n := len(up.requests())
		for _, ep := range []string{"/openai/v1/moderations", "/openai/v1/audio/speech", "/anthropic/v1/messages/batches"} {
			status, _, got := post(t, px.URL+ep, body, nil)
			switch {
			case !forward && (status != 403 || !strings.Contains(string(got), "unexamined")):
				t.Errorf("%s: %d %s", ep, status, got)
			case forward && status != 200:
				t.Errorf("forward %s: %d %s", ep, status, got)
			}
		}
		if forwarded := len(up.requests()) - n; forwarded != map[bool]int{false: 0, true: 3}[forward] {
			t.Errorf("forward=%v: %d requests reached the upstream", forward, forwarded)
		}
		unexamined := 0
		log.mu.Lock()
		for _, r := range log.recs {
			if r.Enforcement == EnforceForwardedUnexamined {
				unexamined++
			}
		}
		log.mu.Unlock()
		if unexamined != map[bool]int{false: 0, true: 3}[forward] {
			t.Errorf("forward=%v: %d forwarded_unexamined audit records", forward, unexamined)
		}
		// Harmless reads pass either way.
		resp, err := http.Get(px.URL + "/openai/v1/models")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET models: %v %v", err, resp)
		}
		resp.Body.Close()
	}
}

func TestUpstreamDuplicateKeysNeverReachTheClient(t *testing.T) {
	// A policy would judge the first "arguments" (gjson), an SDK run the last.
	dup := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}","arguments":"{\"command\":\"rm -rf /\"}"}}]},"finish_reason":"tool_calls"}]}`
	clean := strings.Replace(dup, `,"arguments":"{\"command\":\"rm -rf /\"}"`, "", 1)
	for _, body := range []string{dup, clean} {
		up := newUpstream(t, jsonResponder(200, body))
		px := startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept("tool.before")), Options{})
		status, _, got := post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, nil)
		if body == dup && (status != http.StatusBadGateway || strings.Contains(string(got), "rm -rf")) {
			t.Errorf("duplicate keys: %d %s", status, got)
		}
		if body == clean && status != 200 {
			t.Errorf("control: %d %s", status, got)
		}
	}
	// Streamed: the event with the duplicate ends the stream in-stream; the call never goes out.
	ev := `data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}","arguments":"{\"command\":\"rm -rf /\"}"}}]},"finish_reason":null}]}` + "\n\n"
	up := newUpstream(t, sseResponder(chatTextSSE[0], ev, "data: [DONE]\n\n"))
	px := startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept("tool.before")), Options{})
	_, _, got := post(t, px.URL+chatPath, chatStreamReq, nil)
	if strings.Contains(string(got), "rm -rf") || !strings.Contains(string(got), "hookproxy.stream_failed") {
		t.Errorf("streamed duplicate keys: %s", got)
	}
}
