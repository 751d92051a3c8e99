package responses

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

func mustDecodeResponse(t testing.TB, body string) *mapping.Response {
	t.Helper()
	resp, err := New().DecodeResponse([]byte(body))
	if err != nil {
		t.Fatalf("DecodeResponse: %v\n%s", err, body)
	}
	checkSchema(t, resp.Items)
	return resp
}

func TestDecodeResponse(t *testing.T) {
	resp := mustDecodeResponse(t, toolResponse)
	if resp.ID != "resp_abc123" || resp.Model != "gpt-5-2025-08-07" || resp.FinishReason != "completed" {
		t.Errorf("id %q model %q finish %q", resp.ID, resp.Model, resp.FinishReason)
	}
	if len(resp.Items) != 1 || resp.Items[0].ID != "resp_abc123" || resp.Items[0].Role != "assistant" || resp.Items[0].Synthesized {
		t.Fatalf("items %+v", resp.Items)
	}
	want := []partSummary{
		catText("reasoning", "Two cities."),
		encrypted,
		text("Let me check both."),
		toolCall(`{"id":"call_a","name":"get_weather","input":{"city":"Paris"}}`),
		toolCall(`{"id":"call_b","name":"run","input":{"cmd":"rm -rf /"}}`),
	}
	if got := summarize(resp.Items[0].Parts); !reflect.DeepEqual(got, want) {
		t.Errorf("parts:\n got %+v\nwant %+v", got, want)
	}
	u := resp.Usage
	if u == nil || *u.InputTokens != 82 || *u.OutputTokens != 17 || *u.CacheReadTokens != 64 || u.CacheWriteTokens != nil {
		t.Errorf("usage %+v", u)
	}
	if calls := mapping.ToolCalls(resp.Items); len(calls) != 2 || calls[1].Name != "run" {
		t.Errorf("tool calls %+v", calls)
	}
}

