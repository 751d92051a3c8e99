package responses

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

func TestDecodeRequestItemKinds(t *testing.T) {
	req := mustDecode(t, fullRequest)
	type msg struct {
		role        string
		id          string // "" = synthesized, checked for the m<hex> shape
		synthesized bool
		parts       []partSummary
	}
	png := partSummary{Kind: "attachment", MediaType: "image/png", Selection: "metadata", HasSize: true}
	want := []msg{
		{role: "system", synthesized: true, parts: []partSummary{text("You are a careful assistant.")}},
		{role: "developer", synthesized: true, parts: []partSummary{text("Prefer metric units.")}},
		{role: "user", synthesized: true, parts: []partSummary{
			text("What is the weather in Paris? See the photo."),
			png,
			{Kind: "attachment", MediaType: "image/jpeg", Selection: "body", Gap: gapRemoteURL},
			{Kind: "attachment", MediaType: "application/pdf", Selection: "body", Gap: gapProviderFile},
			text("# Notes"),
		}},
		// reasoning, message and both calls (the second after the first call's output) form
		// one assistant message with the first item's id.
		{role: "assistant", id: "rs_1", parts: []partSummary{
			catText("reasoning", "Need the weather."),
			encrypted,
			text("Checking."),
			toolCall(`{"id":"call_a","name":"get_weather","input":{"city":"Paris"}}`),
			toolCall(`{"id":"call_b","name":"run","input":{"cmd":"ls <dir>"}}`),
		}},
		{role: "tool", id: "call_a", parts: []partSummary{catText("tool_result", `{"temp":21}`)}},
		{role: "tool", id: "call_b", parts: []partSummary{catText("tool_result", "a.txt\n"), png}},
		{role: "assistant", synthesized: true, parts: []partSummary{text("It is 21°C.")}},
		{role: "user", synthesized: true, parts: []partSummary{text("Thanks! And tomorrow?")}},
	}
	if len(req.Items) != len(want) {
		t.Fatalf("got %d messages, want %d", len(req.Items), len(want))
	}
	for i, w := range want {
		m := req.Items[i]
		if m.Role != w.role || m.Synthesized != w.synthesized || w.id != "" && m.ID != w.id ||
			w.id == "" && (len(m.ID) != 17 || m.ID[0] != 'm') {
			t.Errorf("message %d: id %q role %q synthesized %v, want id %q role %q synthesized %v", i, m.ID, m.Role, m.Synthesized, w.id, w.role, w.synthesized)
		}
		if got := summarize(m.Parts); !reflect.DeepEqual(got, w.parts) {
			t.Errorf("message %d parts:\n got %+v\nwant %+v", i, got, w.parts)
		}
		for j, p := range m.Parts {
			if want := m.ID + ".p" + string(rune('0'+j)); p.ID != want {
				t.Errorf("message %d part %d id %q, want %q", i, j, p.ID, want)
			}
		}
	}
	wantGaps := []ahp.Gap{
		{Path: "items", Reason: `input[8]: item type "web_search_call" not represented`},
		{Path: "items", Reason: `input[9]: item type "item_reference" not represented`},
	}
	if !reflect.DeepEqual(req.Gaps, wantGaps) {
		t.Errorf("gaps %+v, want %+v", req.Gaps, wantGaps)
	}
	wantResults := []mapping.ToolResult{
		{CallID: "call_a", ItemIndex: 4, ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`), CallFound: true},
		{CallID: "call_b", ItemIndex: 5, ToolName: "run", Input: json.RawMessage(`{"cmd":"ls <dir>"}`), CallFound: true},
	}
	if !reflect.DeepEqual(req.ToolResults, wantResults) {
		t.Errorf("tool results %+v, want %+v", req.ToolResults, wantResults)
	}
	if req.PromptStart != 7 || req.SessionHint != "user-1" || req.Model != "gpt-5" || req.Stream {
		t.Errorf("prompt start %d, session %q, model %q, stream %v", req.PromptStart, req.SessionHint, req.Model, req.Stream)
	}
	params := gjson.ParseBytes(req.Params)
	if params.Get("instructions").Exists() || params.Get("x_unknown.kept.1").Raw != "2.50" {
		t.Errorf("params must hold everything but input and instructions, byte for byte: %s", req.Params)
	}
	// Of the input, only the remote URLs and file names are params, as the input residue
	// (mapping.ResidueMembers), one entry per item in order.
	if got := params.Get("input").Raw; got != `[{},{"content":[{},{},{"image_url":"https://example.com/cat.jpg"},{"filename":"report.pdf"},{"filename":"notes.md"}]},{},{},{},{},{},{},{},{},{},{}]` {
		t.Errorf("input residue = %s", got)
	}
}

func TestDecodeRequestShapes(t *testing.T) {
	tests := []struct {
		desc        string
		body        string
		roles       []string
		texts       []string // text of each message's first part
		promptStart int
		gaps        []string
		session     string
		stream      bool
	}{
		{desc: "input string", body: `{"model":"m","input":"hi","stream":true}`,
			roles: []string{"user"}, texts: []string{"hi"}, promptStart: 0, stream: true},
		{desc: "instructions and input string", body: `{"instructions":"be brief","input":"hi"}`,
			roles: []string{"system", "user"}, texts: []string{"be brief", "hi"}, promptStart: 1},
		{desc: "no input", body: `{"model":"m","prompt":{"id":"pmpt_1"}}`,
			promptStart: -1, gaps: []string{gapServerPrompt}},
		{desc: "previous_response_id", body: `{"previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			roles: []string{"tool"}, texts: []string{"ok"}, promptStart: -1, gaps: []string{gapServerHistory}},
		{desc: "conversation", body: `{"conversation":{"id":"conv_1"},"input":"next"}`,
			roles: []string{"user"}, texts: []string{"next"}, promptStart: 0, gaps: []string{gapServerHistory}, session: "conv_1"},
		{desc: "session hint order", body: `{"safety_identifier":"s","prompt_cache_key":"k","input":"x"}`,
			roles: []string{"user"}, texts: []string{"x"}, promptStart: 0, session: "s"},
		{desc: "trailing prompt of several user messages", body: `{"input":[{"role":"assistant","content":"a"},{"role":"user","content":"b"},{"role":"user","content":[{"type":"input_text","text":"c"}]}]}`,
			roles: []string{"assistant", "user", "user"}, texts: []string{"a", "b", "c"}, promptStart: 1},
		{desc: "unknown content entry", body: `{"input":[{"role":"user","content":[{"type":"input_video","url":"x"}]}]}`,
			roles: []string{"user"}, texts: []string{""}, promptStart: 0, gaps: []string{"content entry type"}},
		{desc: "arguments not an object", body: `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"[1]"}]}`,
			roles: []string{"assistant"}, texts: []string{`{"id":"c","name":"f","input":{"raw_arguments":"[1]"}}`}, promptStart: -1, gaps: []string{"arguments not a JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req := mustDecode(t, tc.body)
			var roles, texts []string
			for _, m := range req.Items {
				roles = append(roles, m.Role)
				texts = append(texts, m.Parts[0].TextOf())
			}
			if !reflect.DeepEqual(roles, tc.roles) || !reflect.DeepEqual(texts, tc.texts) {
				t.Errorf("roles %q texts %q, want %q %q", roles, texts, tc.roles, tc.texts)
			}
			if req.PromptStart != tc.promptStart || req.Stream != tc.stream || req.SessionHint != tc.session {
				t.Errorf("prompt start %d stream %v session %q", req.PromptStart, req.Stream, req.SessionHint)
			}
			if len(req.Gaps) != len(tc.gaps) {
				t.Fatalf("gaps %+v, want %q", req.Gaps, tc.gaps)
			}
			for i, g := range tc.gaps {
				if req.Gaps[i].Path != "items" || !strings.Contains(req.Gaps[i].Reason, g) {
					t.Errorf("gap %d %+v, want reason containing %q", i, req.Gaps[i], g)
				}
			}
		})
	}
}

func TestDecodeRequestGrouping(t *testing.T) {
	// Which canonical message each model item lands in decides where the proxy looks for
	// tool results the model has not seen: after the last assistant message.
	fc := func(id string) string {
		return `{"type":"function_call","call_id":"` + id + `","name":"f","arguments":"{}"}`
	}
	out := func(id string) string {
		return `{"type":"function_call_output","call_id":"` + id + `","output":"r"}`
	}
	rs := `{"type":"reasoning","id":"rs_x","summary":[]}`
	msg := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"t"}]}`
	user := `{"role":"user","content":"u"}`
	tests := []struct {
		desc  string
		items []string
		want  string // roles, with the number of tool calls of each assistant message
		after int    // tool results after the last assistant message
	}{
		{desc: "calls then outputs", items: []string{user, rs, msg, fc("a"), fc("b"), out("a"), out("b")},
			want: "user assistant:2 tool tool", after: 2},
		{desc: "each call followed by its output", items: []string{user, fc("a"), out("a"), fc("b"), out("b")},
			want: "user assistant:2 tool tool", after: 2},
		{desc: "a second response starts with reasoning", items: []string{user, rs, fc("a"), out("a"), rs, fc("b"), out("b")},
			want: "user assistant:1 tool assistant:1 tool", after: 1},
		{desc: "text after outputs is a new answer", items: []string{user, fc("a"), out("a"), msg, user},
			want: "user assistant:1 tool assistant:0 user", after: 0},
		{desc: "opaque items do not split", items: []string{user, rs, `{"type":"web_search_call","id":"ws"}`, msg, fc("a")},
			want: "user assistant:1", after: 0},
		{desc: "a user message closes the assistant message", items: []string{msg, user, fc("a")},
			want: "assistant:0 user assistant:1", after: 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req := mustDecode(t, `{"input":[`+strings.Join(tc.items, ",")+`]}`)
			var got []string
			last := -1
			for i, m := range req.Items {
				s := m.Role
				if m.Role == ahp.RoleAssistant {
					s += ":" + string(rune('0'+len(mapping.ToolCalls([]ahp.Message{m}))))
					last = i
				}
				got = append(got, s)
			}
			after := 0
			for _, tr := range req.ToolResults {
				if tr.ItemIndex > last {
					after++
				}
			}
			if strings.Join(got, " ") != tc.want || after != tc.after {
				t.Errorf("got %q with %d new results, want %q with %d", strings.Join(got, " "), after, tc.want, tc.after)
			}
		})
	}
}

func TestDecodeRequestMalformed(t *testing.T) {
	tests := []struct{ desc, body, reason string }{
		{"not JSON", `{"input":`, "not valid JSON"},
		{"not an object", `["input"]`, "not a JSON object"},
		{"duplicate input", `{"input":"a","input":"b"}`, "duplicate object key"},
		{"escaped duplicate", `{"input":"a","inp\u0075t":"b"}`, "duplicate object key"},
		{"input a number", `{"input":3}`, "neither a string nor an array"},
		{"instructions an array", `{"instructions":[],"input":"x"}`, "instructions is not a string"},
		{"item not an object", `{"input":["x"]}`, "input[0] is not an object"},
		{"item without type or role", `{"input":[{"content":"x"}]}`, "neither a type nor a role"},
		{"unknown role", `{"input":[{"role":"robot","content":"x"}]}`, "unknown role"},
		{"content a number", `{"input":[{"role":"user","content":1}]}`, "neither a string nor an array"},
		{"text entry without text", `{"input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "without a text string"},
		{"image without url", `{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "without image_url or file_id"},
		{"file without data", `{"input":[{"role":"user","content":[{"type":"input_file","filename":"a"}]}]}`, "without file_data"},
		{"call without call_id", `{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "without call_id"},
		{"call without name", `{"input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "without a name"},
		{"output without call_id", `{"input":[{"type":"function_call_output","output":"x"}]}`, "without call_id"},
		{"output a number", `{"input":[{"type":"function_call_output","call_id":"c","output":1}]}`, "neither a string nor an array"},
		{"summary not an array", `{"input":[{"type":"reasoning","id":"r","summary":"x"}]}`, "not an array"},
		{"deep nesting", `{"input":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "nesting deeper"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New().DecodeRequest([]byte(tc.body))
			var br *mapping.BadRequest
			if !errors.As(err, &br) || !strings.Contains(br.Reason, tc.reason) {
				t.Errorf("err = %v, want a *mapping.BadRequest containing %q", err, tc.reason)
			}
		})
	}
}

func TestIDsStableAsConversationGrows(t *testing.T) {
	first := `{"instructions":"sys","input":[{"role":"user","content":"q1"},` +
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"r1"}]}`
	// The same history, re-indented, with the model's answer and a new prompt appended.
	second := `{"instructions": "sys", "input": [ {"role": "user", "content": "q1"},
		{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "r1"},
		{"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "a1"}]},
		{"role": "user", "content": "q2"}]}`
	a, b := mustDecode(t, first), mustDecode(t, second)
	for i := range a.Items {
		if a.Items[i].ID != b.Items[i].ID || !reflect.DeepEqual(a.Items[i].Parts, b.Items[i].Parts) {
			t.Errorf("message %d changed identity: %q vs %q", i, a.Items[i].ID, b.Items[i].ID)
		}
	}
	if b.Items[4].ID != "msg_2" || b.Items[4].Synthesized {
		t.Errorf("an item's own id is its message id: %+v", b.Items[4])
	}
}

func TestEncodeRequestUnchangedReturnsOriginal(t *testing.T) {
	for _, body := range []string{fullRequest, `{"input":"hi"}`, `{"model":"m"}`, `{"instructions":"x","input":[]}`} {
		req := mustDecode(t, body)
		out, err := New().EncodeRequest(req, cloneItems(req.Items))
		if err != nil || string(out) != body {
			t.Errorf("unchanged items must give the original bytes: err %v\n%s", err, out)
		}
		// A hook that hands the items back without the synthesized flag changed nothing.
		items := cloneItems(req.Items)
		for i := range items {
			items[i].Synthesized = false
		}
		if out, err := New().EncodeRequest(req, items); err != nil || string(out) != body {
			t.Errorf("synthesized flag alone must not re-render: err %v", err)
		}
	}
}

func TestEncodeRequest(t *testing.T) {
	req := mustDecode(t, fullRequest)
	input := func(i int) string { return gjson.Get(fullRequest, "input."+strconv.Itoa(i)).Raw }
	tests := []struct {
		desc  string
		edit  func([]ahp.Message) []ahp.Message
		check func(t *testing.T, out gjson.Result)
	}{
		{
			desc: "instructions edited stay instructions",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 0, 0, "Be terse.") },
			check: func(t *testing.T, out gjson.Result) {
				if out.Get("instructions").String() != "Be terse." || out.Get("input").Raw != gjson.Get(fullRequest, "input").Raw {
					t.Errorf("instructions %q; input must stay byte-identical", out.Get("instructions"))
				}
			},
		},
		{
			desc: "instructions removed",
			edit: func(in []ahp.Message) []ahp.Message { return cloneItems(in[1:]) },
			check: func(t *testing.T, out gjson.Result) {
				if out.Get("instructions").Exists() || len(out.Get("input").Array()) != 12 {
					t.Errorf("instructions must be gone and input untouched")
				}
			},
		},
		{
			desc: "function_call_output string rewritten",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 4, 0, `{"temp":"[REDACTED]"}`) },
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.5"); got.Get("output").String() != `{"temp":"[REDACTED]"}` || got.Get("call_id").String() != "call_a" {
					t.Errorf("output not rewritten: %s", got.Raw)
				}
				for _, i := range []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11} {
					if out.Get("input."+strconv.Itoa(i)).Raw != input(i) {
						t.Errorf("input[%d] must keep its bytes: %s", i, out.Get("input."+strconv.Itoa(i)).Raw)
					}
				}
			},
		},
		{
			desc: "function_call_output array rewritten keeps the image",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 5, 0, "[REDACTED]") },
			check: func(t *testing.T, out gjson.Result) {
				want := `[{"type":"input_text","text":"[REDACTED]"},{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]`
				if got := out.Get("input.7.output").Raw; got != want {
					t.Errorf("output %s, want %s", got, want)
				}
			},
		},
		{
			desc: "denied function_call and its output removed",
			edit: func(in []ahp.Message) []ahp.Message {
				out := cloneItems(in)
				out[3].Parts = out[3].Parts[:4]
				return append(out[:5], out[6:]...)
			},
			check: func(t *testing.T, out gjson.Result) {
				if strings.Contains(out.Get("input").Raw, "call_b") || len(out.Get("input").Array()) != 10 {
					t.Errorf("call_b must be gone: %s", out.Get("input").Raw)
				}
				if out.Get("input.6").Raw != input(8) {
					t.Errorf("the hosted call keeps its place and bytes")
				}
			},
		},
		{
			desc: "arguments rewritten",
			edit: func(in []ahp.Message) []ahp.Message {
				return setText(in, 3, 4, `{"id":"call_b","name":"run","input":{"cmd":"ls -la"}}`)
			},
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.6"); got.Get("arguments").String() != `{"cmd":"ls -la"}` || got.Get("id").String() != "fc_2" {
					t.Errorf("arguments not patched in place: %s", got.Raw)
				}
			},
		},
		{
			desc: "the same call written differently is unchanged",
			edit: func(in []ahp.Message) []ahp.Message {
				return setText(in, 3, 3, `{"id":"call_a","name":"get_weather","input":{ "city" : "Paris" }}`)
			},
			check: func(t *testing.T, out gjson.Result) {
				if out.Get("input.4").Raw != input(4) {
					t.Errorf("call must keep its bytes: %s", out.Get("input.4").Raw)
				}
			},
		},
		{
			desc: "user text edited in a content array",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 2, 0, "What is the weather?") },
			check: func(t *testing.T, out gjson.Result) {
				c := out.Get("input.1.content")
				if c.Get("0.text").String() != "What is the weather?" || c.Get("1").Raw != gjson.Get(input(1), "content.1").Raw {
					t.Errorf("content: %s", c.Raw)
				}
			},
		},
		{
			desc: "text file edited is written back as file_data",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 2, 4, "# Redacted") },
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.1.content.4"); got.Get("file_data").String() != "data:text/markdown;base64,IyBSZWRhY3RlZA==" || got.Get("filename").String() != "notes.md" {
					t.Errorf("file entry: %s", got.Raw)
				}
			},
		},
		{
			desc: "assistant string content edited stays a string",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 6, 0, "Mild.") },
			check: func(t *testing.T, out gjson.Result) {
				if out.Get("input.10").Raw != `{"role": "assistant", "content": "Mild."}` {
					t.Errorf("assistant message: %s", out.Get("input.10").Raw)
				}
			},
		},
		{
			desc: "output_text edited drops stale annotations",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 3, 2, "Looking it up.") },
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.3"); got.Get("content.0.text").String() != "Looking it up." || got.Get("id").String() != "msg_1" {
					t.Errorf("message: %s", got.Raw)
				}
			},
		},
		{
			desc: "reasoning summary edited, encrypted content kept",
			edit: func(in []ahp.Message) []ahp.Message { return setText(in, 3, 0, "Need data.") },
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.2"); got.Get("summary.0.text").String() != "Need data." || got.Get("encrypted_content").String() != "gAAAAB-opaque" {
					t.Errorf("reasoning: %s", got.Raw)
				}
			},
		},
		{
			desc: "encrypted reasoning removed",
			edit: func(in []ahp.Message) []ahp.Message {
				out := cloneItems(in)
				out[3].Parts = append(out[3].Parts[:1:1], out[3].Parts[2:]...)
				return out
			},
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.2"); got.Get("encrypted_content").Exists() || got.Get("summary.0.text").String() != "Need the weather." {
					t.Errorf("reasoning: %s", got.Raw)
				}
			},
		},
		{
			desc: "injected messages appended",
			edit: func(in []ahp.Message) []ahp.Message {
				return append(cloneItems(in),
					ahp.Message{ID: "inj_1", Role: "system", Parts: []ahp.Part{ahp.TextPart("inj_1.0", "Use Celsius.")}},
					ahp.Message{ID: "inj_2", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("inj_2.0", "Noted.")}})
			},
			check: func(t *testing.T, out gjson.Result) {
				items := out.Get("input").Array()
				if len(items) != 14 || items[12].Raw != `{"type":"message","role":"system","content":"Use Celsius."}` ||
					items[13].Raw != `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Noted.","annotations":[]}]}` {
					t.Errorf("input: %s", out.Get("input").Raw)
				}
			},
		},
		{
			desc: "message inserted before the prompt",
			edit: func(in []ahp.Message) []ahp.Message {
				out := cloneItems(in)
				inj := ahp.Message{ID: "inj", Role: "developer", Parts: []ahp.Part{ahp.TextPart("inj.0", "ctx")}}
				return append(out[:7], append([]ahp.Message{inj}, out[7:]...)...)
			},
			check: func(t *testing.T, out gjson.Result) {
				if out.Get("input.11.role").String() != "developer" || out.Get("input.12").Raw != input(11) {
					t.Errorf("input: %s", out.Get("input").Raw)
				}
			},
		},
		{
			desc: "text added to a tool result joins it",
			edit: func(in []ahp.Message) []ahp.Message {
				out := cloneItems(in)
				out[4].Parts = append(out[4].Parts, textPart("call_a.extra", " (cached)", ahp.CategoryToolResult))
				return out
			},
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.5.output").String(); got != `{"temp":21} (cached)` {
					t.Errorf("output %q", got)
				}
			},
		},
		{
			desc: "new tool result for a known call",
			edit: func(in []ahp.Message) []ahp.Message {
				return append(cloneItems(in), ahp.Message{ID: "call_a", Role: "tool",
					Parts: []ahp.Part{textPart("x.0", "again", ahp.CategoryToolResult)}})
			},
			check: func(t *testing.T, out gjson.Result) {
				if got := out.Get("input.12").Raw; got != `{"type":"function_call_output","call_id":"call_a","output":"again"}` {
					t.Errorf("new output item: %s", got)
				}
			},
		},
		{
			desc: "reordered messages are written in canonical order",
			edit: func(in []ahp.Message) []ahp.Message {
				out := cloneItems(in)
				out[1], out[2] = out[2], out[1]
				return out
			},
			check: func(t *testing.T, out gjson.Result) {
				if out.Get("input.0").Raw != input(1) || out.Get("input.1").Raw != input(0) ||
					out.Get("input.8").Raw != input(8) || out.Get("input.9").Raw != input(9) {
					t.Errorf("input: %s", out.Get("input").Raw)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := New().EncodeRequest(req, tc.edit(req.Items))
			if err != nil {
				t.Fatal(err)
			}
			if !gjson.ValidBytes(body) {
				t.Fatalf("not JSON: %s", body)
			}
			out := gjson.ParseBytes(body)
			for _, k := range []string{"model", "tools", "store", "user", "x_unknown"} {
				if out.Get(k).Raw != gjson.Get(fullRequest, k).Raw {
					t.Errorf("%s must stay byte-identical", k)
				}
			}
			tc.check(t, out)
			// What went out decodes again, with the edit in place.
			if _, err := New().DecodeRequest(body); err != nil {
				t.Errorf("rendered body does not decode: %v", err)
			}
		})
	}
}

