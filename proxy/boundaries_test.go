package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/chat"
)

const (
	chatPath = "/openai/v1/chat/completions"
	msgsPath = "/anthropic/v1/messages"

	chatSecret = `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"my key is SECRET-123"}]}`
	msgsSecret = `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"my key is SECRET-123"}]}`

	// A tool loop: the user prompt, the model's Bash call, and its result.
	chatToolLoop = `{"model":"gpt-4o","messages":[{"role":"user","content":"list files"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"secret.txt TOKEN-XYZ"}]}`

	chatText = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

	chatTwoCalls = `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
)

// chatTwoCallsSSE is chatTwoCalls as a chat.completion.chunk stream.
var chatTwoCallsSSE = []string{
	`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"Bash","arguments":""}}]},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"rm -rf /\"}"}}]},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n",
	"data: [DONE]\n\n",
}

var chatTextSSE = []string{
	`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"hel"},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
	"data: [DONE]\n\n",
}

// chatMessage decodes a chat completion (or an assembled SSE stream) into choice 0.
type chatMessage struct {
	Content   *string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	FinishReason string
}

func decodeChat(t *testing.T, h http.Header, body []byte) chatMessage {
	t.Helper()
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		asm := chat.NewChat().NewAssembler()
		_, _ = asm.Write(body)
		b, err := asm.Body()
		if err != nil {
			t.Fatalf("client stream does not assemble: %v\n%s", err, body)
		}
		body = b
	}
	var v struct {
		Choices []struct {
			Message      chatMessage `json:"message"`
			FinishReason string      `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Choices) == 0 {
		t.Fatalf("not a chat completion: %v\n%s", err, body)
	}
	m := v.Choices[0].Message
	m.FinishReason = v.Choices[0].FinishReason
	return m
}

func TestDenyAtModelRequestBeforeRefusesInProviderFormat(t *testing.T) {
	tests := []struct {
		desc, path, body, want string
		deny                   ahp.Effect
	}{
		{"openai", chatPath, chatSecret,
			`{"error":{"message":"no secrets in prompts","type":"policy_denied","param":null,"code":"com.example.secret"}}`,
			ahp.Effect{Type: ahp.EffectDeny, Reason: "no secrets in prompts", Code: "com.example.secret"}},
		{"openai default code", chatPath, chatSecret,
			`{"error":{"message":"no","type":"policy_denied","param":null,"code":"hookproxy.denied"}}`,
			ahp.Effect{Type: ahp.EffectDeny, Reason: "no"}},
		{"anthropic", msgsPath, msgsSecret,
			`{"type":"error","error":{"type":"permission_error","message":"no secrets in prompts"}}`,
			ahp.Effect{Type: ahp.EffectDeny, Reason: "no secrets in prompts", Code: "com.example.secret"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect { return []ahp.Effect{tc.deny} }}
			var audited []BoundaryRecord
			px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")),
				Options{Auditor: AuditorFunc(func(_ context.Context, r BoundaryRecord) { audited = append(audited, r) })})
			status, _, body := post(t, px.URL+tc.path, tc.body, map[string]string{"Authorization": "Bearer sk-live-abcdefgh"})
			if status != http.StatusForbidden {
				t.Fatalf("status %d %s", status, body)
			}
			assertJSONEqual(t, body, tc.want)
			if n := len(up.requests()); n != 0 {
				t.Fatalf("upstream called %d times after a deny", n)
			}
			assertValidIntercepts(t, pol)
			if len(audited) != 1 || audited[0].Enforcement != enforcement.Refused || audited[0].EventType != "model.request.before" {
				t.Fatalf("audit %+v", audited)
			}
			ev, _ := json.Marshal(pol.intercepted()[0])
			if strings.Contains(string(ev), "sk-live") {
				t.Fatal("credential in hook event")
			}
		})
	}
}

