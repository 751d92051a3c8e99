package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/policies"
)

// TestDeepToolArgumentsStillReachTheRules: one depth limit for tool arguments
// (jsontext.MaxInputNesting). Arguments nested up to it are read whole by the tools policy,
// so an array nested deep beside the command does not switch the rule off; arguments
// nested deeper are refused before any policy runs (502, or the in-stream error), never
// relayed. Controls: the upstream's own answer carries the call, the client's JSON parser
// reads the command at every depth tried, and a harmless command at the same depth passes.
func TestDeepToolArgumentsStillReachTheRules(t *testing.T) {
	pol, err := policies.NewTools(policies.ToolsConfig{Deny: []policies.ToolRule{
		{Tool: "Bash", Argument: "command", Pattern: `rm\s+-rf`, Reason: "No recursive deletes."},
	}})
	if err != nil {
		t.Fatal(err)
	}
	args := func(command string, depth int) string { // depth counts the object too
		return `{"command":` + jsonString(command) + `,"pad":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	for _, depth := range []int{600, jsontext.MaxInputNesting, jsontext.MaxInputNesting + 1} {
		tooDeep := depth > jsontext.MaxInputNesting
		var client map[string]any
		if err := json.Unmarshal([]byte(args("rm -rf /", depth)), &client); err != nil || client["command"] != "rm -rf /" {
			t.Fatalf("control: the client does not read the command at depth %d: %v", depth, err)
		}
		for _, stream := range []bool{false, true} {
			for _, command := range []string{"rm -rf /", "ls"} {
				a := args(command, depth)
				req := chatStreamReq
				var up *fakeUpstream
				if stream {
					up = newUpstream(t, sseResponder(chatTextThenCall("ok", a)...))
				} else {
					req = strings.Replace(chatStreamReq, `"stream":true,`, "", 1)
					up = newUpstream(t, jsonResponder(200, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`+
						`{"id":"call_a","type":"function","function":{"name":"Bash","arguments":`+jsonString(a)+`}}]},"finish_reason":"tool_calls"}]}`))
				}
				// Control: the upstream's own answer carries the call.
				_, h, direct := post(t, up.URL+"/v1/chat/completions", req, nil)
				if m := decodeChat(t, h, direct); len(m.ToolCalls) != 1 || !strings.Contains(m.ToolCalls[0].Function.Arguments, command) {
					t.Fatalf("control: the upstream's answer has no Bash call")
				}
				px := startProxy(t, testConfig(up.URL), newTestChainWith(t, pol, intercept("tool.before")), Options{})
				status, _, got := post(t, px.URL+chatPath, req, nil)
				s := string(got)
				reached := strings.Contains(s, `"name":"Bash"`)
				switch {
				case tooDeep && stream && (reached || !strings.Contains(lastEvent(s), "hookproxy.stream_failed")):
					t.Errorf("depth %d, streamed %q: not refused in the stream: %d %.200s", depth, command, status, lastEvent(s))
				case tooDeep && !stream && (reached || status != 502):
					t.Errorf("depth %d %q: not refused: %d %.200s", depth, command, status, s)
				case !tooDeep && command == "ls" && (!reached || status != 200):
					t.Errorf("control: depth %d stream=%v, a harmless call did not arrive: %d", depth, stream, status)
				case !tooDeep && command != "ls" && (reached || status != 200):
					t.Errorf("depth %d stream=%v: the denied call reached the client: %d", depth, stream, status)
				}
			}
		}
	}
}
