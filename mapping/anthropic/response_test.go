package anthropic_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

// message is a compact response with thinking (signed), text, two tool calls and unknown
// fields at message and block level.
const message = `{"id":"msg_01ABC","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"thinking","thinking":"check branch first","signature":"EqQBCkYIBxgCKkB=="},` +
	`{"type":"text","text":"Pushing now."},` +
	`{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"git push --force origin main"},"x_block":1},` +
	`{"type":"tool_use","id":"toolu_02","name":"Read","input":{"path":"README.md"}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"x_vendor":{"a":1},` +
	`"usage":{"input_tokens":120,"output_tokens":80,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"service_tier":"standard"}}`

func decodeResp(t testing.TB, body string) *mapping.Response {
	t.Helper()
	resp, err := tr.DecodeResponse([]byte(body))
	if err != nil {
		t.Fatalf("DecodeResponse: %v", err)
	}
	return resp
}

func TestDecodeResponse(t *testing.T) {
	resp := decodeResp(t, message)
	if resp.ID != "msg_01ABC" || resp.Model != "claude-sonnet-4-5" || resp.FinishReason != "tool_use" {
		t.Errorf("ID %q Model %q FinishReason %q", resp.ID, resp.Model, resp.FinishReason)
	}
	if len(resp.Items) != 1 || resp.Items[0].ID != "msg_01ABC" || resp.Items[0].Synthesized || resp.Items[0].Role != ahp.RoleAssistant {
		t.Fatalf("Items = %+v", resp.Items)
	}
	want := `assistant{text [reasoning] "check branch first"; text "Pushing now."; ` +
		`text [tool_call] "{\"id\":\"toolu_01\",\"name\":\"Bash\",\"input\":{\"command\":\"git push --force origin main\"}}"; ` +
		`text [tool_call] "{\"id\":\"toolu_02\",\"name\":\"Read\",\"input\":{\"path\":\"README.md\"}}"}`
	if got := summary(resp.Items); got != want {
		t.Errorf("items\n got: %s\nwant: %s", got, want)
	}
	if resp.Items[0].Parts[2].ID != "msg_01ABC.p2" {
		t.Errorf("part id %q", resp.Items[0].Parts[2].ID)
	}
	if calls := mapping.ToolCalls(resp.Items); len(calls) != 2 || calls[0].ID != "toolu_01" || calls[1].Name != "Read" {
		t.Errorf("ToolCalls = %+v", calls)
	}
	u := resp.Usage
	if u == nil || u.Kind != "amount" || u.Scope != "attempt" || u.Completeness != "complete" || u.Provenance != "provider" ||
		*u.InputTokens != 120 || *u.OutputTokens != 80 || *u.CacheReadTokens != 1000 || *u.CacheWriteTokens != 0 {
		t.Errorf("Usage = %+v", u)
	}

	partial := decodeResp(t, `{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"redacted_thinking","data":"X"}],"stop_reason":"end_turn","usage":{"output_tokens":3}}`)
	if partial.Usage.InputTokens != nil || *partial.Usage.OutputTokens != 3 {
		t.Errorf("absent counts must stay absent: %+v", partial.Usage)
	}
	if got := summary(partial.Items); got != `assistant{text metadata [reasoning]}` {
		t.Errorf("redacted thinking: %s", got)
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	_, err := tr.DecodeResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	var up *mapping.UpstreamError
	if !errors.As(err, &up) || up.Type != "overloaded_error" || up.Message != "Overloaded" || up.Status != 529 {
		t.Errorf("error body: %#v", err)
	}
	for _, body := range []string{``, `<html>502</html>`, `[]`, `{"id":"m"}`, `{"content":{}}`, `{"content":[{"type":"tool_use","id":"a","name":"b","input":[]}]}`} {
		if _, err := tr.DecodeResponse([]byte(body)); !errors.Is(err, mapping.ErrMalformed) {
			t.Errorf("DecodeResponse(%q) = %v, want ErrMalformed", body, err)
		}
	}
}

func TestEncodeResponse(t *testing.T) {
	tests := []struct {
		desc   string
		edit   func(items []ahp.Message) []ahp.Message
		finish string
		want   string
		err    error
	}{
		{
			desc: "unchanged",
			edit: func(items []ahp.Message) []ahp.Message { return items },
			want: message,
		},
		{
			desc: "tool.before deny: call removed, explanation appended, terminal stop",
			edit: func(items []ahp.Message) []ahp.Message {
				p := items[0].Parts
				items[0].Parts = append(p[:2:2], p[3], ahp.TextPart("hp.deny", "Blocked by policy: force push."))
				return items
			},
			finish: "tool_use",
			want: strings.Replace(message,
				`{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"git push --force origin main"},"x_block":1},{"type":"tool_use","id":"toolu_02","name":"Read","input":{"path":"README.md"}}]`,
				`{"type":"tool_use","id":"toolu_02","name":"Read","input":{"path":"README.md"}},{"type":"text","text":"Blocked by policy: force push."}]`, 1),
		},
		{
			desc: "flow stop: every call removed",
			edit: func(items []ahp.Message) []ahp.Message {
				items[0].Parts = items[0].Parts[:2]
				return items
			},
			finish: "end_turn",
			want: strings.Replace(strings.Replace(message,
				`,{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"git push --force origin main"},"x_block":1},{"type":"tool_use","id":"toolu_02","name":"Read","input":{"path":"README.md"}}]`, `]`, 1),
				`"stop_reason":"tool_use"`, `"stop_reason":"end_turn"`, 1),
		},
		{
			desc: "modify(input) rewrites only input, unknown block fields kept",
			edit: func(items []ahp.Message) []ahp.Message {
				items[0].Parts[2] = mapping.ToolCallPart(items[0].Parts[2].ID, mapping.ToolCall{ID: "toolu_01", Name: "Bash", Input: json.RawMessage(`{"command":"git push origin main"}`)})
				return items
			},
			want: strings.Replace(message, `"git push --force origin main"`, `"git push origin main"`, 1),
		},
		{
			desc: "text rewritten, thinking signature preserved",
			edit: func(items []ahp.Message) []ahp.Message {
				items[0].Parts[1].Text = ptr("Pushing safely.")
				return items
			},
			want: strings.Replace(message, `"Pushing now."`, `"Pushing safely."`, 1),
		},
		{
			desc: "thinking rewrite refused",
			edit: func(items []ahp.Message) []ahp.Message {
				items[0].Parts[0].Text = ptr("something else")
				return items
			},
			err: anthropic.ErrReasoningImmutable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			resp := decodeResp(t, message)
			out, err := tr.EncodeResponse(resp, tt.edit(clone(resp.Items)), tt.finish)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("body\n got: %s\nwant: %s", out, tt.want)
			}
			if _, err := tr.DecodeResponse(out); err != nil {
				t.Errorf("re-decode: %v", err)
			}
		})
	}
}