func TestFailClosedRefusesNamingBackendOnly(t *testing.T) {
	for _, path := range []string{chatPath, msgsPath} {
		up := newUpstream(t, nil)
		pol := &fakePolicy{fail: errBackendDown}
		px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
		body := chatSecret
		if path == msgsPath {
			body = msgsSecret
		}
		status, _, got := post(t, px.URL+path, body, nil)
		if status != http.StatusForbidden {
			t.Fatalf("%s: status %d %s", path, status, got)
		}
		s := string(got)
		if !strings.Contains(s, "test-backend") || strings.Contains(s, "10.0.0.7") || strings.Contains(s, "hunter2") {
			t.Errorf("%s: fail-closed body must name the backend and nothing else: %s", path, s)
		}
		if path == chatPath && !strings.Contains(s, `"code":"hookproxy.fail_closed"`) {
			t.Errorf("openai fail-closed code missing: %s", s)
		}
		if path == msgsPath && !strings.Contains(s, `"permission_error"`) {
			t.Errorf("anthropic fail-closed type: %s", s)
		}
		if len(up.requests()) != 0 {
			t.Errorf("%s: upstream called", path)
		}
	}
}

// redact replaces SECRET-123 in every text part.
func redact(items []ahp.Message) []ahp.Message {
	out := cloneMessages(items)
	for i := range out {
		for j := range out[i].Parts {
			if p := &out[i].Parts[j]; p.Text != nil {
				s := strings.ReplaceAll(*p.Text, "SECRET-123", "[redacted]")
				p.Text = &s
			}
		}
	}
	return out
}

func TestModifyRequestUpstreamNeverSeesSecret(t *testing.T) {
	for _, tc := range []struct{ path, body string }{{chatPath, chatSecret}, {msgsPath, msgsSecret}} {
		up := newUpstream(t, jsonResponder(200, chatText))
		if tc.path == msgsPath {
			up.respond = jsonResponder(200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		}
		pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetRequest, Operation: ahp.OpReplace,
				Value: msgs(t, redact(ev.Items)...)}}
		}}
		px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
		status, _, body := post(t, px.URL+tc.path, tc.body, nil)
		if status != 200 {
			t.Fatalf("%s: status %d %s", tc.path, status, body)
		}
		got := string(up.only(t).Body)
		if strings.Contains(got, "SECRET-123") || !strings.Contains(got, "my key is [redacted]") {
			t.Fatalf("%s: upstream body %s", tc.path, got)
		}
		if !strings.Contains(got, `"model":"`) {
			t.Fatalf("%s: params lost: %s", tc.path, got)
		}
		assertValidIntercepts(t, pol)
	}
}

func TestInjectNowReachesTheModel(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		return []ahp.Effect{{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend, DeliverAt: ahp.DeliverNow,
			Value: msgs(t, textMessage("inj1", ahp.RoleSystem, "Policy reminder: never print keys."))}}
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
	status, _, body := post(t, px.URL+chatPath, chatSecret, nil)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	got := string(up.only(t).Body)
	if !strings.Contains(got, "Policy reminder: never print keys.") || !strings.Contains(got, "my key is SECRET-123") {
		t.Fatalf("upstream body %s", got)
	}
}

