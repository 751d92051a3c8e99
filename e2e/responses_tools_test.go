package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// Codex's tools through the Responses API — custom (freeform) tool calls such as
// apply_patch, local_shell_call, shell_call, apply_patch_call — reach tool.before and
// tool.after like function calls, through the real proxy and chain.

// codexResponse asks, in one response, for: a custom apply_patch that deletes a file, a
// local shell rm -rf / (argv), a custom exec tool running rm -rf / as freeform input, a
// harmless local shell ls, a shell call (commands) running rm -rf ~, and an apply_patch
// call deleting a file.
const codexResponse = `{"id":"resp_codex1","object":"response","created_at":1760000000,"status":"completed","model":"gpt-5-codex","output":[` +
	`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Cleaning up.","annotations":[]}]},` +
	`{"id":"ctc_1","type":"custom_tool_call","status":"completed","call_id":"call_patch","name":"apply_patch","input":"*** Begin Patch\n*** Delete File: src/main.go\n*** End Patch\n"},` +
	`{"id":"lsh_1","type":"local_shell_call","status":"completed","call_id":"call_rm","action":{"type":"exec","command":["rm","-rf","/"],"env":{}}},` +
	`{"id":"ctc_2","type":"custom_tool_call","status":"completed","call_id":"call_exec","name":"exec","input":"rm -rf /"},` +
	`{"id":"lsh_2","type":"local_shell_call","status":"completed","call_id":"call_ls","action":{"type":"exec","command":["ls","-la"],"env":{}}},` +
	`{"id":"sh_1","type":"shell_call","status":"completed","call_id":"call_sh","action":{"commands":["cd /tmp","rm -rf ~"]},"environment":{"type":"local"}},` +
	`{"id":"apc_1","type":"apply_patch_call","status":"completed","call_id":"call_ap","operation":{"type":"delete_file","path":"go.mod"}}` +
	`],"usage":{"input_tokens":10,"output_tokens":40,"total_tokens":50}}`

func codexAnswer(t *testing.T) answer {
	t.Helper()
	var buf bytes.Buffer
	if err := responses.New().WriteStream(&buf, []byte(codexResponse)); err != nil {
		t.Fatal(err)
	}
	return answer{json: codexResponse, sse: []string{buf.String()}}
}

// postResponses sends body (stream set as asked) to the proxy's Responses route and returns
// the response object the client ends up with (assembled from the events when streamed).
func postResponses(t *testing.T, base, body string, stream bool) gjson.Result {
	t.Helper()
	if stream {
		body = strings.Replace(body, `{`, `{"stream":true,`, 1)
	}
	req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, base+"/openai/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+openaiKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, raw)
	}
	if !stream {
		return gjson.ParseBytes(raw)
	}
	asm := responses.New().NewAssembler()
	_, _ = asm.Write(raw)
	out, err := asm.Body()
	if err != nil {
		t.Fatalf("assemble: %v\n%s", err, raw)
	}
	return gjson.ParseBytes(out)
}

// callIDs lists the call ids of a response's output.
func callIDs(resp gjson.Result) []string {
	var ids []string
	for _, it := range resp.Get("output").Array() {
		if id := it.Get("call_id").String(); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

const codexPrompt = `{"model":"gpt-5-codex","input":[{"role":"user","content":"clean up the repo"}],"tools":[{"type":"custom","name":"apply_patch"},{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"},{"type":"custom","name":"exec"}]}`

// TestDefaultChainRemovesDestructiveResponsesToolItems: the embedded default chain's
// destructive-command list removes the local shell rm -rf / (argv), the custom exec tool's
// freeform rm -rf / and the shell call's rm -rf ~, JSON and streamed; the harmless calls
// stay. The built-in list has no rule for file deletions by apply_patch, so those stay
// here (an explicit rule removes them: TestToolsRuleRemovesApplyPatchDeletion).
func TestDefaultChainRemovesDestructiveResponsesToolItems(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newUpstream(t, codexAnswer(t))
			base := startDefaultProxy(t, up)
			resp := postResponses(t, base, codexPrompt, stream)
			if got, want := strings.Join(callIDs(resp), " "), "call_patch call_ls call_ap"; got != want {
				t.Fatalf("client got calls %q, want %q\n%s", got, want, resp.Raw)
			}
			out := resp.Get("output").Raw
			mustNotContain(t, "client response", withoutRefusals(out), `"rm -rf /"`, `["rm","-rf","/"]`, "rm -rf ~")
			mustContain(t, "client response", out, "blocked by policy", `["ls","-la"]`, "*** Delete File: src/main.go")
		})
	}
}

