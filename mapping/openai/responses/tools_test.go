package responses

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// Fixtures: a Codex-style request whose history holds every client-run tool
// item with its output (credentials inside some), and a response with every call type, a
// shell call run in a provider container and two hosted tool calls.
var (
	toolItemsRequest  = fixture("requests/tool_items_request.json")
	toolItemsResponse = fixture("responses/tool_items_response.json")
	customToolStream  = fixture("responses/custom_tool_stream.sse")
)

const (
	awsKey    = "AKIAW4162OR5EL2XEMIE"                     // made up, real format
	githubPAT = "ghp_Vj5T3JeO5VGC2ZGwZcDTeBewmjfUM7bFkIsz" // made up, real format
)

func TestDecodeRequestToolItems(t *testing.T) {
	req := mustDecode(t, toolItemsRequest)
	type msg struct {
		role, id string
		parts    []partSummary
	}
	png := partSummary{Kind: "attachment", MediaType: "image/png", Selection: "metadata", HasSize: true}
	want := []msg{
		{role: "system", parts: []partSummary{text("You are Codex.")}},
		{role: "user", parts: []partSummary{text("Fix the build and deploy.")}},
		// Every call joins the assistant message of the reasoning before them, across the
		// outputs, in native order.
		{role: "assistant", id: "rs_1", parts: []partSummary{
			encrypted,
			toolCall(`{"id":"call_patch","name":"apply_patch","input":{"input":"*** Begin Patch\n*** Update File: deploy.sh\n@@\n-export AWS_ACCESS_KEY_ID=` + awsKey + `\n+export AWS_ACCESS_KEY_ID=$KEY\n*** End Patch\n"}}`),
			toolCall(`{"id":"call_ls","name":"local_shell","input":{"command":"bash -lc 'cat ~/.aws/credentials'","argv":["bash","-lc","cat ~/.aws/credentials"],"env":{"CI":"1"},"working_directory":"/repo","timeout_ms":10000,"user":null}}`),
			toolCall(`{"id":"call_sh","name":"shell","input":{"command":"make build\nmake test","commands":["make build","make test"],"timeout_ms":60000,"max_output_length":4096}}`),
			toolCall(`{"id":"call_ap","name":"apply_patch","input":{"type":"delete_file","path":"old.txt"}}`),
			toolCall(`{"id":"call_cu","name":"computer","input":{"action":{"type":"click","button":"left","x":10,"y":20}}}`),
		}},
		{role: "tool", id: "call_patch", parts: []partSummary{catText("tool_result", "Success. Updated the following files:\nM deploy.sh\nold key "+awsKey+" removed")}},
		{role: "tool", id: "call_ls", parts: []partSummary{catText("tool_result", `{"output":"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n","metadata":{"exit_code":0}}`)}},
		{role: "tool", id: "call_sh", parts: []partSummary{catText("tool_result", "built\nok\nwarning: token "+githubPAT)}},
		{role: "tool", id: "call_ap", parts: []partSummary{catText("tool_result", "old.txt: no such file")}},
		{role: "tool", id: "call_cu", parts: []partSummary{png}},
		{role: "user", parts: []partSummary{text("Now deploy.")}},
	}
	if len(req.Items) != len(want) {
		t.Fatalf("got %d messages, want %d", len(req.Items), len(want))
	}
	for i, w := range want {
		m := req.Items[i]
		if m.Role != w.role || w.id != "" && m.ID != w.id {
			t.Errorf("message %d: id %q role %q, want id %q role %q", i, m.ID, m.Role, w.id, w.role)
		}
		// The tool_call texts are compared as they decode: JSON escapes aside.
		got := summarize(m.Parts)
		for j := range got {
			if got[j].Category == "tool_call" {
				var v any
				_ = json.Unmarshal([]byte(got[j].Text), &v)
				b, _ := json.Marshal(v)
				got[j].Text = string(b)
				var u any
				if err := json.Unmarshal([]byte(strings.ReplaceAll(w.parts[j].Text, "\n", `\n`)), &u); err != nil {
					t.Fatalf("bad expectation %d.%d: %v", i, j, err)
				}
				b, _ = json.Marshal(u)
				w.parts[j].Text = string(b)
			}
		}
		if !reflect.DeepEqual(got, w.parts) {
			t.Errorf("message %d parts:\n got %+v\nwant %+v", i, got, w.parts)
		}
	}
	// Only the hosted tool call is outside the canonical view.
	wantGaps := []ahp.Gap{{Path: "items", Reason: `input[12]: item type "web_search_call" not represented`}}
	if !reflect.DeepEqual(req.Gaps, wantGaps) {
		t.Errorf("gaps %+v, want %+v", req.Gaps, wantGaps)
	}
	type result struct {
		call, tool string
		item       int
		isError    bool
	}
	var got []result
	for _, r := range req.ToolResults {
		if !r.CallFound || !json.Valid(r.Input) {
			t.Errorf("tool result %+v: call not found", r)
		}
		got = append(got, result{r.CallID, r.ToolName, r.ItemIndex, r.IsError})
	}
	wantResults := []result{{"call_patch", "apply_patch", 3, false}, {"call_ls", "local_shell", 4, false},
		{"call_sh", "shell", 5, false}, {"call_ap", "apply_patch", 6, true}, {"call_cu", "computer", 7, false}}
	if !reflect.DeepEqual(got, wantResults) {
		t.Errorf("tool results %+v, want %+v", got, wantResults)
	}
	if req.PromptStart != 8 {
		t.Errorf("prompt start %d", req.PromptStart)
	}
	// Unchanged, the body goes out as it came.
	out, err := New().EncodeRequest(req, cloneItems(req.Items))
	if err != nil || string(out) != toolItemsRequest {
		t.Errorf("unchanged items must give the original bytes: err %v", err)
	}
}