func TestInjectNextTurnDeliveredWithNextPrompt(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventTurnStart || !strings.Contains(textOf(ev.Items), "first") {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend, DeliverAt: ahp.DeliverNextTurn,
			Value: msgs(t, textMessage("n1", ahp.RoleUser, "Remember the budget."))}}
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("turn.start")), Options{})
	hdr := map[string]string{"X-Hookproxy-Session": "s-1", "Authorization": "Bearer k1"}
	post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"first"}]}`, hdr)
	// Another tenant with the same session id must not receive it.
	post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"other tenant"}]}`,
		map[string]string{"X-Hookproxy-Session": "s-1", "Authorization": "Bearer k2"})
	post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"hello"},{"role":"user","content":"second"}]}`, hdr)
	reqs := up.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	if strings.Contains(string(reqs[0].Body), "Remember") || strings.Contains(string(reqs[1].Body), "Remember") {
		t.Fatalf("next_turn injection delivered too early or to another tenant")
	}
	if !strings.Contains(string(reqs[2].Body), "Remember the budget.") {
		t.Fatalf("next_turn injection missing from the next prompt: %s", reqs[2].Body)
	}
}

func TestReturnAnswersWithoutUpstream(t *testing.T) {
	for _, stream := range []bool{false, true} {
		up := newUpstream(t, nil)
		pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
			if ev.Type != ahp.EventModelRequestBefore {
				return nil
			}
			return []ahp.Effect{{Type: ahp.EffectReturn, Value: msgs(t, textMessage("r1", ahp.RoleAssistant, "cached answer"))}}
		}}
		ch := newTestChain(t, pol, intercept("model.request.before"), observe("model.response.after", "turn.end"))
		px := startProxy(t, testConfig(up.URL), ch, Options{})
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		status, h, got := post(t, px.URL+chatPath, body, nil)
		if status != 200 {
			t.Fatalf("stream=%v: status %d %s", stream, status, got)
		}
		if stream != strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream=%v: content type %q", stream, h.Get("Content-Type"))
		}
		m := decodeChat(t, h, got)
		if m.Content == nil || *m.Content != "cached answer" || m.FinishReason != "stop" {
			t.Fatalf("stream=%v: answer %+v", stream, m)
		}
		if len(up.requests()) != 0 {
			t.Fatal("upstream called despite a supplied result")
		}
		mra := waitObserved(t, pol, "model.response.after", 1)
		if len(mra) != 1 || mra[0].Execution.Status != "skipped" || mra[0].Execution.Reason != "supplied_result" ||
			mra[0].Usage != nil || mra[0].LatencyMs != nil {
			t.Fatalf("stream=%v: model.response.after observations %+v", stream, mra)
		}
		if len(waitObserved(t, pol, "turn.end", 1)) != 1 {
			t.Fatalf("stream=%v: turn.end not observed", stream)
		}
		assertValidIntercepts(t, pol)
		assertValidObservations(t, pol)
	}
}

func TestFlowStopAnswersWithoutUpstream(t *testing.T) {
	up := newUpstream(t, nil)
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		return []ahp.Effect{{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: "budget exhausted"}}
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
	status, h, body := post(t, px.URL+chatPath, chatSecret, nil)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	m := decodeChat(t, h, body)
	if m.Content == nil || !strings.Contains(*m.Content, "budget exhausted") || m.FinishReason != "stop" || len(m.ToolCalls) != 0 {
		t.Fatalf("answer %+v", m)
	}
	if len(up.requests()) != 0 {
		t.Fatal("upstream called after flow stop")
	}
}

func denyTool(name string) func(ev *ahp.Event) []ahp.Effect {
	return func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && ev.Tool.Name == name {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "destructive command"}}
		}
		return nil
	}
}

// TestToolBeforeDenyRemovesOnlyThatCall: tool.before advertises deny (AHP-CAP-002) and an
// accepted deny keeps that call from running (AHP-DEC-002).
func TestToolBeforeDenyRemovesOnlyThatCall(t *testing.T) {
	for _, stream := range []bool{false, true} {
		up := newUpstream(t, jsonResponder(200, chatTwoCalls))
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"clean up"}]}`
		if stream {
			up.respond = sseResponder(chatTwoCallsSSE...)
			body = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"clean up"}]}`
		}
		pol := &fakePolicy{effects: denyTool("Bash")}
		ch := newTestChain(t, pol, intercept("model.response.after", "tool.before"), observe("tool.after", "turn.end"))
		px := startProxy(t, testConfig(up.URL), ch, Options{})
		status, h, got := post(t, px.URL+chatPath, body, nil)
		if status != 200 {
			t.Fatalf("stream=%v: status %d %s", stream, status, got)
		}
		m := decodeChat(t, h, got)
		if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_b" || m.ToolCalls[0].Function.Name != "Read" {
			t.Fatalf("stream=%v: tool calls %+v", stream, m.ToolCalls)
		}
		if m.FinishReason != "tool_calls" {
			t.Fatalf("stream=%v: finish reason %q", stream, m.FinishReason)
		}
		if m.Content == nil || !strings.Contains(*m.Content, "Tool call Bash was blocked by policy: destructive command") {
			t.Fatalf("stream=%v: no explanation: %+v", stream, m.Content)
		}
		tb := pol.callsOf("tool.before")
		if len(tb) != 2 || tb[0].Event.Call.ID != "call_a" || tb[1].Event.Call.ID != "call_b" {
			t.Fatalf("stream=%v: tool.before calls %d", stream, len(tb))
		}
		mra := pol.callsOf("model.response.after")
		if len(mra) != 1 || tb[0].Event.ParentEventID != mra[0].Event.ID || tb[0].Event.Batch == nil || len(tb[0].Event.Batch.CallIDs) != 2 {
			t.Fatalf("stream=%v: tool.before parent/batch wrong: %+v", stream, tb[0].Event)
		}
		if !stream && (mra[0].Event.Usage == nil || mra[0].Event.LatencyMs == nil) {
			t.Fatalf("model.response.after without usage/latency")
		}
		ta := waitObserved(t, pol, "tool.after", 1)
		if len(ta) != 1 || ta[0].Outcome != "denied" || ta[0].Execution.Reason != "policy" || ta[0].Call.ID != "call_a" ||
			ta[0].ParentEventID != tb[0].Event.ID {
			t.Fatalf("stream=%v: denied tool.after observation %+v", stream, ta)
		}
		if len(pol.observedOf("turn.end")) != 0 {
			t.Fatalf("turn.end observed although a tool call remains")
		}
		assertValidIntercepts(t, pol)
		assertValidObservations(t, pol)
	}
}

func TestToolBeforeDenyAllEndsTheTurn(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatTwoCalls))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "no tools today"}}
		}
		return nil
	}}
	ch := newTestChain(t, pol, intercept("tool.before", "turn.finish.before"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	_, h, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, nil)
	m := decodeChat(t, h, got)
	if len(m.ToolCalls) != 0 || m.FinishReason != "stop" || m.Content == nil ||
		!strings.Contains(*m.Content, "Tool call Bash was blocked") || !strings.Contains(*m.Content, "Tool call Read was blocked") {
		t.Fatalf("answer %+v", m)
	}
	if len(pol.callsOf("turn.finish.before")) != 1 {
		t.Fatalf("turn.finish.before not run once the response holds no tool call")
	}
}

func TestToolBeforeModifyInputRewritesArguments(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatTwoCalls))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "Read" {
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetInput, Operation: ahp.OpMerge,
				Value: json.RawMessage(`{"timeout":30}`)}}
		}
		return nil
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{})
	_, h, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, nil)
	m := decodeChat(t, h, got)
	if len(m.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", m.ToolCalls)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(m.ToolCalls[1].Function.Arguments), &args); err != nil {
		t.Fatal(err)
	}
	if args["path"] != "a.txt" || args["timeout"] != float64(30) {
		t.Fatalf("arguments %s", m.ToolCalls[1].Function.Arguments)
	}
	if m.ToolCalls[0].Function.Arguments != `{"command":"rm -rf /"}` {
		t.Fatalf("untouched call changed: %s", m.ToolCalls[0].Function.Arguments)
	}
	assertValidIntercepts(t, pol)
}

func TestToolAfterModifyOutputRewritesTheResult(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventToolAfter {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetOutput, Operation: ahp.OpReplace,
			Value: msgs(t, textMessage("out", ahp.RoleTool, "[redacted output]"))}}
	}}
	ch := newTestChain(t, pol, intercept("tool.after", "tool.before"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	status, _, body := post(t, px.URL+chatPath, chatToolLoop, nil)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	got := string(up.only(t).Body)
	if strings.Contains(got, "TOKEN-XYZ") || !strings.Contains(got, "[redacted output]") || !strings.Contains(got, `"tool_call_id":"call_1"`) {
		t.Fatalf("upstream body %s", got)
	}
	ta := pol.callsOf("tool.after")
	if len(ta) != 1 {
		t.Fatalf("%d tool.after", len(ta))
	}
	ev := ta[0].Event
	if ev.Call.ID != "call_1" || ev.Tool.Name != "Bash" || string(ev.Tool.Input) != `{"command":"ls"}` || ev.Outcome != "ok" ||
		ev.ParentEventID != toolEventID("urn:hookproxy:test", ahp.EventToolBefore, ev.Session.ID, mapping.ToolCall{ID: "call_1", Name: "Bash", Input: ev.Tool.Input}) {
		t.Fatalf("tool.after event %+v", ev)
	}
	assertValidIntercepts(t, pol)
}

func TestObserversSeeStreamedThroughResponse(t *testing.T) {
	up := newUpstream(t, sseResponder(chatTextSSE...))
	pol := &fakePolicy{}
	ch := newTestChain(t, pol, observe("model.response.after", "turn.finish.before", "turn.end"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	status, _, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if status != 200 || string(got) != strings.Join(chatTextSSE, "") {
		t.Fatalf("stream not passed through unchanged: %d %q", status, got)
	}
	if string(up.only(t).Body) != `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}` {
		t.Fatal("request body changed")
	}
	for _, typ := range []string{"model.response.after", "turn.finish.before", "turn.end"} {
		obs := waitObserved(t, pol, typ, 1)
		if len(obs) != 1 || !strings.Contains(textOf(obs[0].Items), "hello") {
			t.Fatalf("%s observations %+v", typ, obs)
		}
	}
	assertValidObservations(t, pol)
}

func TestUpstreamErrorPassesThroughAndIsObserved(t *testing.T) {
	errBody := `{"error":{"message":"Incorrect API key provided: sk-proj-********************abcd. You can find your API key at https://platform.openai.com.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	up := newUpstream(t, jsonResponder(401, errBody))
	pol := &fakePolicy{}
	ch := newTestChain(t, pol, intercept("tool.before"), observe("model.error"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	status, _, got := post(t, px.URL+chatPath, chatSecret, map[string]string{"Authorization": "Bearer sk-proj-secretsecretabcd"})
	if status != 401 || string(got) != errBody {
		t.Fatalf("error not passed through unchanged: %d %s", status, got)
	}
	me := waitObserved(t, pol, "model.error", 1)
	if len(me) != 1 {
		t.Fatalf("model.error observations: %d", len(me))
	}
	e := me[0].Error
	if e.Class != "provider_http" || e.Code != "invalid_request_error" || string(e.Status) != "401" {
		t.Fatalf("model.error %+v", e)
	}
	if strings.Contains(e.Message, "sk-proj") || !strings.Contains(e.Message, "Incorrect API key provided") {
		t.Fatalf("model.error message not scrubbed: %q", e.Message)
	}
	assertValidObservations(t, pol)
}

func TestUpstreamGarbageIs502WhenHolding(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `<html>oops</html>`))
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{})
	status, _, got := post(t, px.URL+chatPath, chatSecret, nil)
	if status != http.StatusBadGateway {
		t.Fatalf("status %d %s", status, got)
	}
	if e := mustJSON(t, got)["error"].(map[string]any); e["type"] != "server_error" || strings.Contains(string(got), "oops") {
		t.Fatalf("body %s", got)
	}
}