// TestToolsRuleRemovesApplyPatchDeletion: a tools rule over the canonical input removes
// Codex's apply_patch deletions — the custom tool's freeform patch ("*** Delete File") and
// the apply_patch call's delete_file operation — JSON and streamed.
func TestToolsRuleRemovesApplyPatchDeletion(t *testing.T) {
	tools := hookEntry("com.example.e2e.tools", map[string]any{"type": "in_process", "policy": "tools", "config": map[string]any{
		"deny": []map[string]any{
			{"name": "no_patch_deletes", "tool": "apply_patch", "inputPattern": `\*\*\* Delete File:|"type":"delete_file"`, "reason": "Deleting files is not allowed."},
		},
	}}, subscription{events: []string{"tool.before"}})
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newUpstream(t, codexAnswer(t))
			base := startInlineProxy(t, up.URL, registrationDoc(t, tools))
			resp := postResponses(t, base, codexPrompt, stream)
			if got, want := strings.Join(callIDs(resp), " "), "call_rm call_exec call_ls call_sh"; got != want {
				t.Fatalf("client got calls %q, want %q\n%s", got, want, resp.Raw)
			}
			mustNotContain(t, "client response", resp.Get("output").Raw, "Delete File", "delete_file")
			mustContain(t, "client response", resp.Get("output").Raw, "Deleting files is not allowed.")
		})
	}
}

// TestDefaultChainRedactsSecretsInResponsesToolHistory: credentials inside a custom tool
// call's freeform input, its output, and a shell call's output, sent back in the history
// Codex keeps, reach the upstream redacted (tool.after for the new results,
// model.request.before for the whole list), every item keeping its native type and fields.
func TestDefaultChainRedactsSecretsInResponsesToolHistory(t *testing.T) {
	body := `{"model":"gpt-5-codex","input":[` +
		`{"role":"user","content":"rotate the deploy key"},` +
		`{"type":"custom_tool_call","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** Update File: deploy.sh\n-KEY=` + defaultAWSKey + `\n+KEY=$KEY\n*** End Patch\n"},` +
		`{"type":"custom_tool_call_output","call_id":"call_p","output":"Success. Old key ` + defaultAWSKey + ` removed."},` +
		`{"type":"shell_call","call_id":"call_s","action":{"commands":["git push"]},"environment":{"type":"local"}},` +
		`{"type":"shell_call_output","call_id":"call_s","output":[{"stdout":"","stderr":"remote: token ` + defaultGitHubPAT + ` expired","outcome":{"type":"exit","exit_code":1}}]}` +
		`]}`
	up := newUpstream(t, answer{json: `{"id":"resp_r","object":"response","created_at":1,"status":"completed","model":"gpt-5-codex","output":[]}`})
	base := startDefaultProxy(t, up)
	postResponses(t, base, body, false)
	sent := up.only(t).Body
	mustNotContain(t, "upstream body", string(sent), defaultAWSKey, defaultGitHubPAT)
	mustContain(t, "upstream body", string(sent), "[REDACTED:aws_access_key_id:", "[REDACTED:github_token:")
	in := gjson.GetBytes(sent, "input").Array()
	if len(in) != 5 || in[1].Get("type").String() != "custom_tool_call" || !strings.Contains(in[1].Get("input").String(), "*** Update File: deploy.sh\n-KEY=[REDACTED:") ||
		in[2].Get("type").String() != "custom_tool_call_output" || !strings.HasPrefix(in[2].Get("output").String(), "Success. Old key [REDACTED:") ||
		in[4].Get("output.0.outcome.exit_code").Int() != 1 || !strings.HasPrefix(in[4].Get("output.0.stderr").String(), "remote: token [REDACTED:") ||
		in[3].Raw != `{"type":"shell_call","call_id":"call_s","action":{"commands":["git push"]},"environment":{"type":"local"}}` {
		t.Errorf("upstream input:\n%s", gjson.GetBytes(sent, "input").Raw)
	}
}

