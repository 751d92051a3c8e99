package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
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
			if r.Enforcement == enforcement.ForwardedUnexamined {
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

// TestUnmappedForwardedJSONSeenAsParams: with unmapped: forward, a JSON body of an
// endpoint the route does not map still reaches model.request.before whole, as params
// with no message list, so a policy on the model it names (or on its strings) refuses it;
// a body that is not JSON is forwarded unexamined.
func TestUnmappedForwardedJSONSeenAsParams(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `{"id":"modr-1","results":[]}`))
	cfg := testConfig(up.URL)
	cfg.Routes[0].Unmapped = "forward"
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Model != nil && ev.Model.ID == "omni-moderation-forbidden" {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "model not allowed", Code: "com.example.models"}}
		}
		return nil
	}}
	px := startProxy(t, cfg, newTestChain(t, pol, intercept("model.request.before")), Options{})

	allowed := `{"model":"omni-moderation-latest","input":"hello"}`
	status, _, got := post(t, px.URL+"/openai/v1/moderations", allowed, nil)
	if status != 200 || string(up.only(t).Body) != allowed {
		t.Fatalf("allowed model: %d %s; upstream got %q", status, got, up.only(t).Body)
	}
	calls := pol.callsOf("model.request.before")
	if len(calls) != 1 {
		t.Fatalf("%d model.request.before calls", len(calls))
	}
	ev := calls[0].Event
	if ev.Model == nil || ev.Model.ID != "omni-moderation-latest" || string(ev.Params) != allowed || len(ev.Items) != 0 || len(ev.Gaps) != 1 {
		t.Errorf("event: model %+v params %s items %d gaps %+v", ev.Model, ev.Params, len(ev.Items), ev.Gaps)
	}
	if caps := calls[0].Capabilities; caps.Has(ahp.EffectModify) || caps.Has(ahp.EffectReturn) || !caps.Has(ahp.EffectDeny) {
		t.Errorf("advertised %v: an unmapped body can only be refused or stopped", caps.Effects)
	}
	assertValidIntercepts(t, pol)

	// The same endpoint naming a model the policy refuses never reaches the upstream.
	status, _, got = post(t, px.URL+"/openai/v1/moderations", `{"model":"omni-moderation-forbidden","input":"hello"}`, nil)
	if status != 403 || !strings.Contains(string(got), "model not allowed") || len(up.requests()) != 1 {
		t.Errorf("refused model: %d %s, upstream got %d", status, got, len(up.requests()))
	}

	// A multipart upload carries no JSON to examine: forwarded unexamined, as configured.
	req, _ := http.NewRequest(http.MethodPost, px.URL+"/openai/v1/audio/transcriptions", strings.NewReader("--b\r\n\r\nx\r\n--b--\r\n"))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=b")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || len(up.requests()) != 2 || len(pol.callsOf("model.request.before")) != 2 {
		t.Errorf("multipart: %d, upstream %d, events %d", res.StatusCode, len(up.requests()), len(pol.callsOf("model.request.before")))
	}
}