func TestSessionAndTurnIdentity(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
	post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"list files"}]}`, nil)
	post(t, px.URL+chatPath, chatToolLoop, nil)
	post(t, px.URL+chatPath, chatToolLoop, map[string]string{"X-Hookproxy-Session": "harness-42"})
	calls := pol.callsOf("model.request.before")
	if len(calls) != 3 {
		t.Fatalf("%d calls", len(calls))
	}
	a, b, c := calls[0].Event, calls[1].Event, calls[2].Event
	if !a.Session.Synthesized || a.Session.ID != b.Session.ID {
		t.Errorf("synthesized session not stable across the loop: %+v %+v", a.Session, b.Session)
	}
	if a.Turn.ID != b.Turn.ID || !a.Turn.Synthesized {
		t.Errorf("turn not shared across the tool loop: %s %s", a.Turn.ID, b.Turn.ID)
	}
	if c.Session.ID != "harness-42" || c.Session.Synthesized {
		t.Errorf("header session: %+v", c.Session)
	}
	if a.ID == b.ID || !strings.HasPrefix(a.ID, "evt_") || a.Source != "urn:hookproxy:test" {
		t.Errorf("event identity %s %s %s", a.ID, b.ID, a.Source)
	}
	if a.Model.ID != "m" || a.Model.Provider != "openai" || a.Attempt.Number != 1 {
		t.Errorf("model/attempt %+v %+v", a.Model, a.Attempt)
	}
	caps := calls[0].Capabilities
	for _, e := range caps.Effects {
		if e == "allow" || e == "ask" || e == "message" {
			t.Errorf("advertised %s, which a proxy cannot enforce", e)
		}
	}
	assertValidIntercepts(t, pol)
}

func TestTurnStartModifyPromptAndDeny(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventTurnStart {
			return nil
		}
		if strings.Contains(textOf(ev.Items), "forbidden") {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "topic not allowed"}}
		}
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetPrompt, Operation: ahp.OpReplace, Value: msgs(t, redact(ev.Items)...)}}
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("turn.start")), Options{})
	status, _, _ := post(t, px.URL+chatPath, chatSecret, nil)
	if status != 200 || strings.Contains(string(up.only(t).Body), "SECRET-123") {
		t.Fatalf("modify(prompt) not enforced: %d %s", status, up.only(t).Body)
	}
	status, _, body := post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"forbidden"}]}`, nil)
	if status != 403 || !strings.Contains(string(body), "topic not allowed") || len(up.requests()) != 1 {
		t.Fatalf("turn.start deny: %d %s", status, body)
	}
	// A tool loop does not end with a prompt: its only turn.start is for the earlier
	// prompt this proxy never settled (fail-safe, at least once), and the next request of
	// the loop, whose prompt is now known, emits none.
	n := len(pol.callsOf("turn.start"))
	post(t, px.URL+chatPath, chatToolLoop, nil)
	if got := len(pol.callsOf("turn.start")); got != n+1 {
		t.Fatalf("turn.start for an unknown earlier prompt: %d calls, want %d", got-n, 1)
	}
	post(t, px.URL+chatPath, chatToolLoop, nil)
	if got := len(pol.callsOf("turn.start")); got != n+1 {
		t.Fatal("turn.start emitted again for a request ending with tool results whose prompt was settled")
	}
	assertValidIntercepts(t, pol)
}

