package chat

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

func i64(n int64) *int64 { return &n }

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		desc   string
		body   string
		ids    []string
		parts  [][]partSummary
		finish string
		usage  *ahp.Usage
	}{
		{desc: "text, reasoning and tool calls", body: toolResponse,
			ids: []string{"chatcmpl-abc123"},
			parts: [][]partSummary{{
				catText("reasoning", "Two cities."),
				text("Let me check both."),
				catText("tool_call", `{"id":"call_a","name":"get_weather","input":{"city":"Paris"}}`),
				catText("tool_call", `{"id":"call_b","name":"run","input":{"cmd":"rm -rf /"}}`),
			}},
			finish: "tool_calls",
			usage: &ahp.Usage{Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider",
				InputTokens: i64(82), OutputTokens: i64(17), CacheReadTokens: i64(64)},
		},
		{desc: "refusal", body: `{"id":"r1","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help."},"finish_reason":"stop"}]}`,
			ids: []string{"r1"}, parts: [][]partSummary{{text("I can't help.")}}, finish: "stop"},
		{desc: "n=2 maps every choice", body: `{"id":"r2","choices":[
				{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"},
				{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			ids: []string{"r2", "r2.choice1"}, parts: [][]partSummary{{text("a")}, {catText("tool_call", `{"id":"c","name":"f","input":{}}`)}},
			finish: "stop"},
		{desc: "legacy function_call", body: `{"id":"r3","choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}},"finish_reason":"function_call"}]}`,
			ids: []string{"r3"}, parts: [][]partSummary{{catText("tool_call", `{"id":"`+legacyCallID("f", `{"a":1}`)+`","name":"f","input":{"a":1}}`)}},
			finish: "function_call"},
		{desc: "compatible server: reasoning field, arguments object", body: `{"id":"r4","choices":[{"index":0,"message":{"role":"assistant","reasoning":"hmm","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{"k":"v"}}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`,
			ids: []string{"r4"}, parts: [][]partSummary{{catText("reasoning", "hmm"), text("x"), catText("tool_call", `{"id":"c","name":"f","input":{"k":"v"}}`)}},
			finish: "tool_calls",
			usage:  &ahp.Usage{Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider", InputTokens: i64(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, err := NewChat().DecodeResponse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, resp.Items)
			if len(resp.Items) != len(tc.ids) {
				t.Fatalf("%d items, want %d", len(resp.Items), len(tc.ids))
			}
			for i, m := range resp.Items {
				if m.ID != tc.ids[i] || m.Role != "assistant" {
					t.Errorf("item %d: id %q role %q", i, m.ID, m.Role)
				}
				if got := summarize(m.Parts); !reflect.DeepEqual(got, tc.parts[i]) {
					t.Errorf("item %d parts:\n got %+v\nwant %+v", i, got, tc.parts[i])
				}
			}
			if resp.FinishReason != tc.finish {
				t.Errorf("finish %q, want %q", resp.FinishReason, tc.finish)
			}
			if !reflect.DeepEqual(resp.Usage, tc.usage) {
				t.Errorf("usage %+v, want %+v", resp.Usage, tc.usage)
			}
		})
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	tests := []struct {
		desc      string
		body      string
		upstream  *mapping.UpstreamError
		malformed bool
	}{
		{desc: "error object", body: `{"error":{"message":"Rate limit","type":"rate_limit_exceeded","param":null,"code":"rate_limit_exceeded"}}`,
			upstream: &mapping.UpstreamError{Type: "rate_limit_exceeded", Message: "Rate limit"}},
		{desc: "error string", body: `{"error":"bad gateway"}`, upstream: &mapping.UpstreamError{Message: "bad gateway"}},
		{desc: "not JSON", body: `<html>`, malformed: true},
		{desc: "truncated", body: `{"id":"x","choices":[`, malformed: true},
		{desc: "no choices", body: `{"id":"x"}`, malformed: true},
		{desc: "empty choices", body: `{"id":"x","choices":[]}`, malformed: true},
		{desc: "choice without message", body: `{"id":"x","choices":[{"index":0}]}`, malformed: true},
		{desc: "tool call without name", body: `{"id":"x","choices":[{"message":{"tool_calls":[{"id":"c","function":{}}]}}]}`, malformed: true},
		{desc: "content number", body: `{"id":"x","choices":[{"message":{"content":1}}]}`, malformed: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := NewChat().DecodeResponse([]byte(tc.body))
			var ue *mapping.UpstreamError
			switch {
			case tc.upstream != nil:
				if !errors.As(err, &ue) || *ue != *tc.upstream {
					t.Errorf("err = %#v, want %#v", err, tc.upstream)
				}
			case tc.malformed:
				if !errors.Is(err, mapping.ErrMalformed) {
					t.Errorf("err = %v, want ErrMalformed", err)
				}
			}
		})
	}
}

