package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/config"
)

// What signs a turn on the other two APIs survives a removed call as it came. Anthropic
// signs each thinking block over its own text (signature inside the block, not on a
// tool_use), and Responses carries reasoning as items of their own (encrypted_content), so
// removing a call must leave those blocks and items byte for byte, in place, with the calls
// kept after them — there is nothing to move. These checks pin that down.

const (
	anthropicSignedTurn = `{"id":"msg_sig1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[` +
		`{"type":"thinking","thinking":"Clean first, then read.","signature":"EqQBCkYIBxgCKkBsigned=="},` +
		`{"type":"redacted_thinking","data":"EmwKAhgBEgyredacted=="},` +
		`{"type":"tool_use","id":"toolu_rm","name":"Bash","input":{"command":"rm -rf /"}},` +
		`{"type":"tool_use","id":"toolu_read","name":"Read","input":{"path":"README.md"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":30}}`
	responsesSignedTurn = `{"id":"resp_sig1","object":"response","created_at":1760000000,"status":"completed","model":"gpt-5","output":[` +
		`{"id":"rs_sig1","type":"reasoning","summary":[],"encrypted_content":"gAAAAABoSIGNEDreasoning=="},` +
		`{"id":"fc_rm","type":"function_call","status":"completed","call_id":"call_rm","name":"shell","arguments":"{\"command\":\"rm -rf /\"}"},` +
		`{"id":"fc_read","type":"function_call","status":"completed","call_id":"call_read","name":"read_file","arguments":"{\"path\":\"README.md\"}"}],` +
		`"usage":{"input_tokens":40,"output_tokens":30,"total_tokens":70}}`
)

// TestSignedReasoningKeptAfterRemovedCall: the default chain removes the destructive call;
// the thinking blocks (Anthropic) and the reasoning item (Responses) reach the client byte
// for byte, first, followed by the call kept. Control: straight from the upstream the
// destructive call is there, so the removal is real.
func TestSignedReasoningKeptAfterRemovedCall(t *testing.T) {
	for _, tc := range []struct {
		name, route, path, request, answer string
		signed                             []string // paths of what must pass byte for byte
		itemsPath, kind                    string
	}{
		{"anthropic", "/anthropic", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Clean the repo."}]}`,
			anthropicSignedTurn, []string{"content.0", "content.1"}, "content", "tool_use"},
		{"responses", "/openai", "/v1/responses",
			`{"model":"gpt-5","store":false,"include":["reasoning.encrypted_content"],"input":"Clean the repo."}`,
			responsesSignedTurn, []string{"output.0"}, "output", "function_call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, answer{json: tc.answer})
			base := startAllRoutesProxy(t, up.URL, config.Default().RegistrationInline)
			status, got := postWithheld(t, base+tc.route+tc.path, tc.request)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, got)
			}
			for _, p := range tc.signed {
				if g, w := gjson.Get(got, p).Raw, gjson.Get(tc.answer, p).Raw; g != w {
					t.Errorf("%s: client got %s, upstream sent %s", p, g, w)
				}
			}
			var calls []string
			afterSigned := true
			gjson.Get(got, tc.itemsPath).ForEach(func(k, it gjson.Result) bool {
				if it.Get("type").String() == tc.kind {
					calls = append(calls, it.Get("name").String())
					afterSigned = afterSigned && int(k.Int()) >= len(tc.signed)
				}
				return true
			})
			if len(calls) != 1 || !afterSigned || strings.Contains(withoutRefusals(got), "rm -rf") {
				t.Errorf("calls kept %v (after the signed items: %v) in %s", calls, afterSigned, got)
			}

			direct := newUpstream(t, answer{json: tc.answer})
			if _, raw := postWithheld(t, direct.URL+tc.path, tc.request); !strings.Contains(raw, "rm -rf") {
				t.Error("control: the upstream's answer holds no destructive call")
			}
		})
	}
}