func TestAnthropicToolUseDenied(t *testing.T) {
	resp := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		`{"type":"text","text":"Running it."},` +
		`{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"rm -rf /"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`
	up := newUpstream(t, jsonResponder(200, resp))
	pol := &fakePolicy{effects: denyTool("Bash")}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{})
	status, _, got := post(t, px.URL+msgsPath, msgsSecret, nil)
	if status != 200 {
		t.Fatalf("status %d %s", status, got)
	}
	var v struct {
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text string
		} `json:"content"`
	}
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatal(err)
	}
	if v.StopReason != "end_turn" {
		t.Fatalf("stop_reason %q: %s", v.StopReason, got)
	}
	for _, c := range v.Content {
		if c.Type == "tool_use" {
			t.Fatalf("denied tool_use delivered: %s", got)
		}
	}
	if !strings.Contains(string(got), "Tool call Bash was blocked by policy") {
		t.Fatalf("no explanation: %s", got)
	}
	assertValidIntercepts(t, pol)
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	_ = json.Unmarshal([]byte(want), &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
}

// TestToolAfterParentAfterModifiedInput: the tool.before of a call whose input a hook
// rewrote was derived from the original input, while the agent sends back the rewritten
// call; its tool.after still names that tool.before as parent. Control: a
// proxy that did not settle the call (a fresh store) cannot link it.
func TestToolAfterParentAfterModifiedInput(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatTwoCalls))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "Read" {
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetInput, Operation: ahp.OpMerge,
				Value: json.RawMessage(`{"timeout":30}`)}}
		}
		return nil
	}}
	subs := intercept("tool.before", "tool.after")
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, subs), Options{})
	session := map[string]string{"X-Hookproxy-Session": "s-parent"}
	_, _, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, session)
	before := map[string]string{} // call id → tool.before event id
	for _, p := range pol.callsOf("tool.before") {
		before[p.Event.Call.ID] = p.Event.ID
	}
	msg := gjson.GetBytes(got, "choices.0.message")
	loop := `{"model":"gpt-4o","messages":[{"role":"user","content":"x"},` + msg.Raw
	var ids []string
	msg.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
		ids = append(ids, c.Get("id").String())
		loop += `,{"role":"tool","tool_call_id":"` + c.Get("id").String() + `","content":"done"}`
		return true
	})
	loop += `]}`
	if len(ids) != 2 || !strings.Contains(msg.Raw, `\"timeout\":30`) {
		t.Fatalf("first answer: %s", got)
	}
	parents := func(p *fakePolicy) map[string]string {
		out := map[string]string{}
		for _, c := range p.callsOf("tool.after") {
			out[c.Event.Call.ID] = c.Event.ParentEventID
		}
		return out
	}
	if status, _, body := post(t, px.URL+chatPath, loop, session); status != 200 {
		t.Fatalf("tool loop: %d %s", status, body)
	}
	linked := parents(pol)
	for _, id := range ids {
		if linked[id] != before[id] {
			t.Errorf("tool.after of %s names parent %q, its tool.before was %q", id, linked[id], before[id])
		}
	}
	// Control: the same loop through a proxy that never settled the call.
	fresh := &fakePolicy{}
	px2 := startProxy(t, testConfig(up.URL), newTestChain(t, fresh, subs), Options{})
	post(t, px2.URL+chatPath, loop, session)
	unlinked := parents(fresh)
	if len(unlinked) != 2 || unlinked[ids[1]] == before[ids[1]] || unlinked[ids[0]] != before[ids[0]] {
		t.Errorf("control: parents %v, tool.before ids %v (only the unmodified call can be derived)", unlinked, before)
	}
	assertValidIntercepts(t, pol)
}
