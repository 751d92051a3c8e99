package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/hookproxy/hookproxy/mapping/mappingtest"
	"github.com/hookproxy/hookproxy/mapping/openai"
)

// The official SDK's accumulator, reading an edited stream over HTTP, ends with the
// completion the held path would have sent for the same verdicts.
func TestSDKAccumulatesEditedStream(t *testing.T) {
	c := openai.NewChat()
	var upstream bytes.Buffer
	if err := c.WriteStream(&upstream, fixture(t, "tool_response.json")); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]mappingtest.Script{
		"allowed":          nil,
		"first removed":    {0: {Remove: true, Note: "Tool call get_weather was blocked by policy: no"}},
		"second rewritten": {1: {Input: json.RawMessage(`{"city":"Lyon"}`)}},
		"all removed":      {0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}},
		"flow stop":        {0: {Remove: true, Stop: true, Note: "stopped"}},
	}
	for desc, script := range scripts {
		t.Run(desc, func(t *testing.T) {
			edited, err := mappingtest.Edit(c, upstream.Bytes(), 11, &mappingtest.Decider{Script: script})
			if err != nil {
				t.Fatal(err)
			}
			held, err := mappingtest.Held(c, upstream.Bytes(), script)
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
		})
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