// TestResponsesToolItemEvents: what a backend subscribed to tool.before and tool.after
// receives for Codex's tool items — one tool.after per new result in the request (the
// custom apply_patch call's output and the shell call's output, joined with their calls),
// one tool.before per call in the response, each a valid AHP event with the canonical tool
// name and input.
func TestResponsesToolItemEvents(t *testing.T) {
	body := `{"model":"gpt-5-codex","input":[` +
		`{"role":"user","content":"go"},` +
		`{"type":"custom_tool_call","call_id":"call_p0","name":"apply_patch","input":"*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"},` +
		`{"type":"custom_tool_call_output","call_id":"call_p0","output":"Success."},` +
		`{"type":"shell_call","call_id":"call_s0","action":{"commands":["make"]},"environment":{"type":"local"}},` +
		`{"type":"shell_call_output","call_id":"call_s0","output":[{"stdout":"ok\n","stderr":"","outcome":{"type":"exit","exit_code":0}}]}` +
		`]}`
	hook, b := newBackend(t, viaHTTP, "none", "tool.before", "tool.after")
	up := newUpstream(t, codexAnswer(t))
	base := startProxy(t, up, hook)
	postResponses(t, base, body, false)
	frames := assertFrames(t, b, openaiKey)
	var got []string
	for _, f := range frames {
		ev := gjson.GetBytes(f, "params.event")
		got = append(got, ev.Get("type").String()+" "+ev.Get("call.id").String()+" "+ev.Get("tool.name").String()+" "+ev.Get("tool.input").Raw)
		if ev.Get("type").String() == "tool.after" && ev.Get("items.0.role").String() != "tool" {
			t.Errorf("tool.after items: %s", ev.Get("items").Raw)
		}
	}
	want := []string{
		`tool.after call_p0 apply_patch {"input":"*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"}`,
		`tool.after call_s0 shell {"command":"make","commands":["make"]}`,
		`tool.before call_patch apply_patch {"input":"*** Begin Patch\n*** Delete File: src/main.go\n*** End Patch\n"}`,
		`tool.before call_rm local_shell {"command":"rm -rf /","argv":["rm","-rf","/"],"env":{}}`,
		`tool.before call_exec exec {"input":"rm -rf /"}`,
		`tool.before call_ls local_shell {"command":"ls -la","argv":["ls","-la"],"env":{}}`,
		`tool.before call_sh shell {"command":"cd /tmp\nrm -rf ~","commands":["cd /tmp","rm -rf ~"]}`,
		`tool.before call_ap apply_patch {"type":"delete_file","path":"go.mod"}`,
	}
	for i := range want {
		want[i] = strings.ReplaceAll(want[i], "\n", `\n`)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ev := gjson.GetBytes(frames[0], "params.event"); ev.Get("items.0.parts.0.text").String() != "Success." || ev.Get("outcome").String() != "ok" {
		t.Errorf("tool.after of the custom call: %s", ev.Raw)
	}
}

// TestDefaultChainRedactsSecretsInMCPCallOutput: an mcp_call input item (a remote MCP call
// the provider ran, sent back in the history) carries the tool's output and error; both
// are tool results to the chain, so the default secrets policy redacts them before the
// upstream sees them, and the item keeps its type and every other field. The control
// sends the same body straight to the recording upstream, which receives the credentials.
func TestDefaultChainRedactsSecretsInMCPCallOutput(t *testing.T) {
	item := `{"type":"mcp_call","id":"mcp_1","server_label":"vault","name":"read_secret","arguments":"{\"path\":\"deploy\"}",` +
		`"output":"key ` + defaultAWSKey + `","error":null,"status":"completed"},` +
		`{"type":"mcp_call","id":"mcp_2","server_label":"vault","name":"push","arguments":"{}","output":null,"error":"token ` + defaultGitHubPAT + ` expired","status":"failed"}`
	body := `{"model":"gpt-5","input":[{"role":"user","content":"read the deploy key"},` + item + `,` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]},{"role":"user","content":"thanks"}]}`
	up := newUpstream(t, answer{json: `{"id":"resp_r","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[]}`})

	direct, err := http.Post(up.URL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	direct.Body.Close()
	mustContain(t, "control: upstream body", string(up.only(t).Body), defaultAWSKey, defaultGitHubPAT)

	base := startDefaultProxy(t, up)
	postResponses(t, base, body, false)
	reqs := up.requests()
	sent := reqs[len(reqs)-1].Body
	mustNotContain(t, "upstream body", string(sent), defaultAWSKey, defaultGitHubPAT)
	got, failed := gjson.GetBytes(sent, "input.1"), gjson.GetBytes(sent, "input.2")
	if got.Get("type").String() != "mcp_call" || got.Get("id").String() != "mcp_1" || got.Get("name").String() != "read_secret" ||
		got.Get("arguments").String() != `{"path":"deploy"}` || got.Get("status").String() != "completed" ||
		!strings.HasPrefix(got.Get("output").String(), "key [REDACTED:aws_access_key_id:") || got.Get("error").Type != gjson.Null {
		t.Errorf("upstream mcp_call item: %s", got.Raw)
	}
	if failed.Get("id").String() != "mcp_2" || failed.Get("output").Type != gjson.Null || failed.Get("status").String() != "failed" ||
		!strings.HasPrefix(failed.Get("error").String(), "token [REDACTED:github_token:") {
		t.Errorf("upstream failed mcp_call item: %s", failed.Raw)
	}
}