func TestEncodeResponse(t *testing.T) {
	c := NewChat()
	orig := []byte(toolResponse)
	resp, err := c.DecodeResponse(orig)
	if err != nil {
		t.Fatal(err)
	}
	msg := gjson.Get(toolResponse, "choices.0.message")
	callA, callB := msg.Get("tool_calls.0").Raw, msg.Get("tool_calls.1").Raw
	without := func(drop ...int) []ahp.Message {
		items := cloneItems(resp.Items)
		var kept []ahp.Part
		for i, p := range items[0].Parts {
			if !contains(drop, i) {
				kept = append(kept, p)
			}
		}
		items[0].Parts = kept
		return items
	}
	tests := []struct {
		desc      string
		items     func() []ahp.Message
		finish    string
		toolCalls []string // expected raw entries; nil = no tool_calls key
		content   string   // expected raw content
		wantFin   string
	}{
		{desc: "deny one call removes it, others byte-identical", items: func() []ahp.Message { return without(3) },
			finish: "tool_calls", toolCalls: []string{callA}, content: `"Let me check both."`, wantFin: "tool_calls"},
		{desc: "rewrite arguments", items: func() []ahp.Message {
			items := cloneItems(resp.Items)
			items[0].Parts[3] = mapping.ToolCallPart(items[0].Parts[3].ID, mapping.ToolCall{ID: "call_b", Name: "run", Input: json.RawMessage(`{"cmd": "ls"}`)})
			return items
		}, finish: "tool_calls", toolCalls: []string{callA, `{"id": "call_b", "type": "function", "function": {"name": "run", "arguments": "{\"cmd\":\"ls\"}"}}`},
			content: `"Let me check both."`, wantFin: "tool_calls"},
		{desc: "remove every call with an explanation", items: func() []ahp.Message {
			items := without(2, 3)
			items[0].Parts = append(items[0].Parts, ahp.TextPart("blk", "Tool call blocked by policy."))
			return items
		}, finish: "stop", content: `"Let me check both.\n\nTool call blocked by policy."`, wantFin: "stop"},
		{desc: "text rewrite only", items: func() []ahp.Message { return setText(resp.Items, 0, 1, "Checking.") },
			finish: "tool_calls", toolCalls: []string{callA, callB}, content: `"Checking."`, wantFin: "tool_calls"},
		{desc: "flow stop keeps text, drops calls", items: func() []ahp.Message { return without(2, 3) },
			finish: "", content: `"Let me check both."`, wantFin: "tool_calls"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := c.EncodeResponse(resp, tc.items(), tc.finish)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			root := gjson.ParseBytes(out)
			gjson.Parse(toolResponse).ForEach(func(k, v gjson.Result) bool {
				if k.Str != "choices" && root.Get(k.Str).Raw != v.Raw {
					t.Errorf("top-level %s changed", k.Str)
				}
				return true
			})
			m := root.Get("choices.0.message")
			if tc.toolCalls == nil {
				if m.Get("tool_calls").Exists() {
					t.Errorf("tool_calls left: %s", m.Get("tool_calls").Raw)
				}
			} else {
				var got []string
				m.Get("tool_calls").ForEach(func(_, e gjson.Result) bool { got = append(got, e.Raw); return true })
				if len(got) != len(tc.toolCalls) {
					t.Fatalf("tool calls %v, want %v", got, tc.toolCalls)
				}
				for i := range got {
					if got[i] != tc.toolCalls[i] && compact(t, got[i]) != compact(t, tc.toolCalls[i]) {
						t.Errorf("tool call %d:\n got %s\nwant %s", i, got[i], tc.toolCalls[i])
					}
				}
				// Unchanged calls keep their bytes exactly.
				if got[0] != callA {
					t.Errorf("unchanged call rewritten: %s", got[0])
				}
			}
			if got := m.Get("content").Raw; got != tc.content {
				t.Errorf("content %s, want %s", got, tc.content)
			}
			if got := root.Get("choices.0.finish_reason").Str; got != tc.wantFin {
				t.Errorf("finish %q, want %q", got, tc.wantFin)
			}
			if m.Get("annotations").Raw != "[]" || m.Get("reasoning_content").Str != "Two cities." {
				t.Errorf("message fields lost: %s", m.Raw)
			}
			if _, err := c.DecodeResponse(out); err != nil {
				t.Errorf("re-decode: %v", err)
			}
		})
	}
	t.Run("unchanged returns original", func(t *testing.T) {
		out, err := c.EncodeResponse(resp, cloneItems(resp.Items), resp.FinishReason)
		if err != nil || &out[0] != &orig[0] {
			t.Errorf("err %v, same %v", err, err == nil && &out[0] == &orig[0])
		}
	})
	t.Run("non-assistant item", func(t *testing.T) {
		items := cloneItems(resp.Items)
		items[0].Role = "user"
		if _, err := c.EncodeResponse(resp, items, "stop"); err == nil {
			t.Error("no error")
		}
	})
}

func TestEncodeResponseMultipleChoices(t *testing.T) {
	c := NewChat()
	body := `{"id":"r","choices":[
		{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"},
		{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	resp, err := c.DecodeResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	items := cloneItems(resp.Items)
	items[1].Parts = nil // the call in choice 1 was denied
	items = append(items, ahp.Message{ID: "note", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("n", "note")}})
	out, err := c.EncodeResponse(resp, items, "stop")
	if err != nil {
		t.Fatal(err)
	}
	root := gjson.ParseBytes(out)
	if got := root.Get("choices.0.message.content").Str; got != "a\n\nnote" {
		t.Errorf("choice 0 content %q", got)
	}
	if root.Get("choices.1.message.tool_calls").Exists() || root.Get("choices.1.finish_reason").Str != "stop" {
		t.Errorf("choice 1 = %s", root.Get("choices.1").Raw)
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