func TestEncodeRequestStringInput(t *testing.T) {
	body := `{"model":"m","instructions":"sys","input":"my key is AKIA123"}`
	req := mustDecode(t, body)
	tests := []struct {
		desc string
		edit func([]ahp.Message) []ahp.Message
		want string
	}{
		{"prompt edited stays a string", func(in []ahp.Message) []ahp.Message { return setText(in, 1, 0, "my key is [REDACTED]") },
			`{"model":"m","instructions":"sys","input":"my key is [REDACTED]"}`},
		{"instructions edited, input untouched", func(in []ahp.Message) []ahp.Message { return setText(in, 0, 0, "sys2") },
			`{"model":"m","instructions":"sys2","input":"my key is AKIA123"}`},
		{"injection turns the string into items", func(in []ahp.Message) []ahp.Message {
			return append(cloneItems(in), ahp.Message{ID: "i", Role: "user", Parts: []ahp.Part{ahp.TextPart("i.0", "more")}})
		}, `{"model":"m","instructions":"sys","input":[{"role":"user","content":"my key is AKIA123"},{"type":"message","role":"user","content":"more"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := New().EncodeRequest(req, tc.edit(req.Items))
			if err != nil || string(out) != tc.want {
				t.Errorf("got %s (err %v)\nwant %s", out, err, tc.want)
			}
		})
	}
}

func TestEncodeRequestKeepsInterleaving(t *testing.T) {
	body := `{"input":[{"role":"user","content":"go"},` +
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":"secret A"},` +
		`{"type":"function_call","call_id":"b","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"b","output":"secret B"}]}`
	req := mustDecode(t, body)
	items := setText(setText(req.Items, 2, 0, "[A]"), 3, 0, "[B]")
	items = append(items, ahp.Message{ID: "n", Role: "developer", Parts: []ahp.Part{ahp.TextPart("n.0", "note")}})
	out, err := New().EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"input":[{"role":"user","content":"go"},` +
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":"[A]"},` +
		`{"type":"function_call","call_id":"b","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"b","output":"[B]"},` +
		`{"type":"message","role":"developer","content":"note"}]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	req := mustDecode(t, fullRequest)
	tests := []struct {
		desc string
		edit func([]ahp.Message) []ahp.Message
		want string
	}{
		{"attachment changed", func(in []ahp.Message) []ahp.Message {
			out := cloneItems(in)
			out[2].Parts[1].MediaType = "image/gif"
			return out
		}, "not an unchanged original attachment"},
		{"unknown attachment", func(in []ahp.Message) []ahp.Message {
			return append(cloneItems(in), ahp.Message{ID: "x", Role: "user", Parts: []ahp.Part{{ID: "x.0", Kind: "attachment", MediaType: "image/png", Selection: "metadata"}}})
		}, "not an unchanged original attachment"},
		{"encrypted reasoning edited", func(in []ahp.Message) []ahp.Message { return setText(in, 3, 1, "guess") }, "encrypted reasoning cannot be edited"},
		{"new reasoning", func(in []ahp.Message) []ahp.Message {
			return append(cloneItems(in), ahp.Message{ID: "x", Role: "assistant", Parts: []ahp.Part{textPart("x.0", "hm", ahp.CategoryReasoning)}})
		}, "new reasoning cannot be rendered"},
		{"tool call in a user message", func(in []ahp.Message) []ahp.Message {
			return append(cloneItems(in), ahp.Message{ID: "x", Role: "user", Parts: []ahp.Part{textPart("x.0", `{"id":"c","name":"f","input":{}}`, ahp.CategoryToolCall)}})
		}, "cannot carry a tool call"},
		{"tool message for no call", func(in []ahp.Message) []ahp.Message {
			return append(cloneItems(in), ahp.Message{ID: "nope", Role: "tool", Parts: []ahp.Part{textPart("x.0", "r", ahp.CategoryToolResult)}})
		}, "must take the id of the tool call"},
		{"tool call input not an object", func(in []ahp.Message) []ahp.Message {
			return setText(in, 3, 3, `{"id":"call_a","name":"get_weather","input":[1]}`)
		}, "input is not a JSON object"},
		{"text without text", func(in []ahp.Message) []ahp.Message {
			out := cloneItems(in)
			out[1].Parts[0].Text, out[1].Parts[0].Selection = nil, ahp.SelectionMetadata
			return out
		}, "cannot be rendered"},
		{"instructions with an attachment", func(in []ahp.Message) []ahp.Message {
			out := cloneItems(in)
			out[0].Parts = append(out[0].Parts, out[2].Parts[1])
			return out
		}, "instructions carry text only"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New().EncodeRequest(req, tc.edit(req.Items))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := New().EncodeRequest(&mapping.Request{}, nil); err == nil {
		t.Error("a request this translator did not decode must be refused")
	}
}

func TestAdditionalToolsItemLeavesTheListWhole(t *testing.T) {
	// Codex's "Responses lite" requests declare their tools in an input item: declarations,
	// not conversation, so the message list has no gap (a secret in it can be redacted by
	// a whole-list rewrite) and the item renders back byte for byte.
	body := `{"model":"gpt-6","input":[{"type":"additional_tools","role":"developer","id":"at_1","tools":[{"type":"namespace","name":"functions","tools":[{"type":"custom","name":"exec"}]}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"key AKIAIOSFODNN7EXAMPLE"}]}]}`
	req := mustDecode(t, body)
	for _, g := range req.Gaps {
		if strings.HasPrefix(g.Path, "items") {
			t.Errorf("list gap %+v", g)
		}
	}
	if len(req.Gaps) != 1 || req.Gaps[0].Path != "params" {
		t.Errorf("gaps %+v", req.Gaps)
	}
	items := ahp.CloneMessages(req.Items)
	last := &items[len(items)-1]
	red := "key [REDACTED]"
	last.Parts[0].Text = &red
	out, err := New().EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out, "input.0").Raw != gjson.Get(body, "input.0").Raw || strings.Contains(string(out), "AKIA") {
		t.Errorf("encoded %s", out)
	}
}
