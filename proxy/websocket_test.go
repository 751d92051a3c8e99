package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
)

func TestWebSocketUpgradeRefusedWithoutUpstream(t *testing.T) {
	// A real WebSocket client (as Codex's built-in provider tries first) gets 426 in the
	// provider's error format, and the upstream is never contacted.
	up := newUpstream(t, jsonResponder(200, `{}`))
	px := startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept("tool.before")), Options{})
	for _, path := range []string{"/openai/v1/responses", "/anthropic/v1/messages"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(px.URL, "http")+path, nil)
		cancel()
		if err == nil {
			conn.CloseNow()
			t.Fatalf("%s: the WebSocket handshake succeeded", path)
		}
		if resp == nil || resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("%s: %v %+v", path, err, resp)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream was contacted %d times", n)
	}
	// The body is the provider's error; a plain GET is still forwarded (control).
	req, _ := http.NewRequest(http.MethodGet, px.URL+"/openai/v1/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	resp.Body.Close()
	if resp.StatusCode != 426 || gjson.Get(b.String(), "error.code").String() != "websocket_not_supported" {
		t.Errorf("%d %s", resp.StatusCode, b.String())
	}
	resp, err = http.Get(px.URL + "/openai/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(up.requests()) != 1 {
		t.Errorf("control: a plain GET was not forwarded")
	}
}

func TestAgentSessionHeadersSetSessionID(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
	tests := []struct {
		header map[string]string
		want   string // "" = synthesized
	}{
		{map[string]string{"X-Claude-Code-Session-Id": "cc-123"}, "cc-123"},
		{map[string]string{"session_id": "codex-456"}, "codex-456"},
		{map[string]string{"X-Hookproxy-Session": "mine", "X-Claude-Code-Session-Id": "cc-123"}, "mine"},
		{nil, ""},
	}
	for i, tc := range tests {
		post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, tc.header)
		calls := pol.callsOf("model.request.before")
		s := calls[len(calls)-1].Event.Session
		switch {
		case tc.want != "" && (s.ID != tc.want || s.Synthesized):
			t.Errorf("case %d: session %+v, want %q", i, s, tc.want)
		case tc.want == "" && !s.Synthesized:
			t.Errorf("case %d: session %+v, want a synthesized one", i, s)
		}
	}
}

func TestCountTokensRunsOnlyModelRequestBefore(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `{"input_tokens":7}`))
	pol := &fakePolicy{}
	ch := newTestChain(t, pol, intercept("tool.after", "turn.start", "model.request.before", "tool.before"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	body := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"}]}]}`
	status, _, got := post(t, px.URL+"/anthropic/v1/messages/count_tokens", body, nil)
	if status != 200 || string(got) != `{"input_tokens":7}` {
		t.Fatalf("%d %s", status, got)
	}
	if n := len(pol.callsOf("model.request.before")); n != 1 || len(pol.intercepted()) != 1 {
		t.Errorf("events %d, model.request.before %d", len(pol.intercepted()), n)
	}
	// Control: the same history on /v1/messages runs tool.after too.
	up.respond = jsonResponder(200, `{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	post(t, px.URL+"/anthropic/v1/messages", body, nil)
	if len(pol.callsOf("tool.after")) != 1 {
		t.Errorf("control: tool.after %d", len(pol.callsOf("tool.after")))
	}
}