// callPart returns a copy of items with the tool_call part at msg, part given input.
func callPart(t *testing.T, items []ahp.Message, msg, part int, input string) []ahp.Message {
	t.Helper()
	out := cloneItems(items)
	c, ok := mapping.ParseToolCall(&out[msg].Parts[part])
	if !ok {
		t.Fatalf("part %d.%d is not a tool call", msg, part)
	}
	out[msg].Parts[part] = mapping.ToolCallPart(out[msg].Parts[part].ID, mapping.ToolCall{ID: c.ID, Name: c.Name, Input: json.RawMessage(input)})
	return out
}

// redact replaces s in the text of every part (the tool_call texts as JSON strings).
func redact(items []ahp.Message, s, with string) []ahp.Message {
	out := cloneItems(items)
	for i := range out {
		for j := range out[i].Parts {
			p := &out[i].Parts[j]
			if p.Text != nil && strings.Contains(*p.Text, s) {
				r := strings.ReplaceAll(*p.Text, s, with)
				p.Text = &r
			}
		}
	}
	return out
}

func TestEncodeRequestToolItems(t *testing.T) {
	req := mustDecode(t, toolItemsRequest)
	orig := gjson.Parse(toolItemsRequest)
	input := func(i int) string { return orig.Get("input." + strconv.Itoa(i)).Raw }
	tests := []struct {
		desc    string
		edit    func([]ahp.Message) []ahp.Message
		changed []int // input items that may differ; every other stays byte for byte
		check   func(t *testing.T, in gjson.Result)
	}{
		{
			// What the secrets policy does at model.request.before: the key is visible in
			// the custom call's freeform input and in its output, and the redaction of both
			// goes back onto the native items.
			desc:    "secret redacted in a custom tool call and its output",
			edit:    func(in []ahp.Message) []ahp.Message { return redact(in, awsKey, "[REDACTED:aws_access_key_id]") },
			changed: []int{2, 3},
			check: func(t *testing.T, in gjson.Result) {
				c, o := in.Get("2"), in.Get("3")
				if !strings.Contains(c.Get("input").String(), "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\n") ||
					c.Get("name").String() != "apply_patch" || c.Get("call_id").String() != "call_patch" || c.Get("id").String() != "ctc_1" {
					t.Errorf("call: %s", c.Raw)
				}
				if o.Get("output").String() != "Success. Updated the following files:\nM deploy.sh\nold key [REDACTED:aws_access_key_id] removed" ||
					o.Get("x_extra").Raw != `{"kept": true}` {
					t.Errorf("output: %s", o.Raw)
				}
				if strings.Contains(in.Raw, awsKey) {
					t.Errorf("the key is still in the body")
				}
			},
		},
		{
			desc:    "secret redacted in shell output: the stream that held it",
			edit:    func(in []ahp.Message) []ahp.Message { return redact(in, githubPAT, "[REDACTED]") },
			changed: []int{7},
			check: func(t *testing.T, in gjson.Result) {
				o := in.Get("7.output")
				if o.Get("0.stdout").String() != "built\nok\nwarning: token [REDACTED]" || o.Get("1.stderr").String() != "" ||
					o.Get("1.stdout").String() != "" || o.Get("1.outcome.exit_code").Int() != 1 || o.Get("0.outcome").Raw != `{"type": "exit", "exit_code": 0}` {
					t.Errorf("shell output: %s", o.Raw)
				}
			},
		},
		{
			desc:    "local shell output rewritten",
			edit:    func(in []ahp.Message) []ahp.Message { return setText(in, 4, 0, "(withheld)") },
			changed: []int{5},
			check: func(t *testing.T, in gjson.Result) {
				if in.Get("5.output").String() != "(withheld)" || in.Get("5.id").String() != "call_ls" {
					t.Errorf("output: %s", in.Get("5").Raw)
				}
			},
		},
		{
			desc:    "apply_patch output rewritten",
			edit:    func(in []ahp.Message) []ahp.Message { return setText(in, 6, 0, "failed") },
			changed: []int{9},
			check: func(t *testing.T, in gjson.Result) {
				if in.Get("9.output").String() != "failed" || in.Get("9.status").String() != "failed" {
					t.Errorf("output: %s", in.Get("9").Raw)
				}
			},
		},
		{
			desc: "custom tool input modified",
			edit: func(in []ahp.Message) []ahp.Message {
				return callPart(t, in, 2, 1, `{"input":"*** Begin Patch\n*** Add File: x\n+y\n*** End Patch\n"}`)
			},
			changed: []int{2},
			check: func(t *testing.T, in gjson.Result) {
				if in.Get("2.input").String() != "*** Begin Patch\n*** Add File: x\n+y\n*** End Patch\n" || in.Get("2.status").String() != "completed" {
					t.Errorf("call: %s", in.Get("2").Raw)
				}
			},
		},
		{
			desc: "local shell command line modified: argv split from it, other action members kept",
			edit: func(in []ahp.Message) []ahp.Message {
				return callPart(t, in, 2, 2, `{"command":"bash -lc 'echo \"no creds\"'","argv":["bash","-lc","cat ~/.aws/credentials"],"env":{"CI":"1"},"working_directory":"/repo","timeout_ms":10000,"user":null}`)
			},
			changed: []int{4},
			check: func(t *testing.T, in gjson.Result) {
				a := in.Get("4.action")
				if a.Get("command").Raw != `["bash","-lc","echo \"no creds\""]` || a.Get("env").Raw != `{"CI": "1"}` || a.Get("type").String() != "exec" ||
					a.Get("timeout_ms").Int() != 10000 || !a.Get("user").Exists() {
					t.Errorf("action: %s", a.Raw)
				}
			},
		},
		{
			desc: "local shell argv and members modified",
			edit: func(in []ahp.Message) []ahp.Message {
				return callPart(t, in, 2, 2, `{"argv":["ls"],"working_directory":"/tmp","x_new":1}`)
			},
			changed: []int{4},
			check: func(t *testing.T, in gjson.Result) {
				a := in.Get("4.action")
				if a.Get("command").Raw != `["ls"]` || a.Get("working_directory").String() != "/tmp" || a.Get("x_new").Int() != 1 ||
					a.Get("env").Exists() || a.Get("timeout_ms").Exists() || a.Get("type").String() != "exec" {
					t.Errorf("action: %s", a.Raw)
				}
			},
		},
		{
			desc: "shell command text modified: one command",
			edit: func(in []ahp.Message) []ahp.Message {
				return callPart(t, in, 2, 3, `{"command":"make build","commands":["make build","make test"],"timeout_ms":60000,"max_output_length":4096}`)
			},
			changed: []int{6},
			check: func(t *testing.T, in gjson.Result) {
				a := in.Get("6.action")
				if a.Get("commands").Raw != `["make build"]` || a.Get("timeout_ms").Int() != 60000 || in.Get("6.environment").Raw != `{"type": "local"}` {
					t.Errorf("action: %s", a.Raw)
				}
			},
		},
		{
			desc: "apply_patch operation modified",
			edit: func(in []ahp.Message) []ahp.Message {
				return callPart(t, in, 2, 4, `{"type":"delete_file","path":"tmp/old.txt"}`)
			},
			changed: []int{8},
			check: func(t *testing.T, in gjson.Result) {
				if in.Get("8.operation").Raw != `{"type":"delete_file","path":"tmp/old.txt"}` || in.Get("8.id").String() != "apc_1" {
					t.Errorf("call: %s", in.Get("8").Raw)
				}
			},
		},
		{
			desc:    "computer action modified",
			edit:    func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 5, `{"action":{"type":"wait"}}`) },
			changed: []int{10},
			check: func(t *testing.T, in gjson.Result) {
				if in.Get("10.action").Raw != `{"type":"wait"}` || in.Get("10.pending_safety_checks").Raw != "[]" {
					t.Errorf("call: %s", in.Get("10").Raw)
				}
			},
		},
		{
			desc: "a call and its output removed",
			edit: func(in []ahp.Message) []ahp.Message {
				m := cloneItems(in)
				m[2].Parts = append(m[2].Parts[:2:2], m[2].Parts[3:]...) // local shell call
				return append(m[:4:4], m[5:]...)
			},
			check: func(t *testing.T, in gjson.Result) {
				if len(in.Array()) != 12 || strings.Contains(in.Raw, "local_shell") {
					t.Errorf("input: %s", in.Raw)
				}
				for i, it := range in.Array() {
					k := i
					if i >= 4 {
						k = i + 2
					}
					if it.Raw != input(k) {
						t.Errorf("item %d changed: %s", i, it.Raw)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := New().EncodeRequest(req, tc.edit(req.Items))
			if err != nil {
				t.Fatal(err)
			}
			in := gjson.GetBytes(out, "input")
			tc.check(t, in)
			if tc.changed != nil {
				for i, it := range in.Array() {
					if it.Raw != input(i) && !contains(tc.changed, i) {
						t.Errorf("item %d changed:\n%s\nwas\n%s", i, it.Raw, input(i))
					}
				}
			}
			if _, err := New().DecodeRequest(out); err != nil {
				t.Errorf("the edited body does not decode: %v", err)
			}
		})
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestEncodeRequestToolItemErrors(t *testing.T) {
	req := mustDecode(t, toolItemsRequest)
	tests := []struct {
		desc string
		edit func([]ahp.Message) []ahp.Message
		want string
	}{
		{"custom input without a string", func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 1, `{"patch":"x"}`) }, `needs input {"input": string}`},
		{"local shell renamed", func(in []ahp.Message) []ahp.Message {
			return setText(in, 2, 2, `{"id":"call_ls","name":"bash","input":{"command":"ls"}}`)
		}, "cannot be renamed"},
		{"unterminated quote", func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 2, `{"command":"echo 'x"}`) }, "unterminated single quote"},
		{"argv not strings", func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 2, `{"argv":[1]}`) }, "array of strings"},
		{"shell input without a command", func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 3, `{"timeout_ms":1}`) }, "needs command"},
		{"apply_patch without a type", func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 4, `{"path":"x"}`) }, "needs a type"},
		{"computer input with other members", func(in []ahp.Message) []ahp.Message { return callPart(t, in, 2, 5, `{"cmd":"x"}`) }, "action and actions only"},
		{"screenshot with text", func(in []ahp.Message) []ahp.Message {
			m := cloneItems(in)
			m[7].Parts = append(m[7].Parts, textPart("x.p9", "described", ahp.CategoryToolResult))
			return m
		}, "screenshot and current_url only"},
		{"screenshot removed", func(in []ahp.Message) []ahp.Message {
			m := cloneItems(in)
			m[7].Parts = []ahp.Part{textPart(m[7].ID+".p0", "", ahp.CategoryToolResult)}
			return m
		}, "cannot lose its screenshot"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New().EncodeRequest(req, tc.edit(req.Items))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	// What the proxy makes of a rewritten screenshot result — an empty text part beside the
	// screenshot — renders as the original item.
	m := cloneItems(req.Items)
	m[7].Parts = append([]ahp.Part{textPart(m[7].ID+".0", "", ahp.CategoryToolResult)}, m[7].Parts...)
	out, err := New().EncodeRequest(req, m)
	if err != nil || gjson.GetBytes(out, "input.11").Raw != gjson.Get(toolItemsRequest, "input.11").Raw {
		t.Errorf("err %v\n%s", err, out)
	}
}