func TestSynthesizeResponse(t *testing.T) {
	req := decode(t, `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`)
	items := []ahp.Message{{ID: "ret", Role: ahp.RoleAssistant, Parts: []ahp.Part{
		ahp.TextPart("ret.p0", "Supplied answer <ok>"),
		mapping.ToolCallPart("ret.p1", mapping.ToolCall{ID: "toolu_s", Name: "Read", Input: json.RawMessage(`{"path":"x"}`)}),
	}}}
	out, err := tr.SynthesizeResponse(req, items, "")
	if err != nil {
		t.Fatal(err)
	}
	var msg sdk.Message
	if err := json.Unmarshal(out, &msg); err != nil {
		t.Fatalf("SDK cannot parse %s: %v", out, err)
	}
	if !strings.HasPrefix(msg.ID, anthropic.SynthesizedIDPrefix) || msg.Model != "claude-haiku-4-5" || msg.StopReason != "tool_use" ||
		len(msg.Content) != 2 || msg.Content[0].Text != "Supplied answer <ok>" || msg.Content[1].Name != "Read" || string(msg.Content[1].Input) != `{"path":"x"}` {
		t.Errorf("message = %s", out)
	}
	if gjson.GetBytes(out, "stop_sequence").Type != gjson.Null || !gjson.GetBytes(out, "usage.input_tokens").Exists() {
		t.Errorf("stop_sequence/usage: %s", out)
	}
	resp, err := tr.DecodeResponse(out)
	if err != nil || resp.Usage != nil {
		t.Errorf("synthesized response must report no usage: %+v, %v", resp, err)
	}
	if other, _ := tr.SynthesizeResponse(req, nil, "end_turn"); gjson.GetBytes(other, "id").String() == msg.ID {
		t.Error("synthesized ids repeat")
	}
	if _, err := tr.SynthesizeResponse(nil, []ahp.Message{{ID: "x", Role: ahp.RoleUser}}, ""); err == nil {
		t.Error("non-assistant message: want an error")
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		desc    string
		status  int
		errType string
		want    string
	}{
		{"refusal", http.StatusForbidden, "permission_error", `{"type":"error","error":{"type":"permission_error","message":"m \"q\""}}`},
		{"bad request by status", http.StatusBadRequest, "", `{"type":"error","error":{"type":"invalid_request_error","message":"m \"q\""}}`},
		{"too large", http.StatusRequestEntityTooLarge, "", `{"type":"error","error":{"type":"request_too_large","message":"m \"q\""}}`},
		{"bad gateway", http.StatusBadGateway, "", `{"type":"error","error":{"type":"api_error","message":"m \"q\""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := tr.ErrorBody(tt.status, tt.errType, "hookproxy.denied", `m "q"`)
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			// The official SDK reads it as an API error of that type.
			var e struct {
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(got, &e); err != nil || e.Error.Message != `m "q"` {
				t.Errorf("unparseable: %v", err)
			}
		})
	}
	if tr.TerminalFinishReason() != "end_turn" || tr.Provider() != "anthropic" || tr.ToolPath() != "hookproxy.anthropic.messages" {
		t.Error("identity")
	}
}
