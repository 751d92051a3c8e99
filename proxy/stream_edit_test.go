package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/enforcement"
)

const chatStreamReq = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// chatTextThenCall is a stream with text, then one Bash call.
func chatTextThenCall(text, args string) []string {
	return []string{
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":` + jsonString(text) + `},"finish_reason":null}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"Bash","arguments":` + jsonString(args) + `}}]},"finish_reason":null}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n",
		"data: [DONE]\n\n",
	}
}

func jsonString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}

// lastEvent is the data of the last SSE event of a stream.
func lastEvent(stream string) string {
	evs := strings.Split(strings.TrimSpace(stream), "\n\n")
	return strings.TrimPrefix(evs[len(evs)-1], "data: ")
}

func TestStreamedToolBeforeFailsClosedPerCall(t *testing.T) {
	// The backend fails at tool.before: the text is already with the client; the call is
	// removed (fail-closed, as on the held path) and the agent is told why.
	for _, failing := range []bool{true, false} {
		up := newUpstream(t, sseResponder(chatTextThenCall("Running it.", `{"command":"ls"}`)...))
		pol := &fakePolicy{}
		if failing {
			pol.fail = errors.New("backend down")
		}
		ch := newTestChain(t, pol, intercept("tool.before"))
		log := &auditLog{}
		px := startProxy(t, testConfig(up.URL), ch, Options{Auditor: log.auditor()})
		status, h, got := post(t, px.URL+chatPath, chatStreamReq, nil)
		s := string(got)
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") || !strings.Contains(s, "Running it.") || !strings.HasSuffix(s, "data: [DONE]\n\n") {
			t.Fatalf("failing=%v: %d %s", failing, status, s)
		}
		if !failing {
			// Control: an allowing backend lets the call through.
			if !strings.Contains(s, `"name":"Bash"`) {
				t.Fatalf("control: %s", s)
			}
			continue
		}
		m := decodeChat(t, h, got)
		if strings.Contains(s, `"name":"Bash"`) || len(m.ToolCalls) != 0 || m.FinishReason != "stop" || !strings.Contains(*m.Content, "unavailable") {
			t.Fatalf("the call went out after a failed tool.before:\n%s", s)
		}
		recs := log.of("tool.before")
		if len(recs) != 1 || recs[0].Held != enforcement.HeldToolCalls || recs[0].Enforcement != enforcement.Refused {
			t.Errorf("tool.before audit %+v", recs)
		}
	}
}

func TestStreamHoldLimitBoundsCallsNotText(t *testing.T) {
	// The hold limit applies to what is held: a long text streams through a small limit,
	// a call larger than the limit ends the stream with an in-stream error.
	long := strings.Repeat("word ", 4000) // 20 KB of text
	for _, big := range []bool{false, true} {
		args := `{"command":"ls"}`
		if big {
			args = `{"command":"` + strings.Repeat("a", 8000) + `"}`
		}
		up := newUpstream(t, sseResponder(chatTextThenCall(long, args)...))
		pol := &fakePolicy{}
		cfg := testConfig(up.URL)
		cfg.Limits.MaxResponseBytes = 4096
		px := startProxy(t, cfg, newTestChain(t, pol, intercept("tool.before")), Options{})
		status, _, got := post(t, px.URL+chatPath, chatStreamReq, nil)
		s := string(got)
		if status != 200 || !strings.Contains(s, long) {
			t.Fatalf("big=%v: the text did not stream through: %d %.200s", big, status, s)
		}
		switch {
		case big && (strings.Contains(s, `"name":"Bash"`) || !strings.Contains(lastEvent(s), "hold limit")):
			t.Errorf("a call over the hold limit: %.300s", lastEvent(s))
		case !big && !strings.Contains(s, `"name":"Bash"`):
			t.Errorf("control: the small call did not arrive")
		}
	}
}

func TestStreamedObserversSeeTheUpstreamAndClientMessages(t *testing.T) {
	// model.response.after observes the upstream's message (with the denied call);
	// turn.end sees what the client received (without it); audit says tool_calls.
	up := newUpstream(t, sseResponder(chatTwoCallsSSE...))
	pol := &fakePolicy{effects: denyTool("Bash")}
	ch := newTestChain(t, pol, intercept("tool.before"), observe("model.response.after"))
	log := &auditLog{}
	px := startProxy(t, testConfig(up.URL), ch, Options{Auditor: log.auditor()})
	status, h, got := post(t, px.URL+chatPath, chatStreamReq, nil)
	if status != 200 {
		t.Fatalf("%d %s", status, got)
	}
	m := decodeChat(t, h, got)
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "Read" || m.Content == nil || !strings.Contains(*m.Content, "blocked by policy") {
		t.Fatalf("client message %+v", m)
	}
	mra := waitObserved(t, pol, "model.response.after", 1)
	if !strings.Contains(textOf(mra[0].Items), "rm -rf") {
		t.Errorf("model.response.after does not carry the upstream's message: %s", textOf(mra[0].Items))
	}
	recs := log.of("tool.before")
	if len(recs) != 2 || recs[0].Held != enforcement.HeldToolCalls || recs[1].Held != enforcement.HeldToolCalls {
		t.Errorf("tool.before audit %+v", recs)
	}
	// Control: with a model.response.after interceptor the response is held whole.
	log2 := &auditLog{}
	px2 := startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept("tool.before", "model.response.after")), Options{Auditor: log2.auditor()})
	post(t, px2.URL+chatPath, chatStreamReq, nil)
	if recs := log2.of("tool.before"); len(recs) != 2 || recs[0].Held != enforcement.HeldWhole {
		t.Errorf("held-whole audit %+v", recs)
	}
}

func TestChatErrorChunksHeldAndEdited(t *testing.T) {
	// A chunk whose "error" is "" is read on by openai-python and openai-node: the chunks
	// after it are judged, whether the stream is edited (tool.before only) or held whole
	// (model.response.after too). A truthy error ends every SDK's stream: nothing after it
	// reaches the client, held or edited. Control: straight to the upstream, the Bash call
	// is there after the error chunk.
	head := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"error":`
	call := chatTextThenCall("Running it.", `{"command":"rm -rf /"}`)
	for _, errVal := range []string{`""`, `{}`, `{"message":"overloaded","type":"server_error"}`} {
		events := append([]string{head + errVal + "}\n\n"}, call...)
		up := newUpstream(t, sseResponder(events...))
		_, _, raw := post(t, up.URL+"/v1/chat/completions", chatStreamReq, nil)
		if !strings.Contains(string(raw), `"name":"Bash"`) {
			t.Fatalf("control: the upstream's stream holds no call: %s", raw)
		}
		for _, held := range []bool{false, true} {
			subs := []sub{intercept("tool.before")}
			if held {
				subs = append(subs, intercept("model.response.after"))
			}
			pol := &fakePolicy{effects: denyTool("Bash")}
			px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, subs...), Options{})
			status, _, got := post(t, px.URL+chatPath, chatStreamReq, nil)
			s := string(got)
			if status != 200 || strings.Contains(s, `"name":"Bash"`) {
				t.Fatalf("error %s held=%v: the denied call reached the client: %d %s", errVal, held, status, s)
			}
			if readOn := errVal != `{"message":"overloaded","type":"server_error"}`; readOn != strings.Contains(s, "Running it.") {
				t.Errorf("error %s held=%v: the text after the error chunk reached the client: %v, want %v\n%s", errVal, held, !readOn, readOn, s)
			}
		}
	}
}