func TestDecodeResponseToolItems(t *testing.T) {
	resp := mustDecodeResponse(t, toolItemsResponse)
	want := []partSummary{
		catText("reasoning", "Clean up."),
		text("Cleaning up."),
		toolCall(`{"id":"call_p","name":"apply_patch","input":{"input":"*** Begin Patch\n*** Delete File: src/main.go\n*** End Patch\n"}}`),
		toolCall(`{"id":"call_l","name":"local_shell","input":{"command":"rm -rf /","argv":["rm","-rf","/"],"env":{},"working_directory":null,"timeout_ms":null,"user":null}}`),
		toolCall(`{"id":"call_s","name":"shell","input":{"command":"ls -la\ngit status","commands":["ls -la","git status"],"timeout_ms":null,"max_output_length":null}}`),
		toolCall(`{"id":"call_a","name":"apply_patch","input":{"type":"update_file","path":"README.md","diff":"@@\n-old\n+new\n"}}`),
		toolCall(`{"id":"call_c","name":"computer","input":{"action":{"type":"type","text":"hello"}}}`),
	}
	for i := range want {
		want[i].Text = strings.ReplaceAll(want[i].Text, "\n", `\n`)
	}
	want[0].Text, want[1].Text = "Clean up.", "Cleaning up."
	if got := summarize(resp.Items[0].Parts); !reflect.DeepEqual(got, want) {
		t.Errorf("parts:\n got %+v\nwant %+v", got, want)
	}
	out, err := New().EncodeResponse(resp, cloneItems(resp.Items), "")
	if err != nil || string(out) != toolItemsResponse {
		t.Errorf("unchanged: err %v", err)
	}
}