func TestDecodeResponseFinishReasons(t *testing.T) {
	tests := []struct{ desc, body, want string }{
		{"incomplete with a reason", `{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`, "max_output_tokens"},
		{"incomplete without a reason", `{"object":"response","status":"incomplete","output":[]}`, "incomplete"},
		{"in progress without output", `{"object":"response","status":"in_progress","output":null}`, "in_progress"},
		{"no status", `{"output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}]}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := mustDecodeResponse(t, tc.body).FinishReason; got != tc.want {
				t.Errorf("finish reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	tests := []struct {
		desc, body string
		upstream   *mapping.UpstreamError // nil: ErrMalformed
	}{
		{desc: "error body", body: `{"error":{"message":"Rate limit","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			upstream: &mapping.UpstreamError{Type: "requests", Message: "Rate limit"}},
		{desc: "failed response", body: `{"id":"r","object":"response","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`,
			upstream: &mapping.UpstreamError{Type: "server_error", Message: "boom"}},
		{desc: "error string", body: `{"error":"nope"}`, upstream: &mapping.UpstreamError{Message: "nope"}},
		{desc: "not JSON", body: `<html>`},
		{desc: "not an object", body: `[]`},
		{desc: "no output", body: `{"id":"r"}`},
		{desc: "output not an array", body: `{"object":"response","output":{}}`},
		{desc: "item not an object", body: `{"output":[1]}`},
		{desc: "call without name", body: `{"output":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`},
		{desc: "text entry without text", body: `{"output":[{"type":"message","content":[{"type":"output_text"}]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New().DecodeResponse([]byte(tc.body))
			var ue *mapping.UpstreamError
			switch {
			case tc.upstream != nil && (!errors.As(err, &ue) || *ue != *tc.upstream):
				t.Errorf("err = %v, want %+v", err, tc.upstream)
			case tc.upstream == nil && !errors.Is(err, mapping.ErrMalformed):
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestDecodeResponseCallWithoutCallID(t *testing.T) {
	// A compatible server that leaves call_id out still yields a stable call id.
	body := `{"id":"r","output":[{"type":"function_call","name":"f","arguments":"{}"}]}`
	a, b := mustDecodeResponse(t, body), mustDecodeResponse(t, body)
	ca, cb := mapping.ToolCalls(a.Items), mapping.ToolCalls(b.Items)
	if len(ca) != 1 || !strings.HasPrefix(ca[0].ID, "call_") || ca[0].ID != cb[0].ID {
		t.Errorf("calls %+v %+v", ca, cb)
	}
}

// note is the part the proxy appends when it removes a call.
func note(msgID, s string) ahp.Part {
	p := ahp.TextPart(msgID+".hookproxy.9", s)
	p.Synthesized = true
	return p
}

func TestEncodeResponse(t *testing.T) {
	resp := mustDecodeResponse(t, toolResponse)
	orig := gjson.Parse(toolResponse)
	out := func(i int) string { return orig.Get("output." + string(rune('0'+i))).Raw }
	tests := []struct {
		desc   string
		edit   func([]ahp.Message) []ahp.Message
		finish string
		check  func(t *testing.T, got gjson.Result)
	}{
		{
			desc: "denied call removed with a note",
			edit: func(in []ahp.Message) []ahp.Message {
				m := cloneItems(in)
				m[0].Parts = append(m[0].Parts[:4:4], note(m[0].ID, "Tool call run was blocked by policy: no"))
				return m
			},
			check: func(t *testing.T, got gjson.Result) {
				o := got.Get("output").Array()
				if len(o) != 5 || o[0].Raw != out(0) || o[1].Raw != out(1) || o[2].Raw != out(2) || o[3].Raw != out(3) {
					t.Fatalf("output: %s", got.Get("output").Raw)
				}
				if strings.Contains(got.Raw, "call_b") {
					t.Errorf("the denied call is still there")
				}
				n := o[4]
				if n.Get("type").String() != "message" || n.Get("role").String() != "assistant" || n.Get("status").String() != "completed" ||
					!strings.HasPrefix(n.Get("id").String(), "msg_hookproxy_") ||
					n.Get("content.0.text").String() != "Tool call run was blocked by policy: no" || n.Get("content.0.type").String() != "output_text" {
					t.Errorf("note item: %s", n.Raw)
				}
				if got.Get("status").String() != "completed" || got.Get("usage").Raw != orig.Get("usage").Raw {
					t.Errorf("status and usage must stay")
				}
			},
		},
		{
			desc: "arguments rewritten",
			edit: func(in []ahp.Message) []ahp.Message {
				return setText(in, 0, 4, `{"id":"call_b","name":"run","input":{"cmd":"ls -la /tmp"}}`)
			},
			check: func(t *testing.T, got gjson.Result) {
				c := got.Get("output.4")
				if c.Get("arguments").String() != `{"cmd":"ls -la /tmp"}` || c.Get("id").String() != "fc_9b" || c.Get("call_id").String() != "call_b" {
					t.Errorf("call: %s", c.Raw)
				}
			},
		},
		{
			desc: "every call removed, terminal finish",
			edit: func(in []ahp.Message) []ahp.Message {
				m := cloneItems(in)
				m[0].Parts = m[0].Parts[:3]
				return m
			},
			finish: "completed",
			check: func(t *testing.T, got gjson.Result) {
				if strings.Contains(got.Get("output").Raw, "function_call") || len(got.Get("output").Array()) != 3 {
					t.Errorf("output: %s", got.Get("output").Raw)
				}
			},
		},
		{
			desc: "text rewritten drops stale annotations and logprobs",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 0, 2, "Checking.") },
			check: func(t *testing.T, got gjson.Result) {
				if got.Get("output.1.content.0").Raw != `{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}` {
					t.Errorf("content: %s", got.Get("output.1.content.0").Raw)
				}
			},
		},
		{
			desc:   "finish reason written as status",
			edit:   func(in []ahp.Message) []ahp.Message { return in },
			finish: "max_output_tokens",
			check: func(t *testing.T, got gjson.Result) {
				if got.Get("status").String() != "incomplete" || got.Get("incomplete_details.reason").String() != "max_output_tokens" ||
					got.Get("output").Raw != orig.Get("output").Raw {
					t.Errorf("status %s details %s", got.Get("status"), got.Get("incomplete_details"))
				}
			},
		},
		{
			desc: "replaced by a new message: it reuses the message item, opaque items stay",
			edit: func([]ahp.Message) []ahp.Message {
				return []ahp.Message{{ID: "x", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("x.0", "Replaced.")}}}
			},
			check: func(t *testing.T, got gjson.Result) {
				o := got.Get("output").Array()
				if len(o) != 2 || o[0].Get("id").String() != "msg_9" || o[0].Get("content.0.text").String() != "Replaced." || o[1].Raw != out(3) {
					t.Errorf("output: %s", got.Get("output").Raw)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := New().EncodeResponse(resp, tc.edit(resp.Items), tc.finish)
			if err != nil {
				t.Fatal(err)
			}
			got := gjson.ParseBytes(body)
			if !got.IsObject() {
				t.Fatalf("not JSON: %s", body)
			}
			tc.check(t, got)
			if _, err := New().DecodeResponse(body); err != nil {
				t.Errorf("rendered response does not decode: %v", err)
			}
		})
	}
	t.Run("unchanged", func(t *testing.T) {
		for _, finish := range []string{"", "completed"} {
			body, err := New().EncodeResponse(resp, cloneItems(resp.Items), finish)
			if err != nil || string(body) != toolResponse {
				t.Errorf("unchanged response must keep its bytes (finish %q): %v", finish, err)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, items := range [][]ahp.Message{
			{{ID: "u", Role: "user", Parts: []ahp.Part{ahp.TextPart("u.0", "x")}}},
			setText(resp.Items, 0, 1, "invented"),
		} {
			if _, err := New().EncodeResponse(resp, items, ""); err == nil {
				t.Errorf("items %+v must be refused", items)
			}
		}
		// Reasoning text joins an original reasoning item; with none, it cannot be written.
		plain := mustDecodeResponse(t, `{"id":"r","status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"a"}]}]}`)
		items := setText(plain.Items, 0, 0, "a")
		items[0].Parts = append(items[0].Parts, textPart("r.x", "thinking", ahp.CategoryReasoning))
		if _, err := New().EncodeResponse(plain, items, ""); err == nil || !strings.Contains(err.Error(), "new reasoning") {
			t.Errorf("err = %v", err)
		}
		if _, err := New().EncodeResponse(&mapping.Response{}, nil, ""); err == nil {
			t.Error("a response this translator did not decode must be refused")
		}
	})
}

func TestSynthesizeResponse(t *testing.T) {
	req := mustDecode(t, `{"model":"gpt-5","instructions":"sys","input":"hi","tools":[{"type":"function","name":"f"}],"temperature":0.2}`)
	items := []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{
		ahp.TextPart("s.0", "Supplied."),
		mapping.ToolCallPart("s.1", mapping.ToolCall{ID: "call_s", Name: "f", Input: []byte(`{"a":"<b>"}`)}),
	}}}
	body, err := New().SynthesizeResponse(req, items, "")
	if err != nil {
		t.Fatal(err)
	}
	got := gjson.ParseBytes(body)
	if !strings.HasPrefix(got.Get("id").String(), "resp_hookproxy_") || got.Get("object").String() != "response" ||
		got.Get("status").String() != "completed" || got.Get("model").String() != "gpt-5" ||
		got.Get("instructions").String() != "sys" || got.Get("temperature").Raw != "0.2" ||
		got.Get("tools.0.name").String() != "f" || got.Get("usage").Exists() || got.Get("error").Type != gjson.Null {
		t.Errorf("response: %s", body)
	}
	resp := mustDecodeResponse(t, string(body))
	want := []partSummary{text("Supplied."), toolCall(`{"id":"call_s","name":"f","input":{"a":"<b>"}}`)}
	if g := summarize(resp.Items[0].Parts); !reflect.DeepEqual(g, want) || resp.FinishReason != "completed" || resp.Usage != nil {
		t.Errorf("decoded back: %+v finish %q usage %+v", g, resp.FinishReason, resp.Usage)
	}
	if c := got.Get("output.1"); c.Get("type").String() != "function_call" || c.Get("arguments").String() != `{"a":"<b>"}` {
		t.Errorf("call item: %s", c.Raw)
	}
	t.Run("without a request", func(t *testing.T) {
		body, err := New().SynthesizeResponse(nil, nil, "")
		if err != nil || gjson.GetBytes(body, "output").Raw != "[]" || gjson.GetBytes(body, "instructions").Type != gjson.Null {
			t.Errorf("body %s err %v", body, err)
		}
	})
	t.Run("supplied reasoning is refused", func(t *testing.T) {
		items := []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{textPart("s.0", "hm", ahp.CategoryReasoning)}}}
		if _, err := New().SynthesizeResponse(req, items, ""); err == nil {
			t.Error("want an error")
		}
	})
}

func TestErrorBody(t *testing.T) {
	got := string(New().ErrorBody(403, "policy_denied", "com.example.x", "no \"secrets\" <here>"))
	want := `{"error":{"message":"no \"secrets\" <here>","type":"policy_denied","param":null,"code":"com.example.x"}}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if got := string(New().ErrorBody(400, "invalid_request_error", "", "bad")); !strings.HasSuffix(got, `"code":null}}`) {
		t.Errorf("empty code must be null: %s", got)
	}
}
