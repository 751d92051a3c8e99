package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/hookproxy/hookproxy/mapping/mappingtest"
	"github.com/hookproxy/hookproxy/mapping/openai/chat"
)

// The official SDK's accumulator, reading an edited stream over HTTP, ends with the
// completion the held path would have sent for the same verdicts.
func TestSDKAccumulatesEditedStream(t *testing.T) {
	c := chat.NewChat()
	var fromBody bytes.Buffer
	if err := c.WriteStream(&fromBody, fixture(t, "tool_response.json")); err != nil {
		t.Fatal(err)
	}
	chunk := func(delta, finish string) string {
		return `data: {"id":"c9","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	call := func(i int, id, name, args string) string {
		return `{"index":` + strconv.Itoa(i) + `,"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":` + strconv.Quote(args) + `}}`
	}
	// A call whose arguments arrive in 50 deltas.
	fifty := chunk(`{"role":"assistant","content":"ok"}`, "null") + chunk(`{"tool_calls":[`+call(0, "call_1", "Bash", "")+`]}`, "null")
	for i := 0; i < 50; i++ {
		frag := "a"
		switch i {
		case 0:
			frag = `{"command":"echo `
		case 49:
			frag = `"}`
		}
		fifty += chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+strconv.Quote(frag)+`}}]}`, "null")
	}
	fifty += chunk(`{"tool_calls":[`+call(1, "call_2", "Read", `{"path":"x"}`)+`]}`, "null") + chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n"
	streams := map[string]string{
		"text, reasoning, two calls": fromBody.String(),
		"parallel calls in one chunk": chunk(`{"role":"assistant","content":null,"tool_calls":[`+call(0, "call_1", "Bash", `{"command":"ls"}`)+`,`+call(1, "call_2", "Read", `{"path":"x"}`)+`]}`, "null") +
			chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n",
		"text after a tool call": chunk(`{"role":"assistant","content":"first "}`, "null") + chunk(`{"tool_calls":[`+call(0, "call_1", "Bash", `{"command":"ls"}`)+`]}`, "null") +
			chunk(`{"content":"then more"}`, "null") + chunk(`{"tool_calls":[`+call(1, "call_2", "Read", `{"path":"x"}`)+`]}`, "null") + chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n",
		"arguments in 50 deltas": fifty,
	}
	scripts := map[string]mappingtest.Script{
		"allowed":          nil,
		"first removed":    {0: {Remove: true, Note: "Tool call was blocked by policy: no"}},
		"second rewritten": {1: {Input: json.RawMessage(`{"city":"Lyon"}`)}},
		"all removed":      {0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}},
		"flow stop":        {0: {Remove: true, Stop: true, Note: "stopped"}},
		// What the proxy's decider answers when the backend fails closed at tool.before.
		"fail-closed backend": {0: {Remove: true, Note: "Tool call Bash was blocked by policy: Required policy backend b unavailable."}, 1: {Remove: true, Note: "Tool call Read was blocked by policy: Required policy backend b unavailable."}},
	}
	for sdesc, upstream := range streams {
		for desc, script := range scripts {
			t.Run(sdesc+"/"+desc, func(t *testing.T) {
				checkSDKAccumulates(t, c, []byte(upstream), script)
			})
		}
	}
}

func checkSDKAccumulates(t *testing.T, c *chat.Chat, upstream []byte, script mappingtest.Script) {
	edited, err := mappingtest.Edit(c, upstream, 11, &mappingtest.Decider{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	held, err := mappingtest.Held(c, upstream, script)
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, serving(200, "text/event-stream", edited))
	s := client.Chat.Completions.NewStreaming(context.Background(), hi)
	var acc oai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			t.Fatal("the accumulator rejected a chunk")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	var want oai.ChatCompletion
	if err := want.UnmarshalJSON(held); err != nil {
		t.Fatal(err)
	}
	got := acc.ChatCompletion
	gm, wm := got.Choices[0].Message, want.Choices[0].Message
	if gm.Content != wm.Content || got.Choices[0].FinishReason != want.Choices[0].FinishReason {
		t.Errorf("content %q finish %q, want %q %q", gm.Content, got.Choices[0].FinishReason, wm.Content, want.Choices[0].FinishReason)
	}
	if len(gm.ToolCalls) != len(wm.ToolCalls) {
		t.Fatalf("%d tool calls, want %d", len(gm.ToolCalls), len(wm.ToolCalls))
	}
	for i := range gm.ToolCalls {
		g, w := gm.ToolCalls[i], wm.ToolCalls[i]
		if g.ID != w.ID || g.Function.Name != w.Function.Name || !sameJSON(g.Function.Arguments, w.Function.Arguments) {
			t.Errorf("tool call %d: %s %s %s, want %s %s %s", i, g.ID, g.Function.Name, g.Function.Arguments, w.ID, w.Function.Name, w.Function.Arguments)
		}
	}
}

// sameJSON compares two JSON texts by value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