func TestEncodeResponseToolItems(t *testing.T) {
	resp := mustDecodeResponse(t, toolItemsResponse)
	orig := gjson.Parse(toolItemsResponse).Get("output").Array()
	drop := func(parts ...int) func([]ahp.Message) []ahp.Message {
		return func(in []ahp.Message) []ahp.Message {
			m := cloneItems(in)
			var kept []ahp.Part
			for j, p := range m[0].Parts {
				if !contains(parts, j) {
					kept = append(kept, p)
				}
			}
			m[0].Parts = kept
			return m
		}
	}
	tests := []struct {
		desc  string
		edit  func([]ahp.Message) []ahp.Message
		want  []int // the original output items that stay byte for byte, in order
		check func(gjson.Result) bool
	}{
		{desc: "denied apply_patch custom call and rm -rf local shell call removed", edit: drop(2, 3),
			want: []int{0, 1, 4, 5, 6, 7, 8, 9, 10}},
		{desc: "every call removed: hosted items stay", edit: drop(2, 3, 4, 5, 6),
			want: []int{0, 1, 5, 6, 9, 10}},
		{desc: "custom input modified", edit: func(in []ahp.Message) []ahp.Message {
			return callPart(t, in, 0, 2, `{"input":"*** Begin Patch\n*** Update File: src/main.go\n*** End Patch\n"}`)
		}, want: []int{0, 1, -1, 3, 4, 5, 6, 7, 8, 9, 10}, check: func(o gjson.Result) bool {
			return o.Get("2.input").String() == "*** Begin Patch\n*** Update File: src/main.go\n*** End Patch\n" && o.Get("2.id").String() == "ctc_7"
		}},
		{desc: "local shell argv modified", edit: func(in []ahp.Message) []ahp.Message {
			return callPart(t, in, 0, 3, `{"command":"rm -rf ./build","argv":["rm","-rf","/"],"env":{},"working_directory":null,"timeout_ms":null,"user":null}`)
		}, want: []int{0, 1, 2, -1, 4, 5, 6, 7, 8, 9, 10}, check: func(o gjson.Result) bool {
			return o.Get("3.action.command").Raw == `["rm","-rf","./build"]` && o.Get("3.action.type").String() == "exec"
		}},
		{desc: "shell commands modified", edit: func(in []ahp.Message) []ahp.Message {
			return callPart(t, in, 0, 4, `{"commands":["ls"],"timeout_ms":5000,"max_output_length":null}`)
		}, want: []int{0, 1, 2, 3, -1, 5, 6, 7, 8, 9, 10}, check: func(o gjson.Result) bool {
			return o.Get("4.action").Raw == `{"commands": ["ls"], "timeout_ms": 5000, "max_output_length": null}` && o.Get("4.created_by").String() == "x"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := New().EncodeResponse(resp, tc.edit(resp.Items), "")
			if err != nil {
				t.Fatal(err)
			}
			got := gjson.GetBytes(body, "output")
			arr := got.Array()
			if len(arr) != len(tc.want) {
				t.Fatalf("output: %s", got.Raw)
			}
			for i, k := range tc.want {
				if k >= 0 && arr[i].Raw != orig[k].Raw {
					t.Errorf("output %d is not original item %d: %s", i, k, arr[i].Raw)
				}
			}
			if tc.check != nil && !tc.check(got) {
				t.Errorf("output: %s", got.Raw)
			}
			if _, err := New().DecodeResponse(body); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestShellQuoting(t *testing.T) {
	for _, argv := range [][]string{
		{"rm", "-rf", "/"}, {"bash", "-lc", "rm -rf / && echo 'done'"}, {""}, {"a b", `c"d`, `e\f`, "g'h", "$HOME", "~", "*"},
		{"printf", "%s\n", "x"}, {"a=b", "--flag=1,2", "@x", "+y", "a:b/c.d"},
	} {
		b, _ := json.Marshal(argv)
		line := quoteArgv(gjson.ParseBytes(b))
		back, err := shellSplit(line)
		if err != nil || !reflect.DeepEqual(back, argv) {
			t.Errorf("%q -> %q -> %q, %v", argv, line, back, err)
		}
	}
	if got := quoteArgv(gjson.Parse(`["rm","-rf","/"]`)); got != "rm -rf /" {
		t.Errorf("plain words are not quoted: %q", got)
	}
	for in, want := range map[string][]string{
		`echo "a \"b\" \$c \x"`:   {"echo", `a "b" $c \x`},
		"a\\ b  c\td\ne":          {"a b", "c", "d", "e"},
		`''`:                      {""},
		`x'y'"z"`:                 {"xyz"},
		"line\\\ncontinued":       {"linecontinued"},
		`  `:                      nil,
		`echo \'`:                 {"echo", "'"},
		`"multi` + "\n" + `line"`: {"multi\nline"},
	} {
		if got, err := shellSplit(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("shellSplit(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`'x`, `"x`, `a "b\"`} {
		if _, err := shellSplit(bad); err == nil {
			t.Errorf("shellSplit(%q) must fail", bad)
		}
	}
}

func TestAssemblerCustomToolInput(t *testing.T) {
	// The terminal response without output: the custom tool's input is rebuilt from its
	// deltas, the local shell call from its done item.
	var evs []string
	for _, b := range blocks(customToolStream) {
		d := eventData(b)
		switch typ := gjson.Get(d, "type").String(); {
		case typ == "response.output_item.done" && gjson.Get(d, "item.type").String() == "custom_tool_call":
			continue
		case typ == "response.completed":
			d2, _ := sjson.Delete(d, "response.output")
			b = "event: response.completed\ndata: " + d2 + "\n\n"
		}
		evs = append(evs, b)
	}
	body, err := assemble(t, []byte(strings.Join(evs, "")), 5, 17)
	if err != nil {
		t.Fatal(err)
	}
	out := gjson.GetBytes(body, "output")
	if out.Get("0.input").String() != "*** Begin Patch\n*** Delete File: src/main.go\n*** End Patch\n" ||
		out.Get("0.type").String() != "custom_tool_call" || out.Get("1.action.command").Raw != `["rm","-rf","/"]` {
		t.Errorf("assembled output: %s", out.Raw)
	}
	resp := mustDecodeResponse(t, string(body))
	if calls := mapping.ToolCalls(resp.Items); len(calls) != 2 || calls[0].Name != "apply_patch" || calls[1].Name != "local_shell" {
		t.Errorf("calls %+v", calls)
	}
}

func TestWriteStreamToolItems(t *testing.T) {
	var buf bytes.Buffer
	if err := New().WriteStream(&buf, []byte(toolItemsResponse)); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, b := range blocks(buf.String()) {
		d := eventData(b)
		if gjson.Get(d, "output_index").Int() == 2 {
			types = append(types, gjson.Get(d, "type").String())
			if gjson.Get(d, "type").String() == "response.output_item.added" && gjson.Get(d, "item.input").String() != "" {
				t.Errorf("the custom call is announced with its input: %s", d)
			}
		}
	}
	want := []string{"response.output_item.added", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events of the custom call: %q", types)
	}
	body, err := assemble(t, buf.Bytes())
	if err != nil || !jsonEqual(t, body, []byte(toolItemsResponse)) {
		t.Errorf("err %v\n%s", err, body)
	}
}

func TestEditToolItems(t *testing.T) {
	tr := New()
	var buf bytes.Buffer
	if err := tr.WriteStream(&buf, []byte(toolItemsResponse)); err != nil {
		t.Fatal(err)
	}
	streams := map[string]struct {
		stream  []byte
		decided int // every client-run call; the shell call in a provider container is not one
	}{"rendered": {buf.Bytes(), 5}, "as the API streams a custom call": {[]byte(customToolStream), 2}}
	for name, tc := range streams {
		stream := tc.stream
		t.Run(name, func(t *testing.T) {
			d := &mappingtest.Decider{Script: mappingtest.Script{
				0: {Remove: true, Note: "Tool call apply_patch was blocked by policy"},
				1: {Remove: true, Note: "Tool call local_shell was blocked by policy"},
			}}
			out, err := mappingtest.Edit(tr, stream, 29, d)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Decided) != tc.decided || d.Decided[0].Name != "apply_patch" || d.Decided[1].Name != "local_shell" ||
				!strings.Contains(string(d.Decided[1].Input), `"command":"rm -rf /"`) {
				t.Fatalf("decided %+v", d.Decided)
			}
			checkSequence(t, string(out))
			if strings.Contains(string(out), "Delete File") || strings.Contains(string(out), `"rm"`) {
				t.Errorf("a removed call reached the client:\n%s", out)
			}
			body, err := mappingtest.Assembled(tr, out)
			if err != nil {
				t.Fatal(err)
			}
			resp := mustDecodeResponse(t, string(body))
			for _, c := range mapping.ToolCalls(resp.Items) {
				if c.ID == "call_p" || c.ID == "call_l" {
					t.Errorf("removed call %s in the final response", c.ID)
				}
			}
			if why, err := mappingtest.Equivalent(tr, stream, 7, d.Script); err != nil || why != "" {
				t.Errorf("not the held path's result: %v\n%s", err, why)
			}
		})
	}
	// modify(input) of the custom call, streamed: the client gets the rewritten input.
	script := mappingtest.Script{0: {Input: json.RawMessage(`{"input":"*** Begin Patch\n*** End Patch\n"}`)}}
	out, err := mappingtest.Edit(tr, []byte(customToolStream), 0, &mappingtest.Decider{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	body, err := mappingtest.Assembled(tr, out)
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(body, "output.0.input").String() != "*** Begin Patch\n*** End Patch\n" || strings.Contains(string(out), "Delete File") {
		t.Errorf("rewritten stream:\n%s", out)
	}
	if why, err := mappingtest.Equivalent(tr, []byte(customToolStream), 3, script); err != nil || why != "" {
		t.Errorf("not the held path's result: %v\n%s", err, why)
	}
}

func TestEditJudgesLateCalls(t *testing.T) {
	// A call the stream announced as something else (here a shell call said to run in a
	// provider container at output_item.added, on the client's machine at .done), or did
	// not announce at all, is judged before its done event goes out.
	body := `{"id":"resp_l","object":"response","created_at":1,"status":"completed","model":"m","output":[` +
		`{"id":"sh_1","type":"shell_call","status":"completed","call_id":"call_1","action":{"commands":["rm -rf /"]},"environment":{"type":"local"}},` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}]}`
	tr := New()
	var buf bytes.Buffer
	if err := tr.WriteStream(&buf, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var announced, unannounced []string
	for _, b := range blocks(buf.String()) {
		d := eventData(b)
		if gjson.Get(d, "type").String() == "response.output_item.added" && gjson.Get(d, "item.type").String() == "shell_call" {
			d2, _ := sjson.Set(d, "item.environment.type", "container_reference")
			announced = append(announced, "event: response.output_item.added\ndata: "+d2+"\n\n")
			continue
		}
		announced = append(announced, b)
		unannounced = append(unannounced, b)
	}
	for name, stream := range map[string]string{"announced as hosted": strings.Join(announced, ""), "not announced": strings.Join(unannounced, "")} {
		t.Run(name, func(t *testing.T) {
			for _, script := range []mappingtest.Script{{0: {Remove: true, Note: "blocked"}}, nil, {0: {Input: json.RawMessage(`{"command":"ls"}`)}}} {
				d := &mappingtest.Decider{Script: script}
				out, err := mappingtest.Edit(tr, []byte(stream), 13, d)
				if err != nil {
					t.Fatal(err)
				}
				if len(d.Decided) != 1 || d.Decided[0].Name != "shell" {
					t.Fatalf("decided %+v", d.Decided)
				}
				// What the client may run: the done events and the terminal response.
				var done []string
				for _, b := range blocks(string(out)) {
					if d := eventData(b); gjson.Get(d, "type").String() == "response.output_item.done" {
						done = append(done, gjson.Get(d, "item").Raw)
					} else if gjson.Get(d, "type").String() == "response.completed" {
						done = append(done, gjson.Get(d, "response.output").Raw)
					}
				}
				runs := strings.Contains(strings.Join(done, "\n"), `"commands":["rm -rf /"]},"environment":{"type":"local"}`)
				if want := script == nil; runs != want {
					t.Errorf("script %+v: the unjudged call reaches the client: %v\n%s", script, runs, out)
				}
				if why, err := mappingtest.Equivalent(tr, []byte(stream), 5, script); err != nil || why != "" {
					t.Errorf("not the held path's result: %v\n%s", err, why)
				}
				checkSequence(t, string(out))
			}
		})
	}
}
