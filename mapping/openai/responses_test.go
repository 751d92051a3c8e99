package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

func responsesFixture(name string) string {
	b, err := os.ReadFile("testdata/responses/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var (
	respRequestFixture  = responsesFixture("request.json")
	respResponseFixture = responsesFixture("response.json")
)

func TestResponsesDecodeRequest(t *testing.T) {
	req, err := NewResponses().DecodeRequest([]byte(respRequestFixture))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, req.Items)
	reasoningMeta := partSummary{Kind: "text", MediaType: "text/plain", Selection: "metadata", Category: "reasoning"}
	tests := []struct {
		desc  string
		role  string
		id    string
		parts []partSummary
	}{
		{desc: "instructions", role: "system", parts: []partSummary{text("You are a coding agent.")}},
		{desc: "easy user message", role: "user", parts: []partSummary{text("List the files.")}},
		{desc: "multimodal user message", role: "user", parts: []partSummary{text("Also this image:"),
			{Kind: "attachment", MediaType: "image/png", Selection: "metadata", HasSize: true},
			{Kind: "attachment", MediaType: "application/pdf", Selection: "body", Gap: gapProviderID}}},
		{desc: "reasoning item", role: "assistant", id: "rs_1", parts: []partSummary{catText("reasoning", "Need ls."), reasoningMeta}},
		{desc: "assistant output message", role: "assistant", id: "msg_1", parts: []partSummary{text("Running ls.")}},
		{desc: "function call", role: "assistant", id: "fc_1", parts: []partSummary{catText("tool_call", `{"id":"call_1","name":"shell","input":{"cmd":"ls"}}`)}},
		{desc: "function call output", role: "tool", id: "call_1", parts: []partSummary{catText("tool_result", "a.txt\nb.txt")}},
		{desc: "custom tool call", role: "assistant", parts: []partSummary{catText("tool_call", `{"id":"call_2","name":"apply_patch","input":{"input":"*** Begin"}}`)}},
		{desc: "custom tool call output", role: "tool", id: "call_2", parts: []partSummary{catText("tool_result", "ok")}},
		{desc: "developer", role: "developer", parts: []partSummary{text("Be brief.")}},
		{desc: "prompt", role: "user", parts: []partSummary{text("Thanks, now summarize.")}},
	}
	if len(req.Items) != len(tests) {
		t.Fatalf("%d items, want %d", len(req.Items), len(tests))
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := req.Items[i]
			if m.Role != tc.role || tc.id != "" && m.ID != tc.id {
				t.Errorf("role %q id %q", m.Role, m.ID)
			}
			if got := summarize(m.Parts); !reflect.DeepEqual(got, tc.parts) {
				t.Errorf("parts:\n got %+v\nwant %+v", got, tc.parts)
			}
		})
	}
	if req.PromptStart != 10 || req.SessionHint != "u-9" || !req.Stream || req.Model != "gpt-5" {
		t.Errorf("promptStart %d session %q stream %v model %q", req.PromptStart, req.SessionHint, req.Stream, req.Model)
	}
	p := gjson.ParseBytes(req.Params)
	if p.Get("input").Exists() || p.Get("instructions").Exists() || p.Get("x_vendor.a").Int() != 1 {
		t.Errorf("params %s", req.Params)
	}
	want := []mapping.ToolResult{
		{CallID: "call_1", ItemIndex: 6, ToolName: "shell", Input: json.RawMessage(`{"cmd":"ls"}`), CallFound: true},
		{CallID: "call_2", ItemIndex: 8, ToolName: "apply_patch", Input: json.RawMessage(`{"input":"*** Begin"}`), CallFound: true},
	}
	if !reflect.DeepEqual(req.ToolResults, want) {
		t.Errorf("tool results %+v", req.ToolResults)
	}
	var gaps []string
	for _, g := range req.Gaps {
		gaps = append(gaps, g.Reason)
	}
	if j := strings.Join(gaps, "|"); !strings.Contains(j, `"web_search_call" not represented`) || !strings.Contains(j, `"item_reference" not represented`) {
		t.Errorf("gaps %s", j)
	}
}

func TestResponsesDecodeRequestForms(t *testing.T) {
	tests := []struct {
		desc        string
		body        string
		items       int
		promptStart int
		gap         string
		session     string
	}{
		{desc: "string input", body: `{"model":"m","input":"hi"}`, items: 1, promptStart: 0},
		{desc: "previous_response_id", body: `{"model":"m","previous_response_id":"resp_0","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
			items: 1, promptStart: -1, gap: gapServerHistory},
		{desc: "conversation", body: `{"model":"m","conversation":"conv_1","input":"hi"}`, items: 1, promptStart: 0, gap: gapServerHistory, session: "conv_1"},
		{desc: "conversation object", body: `{"model":"m","conversation":{"id":"conv_2"},"input":"hi"}`, items: 1, promptStart: 0, gap: gapServerHistory, session: "conv_2"},
		{desc: "stored prompt, no input", body: `{"model":"m","prompt":{"id":"pmpt_1"}}`, items: 0, promptStart: -1, gap: gapServerPrompt},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, err := NewResponses().DecodeRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Items) != tc.items || req.PromptStart != tc.promptStart || req.SessionHint != tc.session {
				t.Errorf("%d items, promptStart %d, session %q", len(req.Items), req.PromptStart, req.SessionHint)
			}
			hasGap := false
			for _, g := range req.Gaps {
				hasGap = hasGap || g.Reason == tc.gap && g.Path == "items"
			}
			if (tc.gap != "") != hasGap {
				t.Errorf("gaps %+v", req.Gaps)
			}
		})
	}
}

func TestResponsesDecodeRequestMalformed(t *testing.T) {
	tests := []struct{ desc, body, reason string }{
		{desc: "not JSON", body: `{`, reason: "not valid JSON"},
		{desc: "input number", body: `{"input":5}`, reason: "neither a string nor an array"},
		{desc: "item not object", body: `{"input":[1]}`, reason: "input[0] is not an object"},
		{desc: "bad role", body: `{"input":[{"role":"robot","content":"x"}]}`, reason: "unknown message role"},
		{desc: "call without call_id", body: `{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, reason: "without call_id"},
		{desc: "output without call_id", body: `{"input":[{"type":"function_call_output","output":"x"}]}`, reason: "without call_id"},
		{desc: "instructions not string", body: `{"instructions":[],"input":"x"}`, reason: "instructions is not a string"},
		{desc: "duplicate input", body: `{"input":"a","input":"b"}`, reason: "duplicate object key"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := NewResponses().DecodeRequest([]byte(tc.body))
			var br *mapping.BadRequest
			if !errors.As(err, &br) || !strings.Contains(br.Reason, tc.reason) {
				t.Errorf("err = %v, want %q", err, tc.reason)
			}
		})
	}
}

func TestResponsesEncodeRequest(t *testing.T) {
	r := NewResponses()
	orig := []byte(respRequestFixture)
	req, err := r.DecodeRequest(orig)
	if err != nil {
		t.Fatal(err)
	}
	inputs := func(body []byte) []string {
		var out []string
		gjson.GetBytes(body, "input").ForEach(func(_, v gjson.Result) bool { out = append(out, v.Raw); return true })
		return out
	}
	origInputs := inputs(orig)
	tests := []struct {
		desc         string
		items        func() []ahp.Message
		changed      map[int]string // input index -> expected compact JSON
		instructions string         // expected raw instructions ("-" = absent)
		count        int
	}{
		{desc: "edit the prompt", items: func() []ahp.Message { return setText(req.Items, 10, 0, "Summarize in one line.") },
			changed: map[int]string{11: `{"role":"user","content":"Summarize in one line."}`}},
		{desc: "edit image caption keeps attachments", items: func() []ahp.Message { return setText(req.Items, 2, 0, "[redacted]") },
			changed: map[int]string{1: compact(t, strings.Replace(gjson.Get(respRequestFixture, "input.1").Raw, "Also this image:", "[redacted]", 1))}},
		{desc: "rewrite a tool output", items: func() []ahp.Message { return setText(req.Items, 6, 0, "[hidden]") },
			changed: map[int]string{5: `{"type":"function_call_output","call_id":"call_1","output":"[hidden]"}`}},
		{desc: "rewrite a joined custom output", items: func() []ahp.Message { return setText(req.Items, 8, 0, "fine") },
			changed: map[int]string{8: `{"type":"custom_tool_call_output","call_id":"call_2","output":[{"type":"input_text","text":"fine"}]}`}},
		{desc: "rewrite history call arguments", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			items[5].Parts[0] = mapping.ToolCallPart(items[5].Parts[0].ID, mapping.ToolCall{ID: "call_1", Name: "shell", Input: json.RawMessage(`{"cmd":"ls -a"}`)})
			return items
		}, changed: map[int]string{4: `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls -a\"}","status":"completed"}`}},
		{desc: "edit reasoning summary keeps encrypted content", items: func() []ahp.Message { return setText(req.Items, 3, 0, "Need ls -a.") },
			changed: map[int]string{2: `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Need ls -a."}],"encrypted_content":"gAAAAB"}`}},
		{desc: "edit assistant text", items: func() []ahp.Message { return setText(req.Items, 4, 0, "Listing.") },
			changed: map[int]string{3: `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Listing.","annotations":[]}]}`}},
		{desc: "edit instructions", items: func() []ahp.Message { return setText(req.Items, 0, 0, "Be safe.") },
			instructions: `"Be safe."`},
		{desc: "remove instructions", items: func() []ahp.Message { return cloneItems(req.Items)[1:] }, instructions: "-"},
		{desc: "inject a system message at the end", items: func() []ahp.Message {
			return append(cloneItems(req.Items), ahp.Message{ID: "inj", Role: "system", Parts: []ahp.Part{ahp.TextPart("inj.p0", "Policy: no rm.")}})
		}, changed: map[int]string{12: `{"type":"message","role":"system","content":"Policy: no rm."}`}, count: 13},
		{desc: "remove the reasoning item; opaque items stay in place", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			return append(items[:3], items[4:]...)
		}, count: 11},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := bytes.Clone(orig)
			out, err := r.EncodeRequest(req, tc.items())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(orig, before) {
				t.Fatal("original modified")
			}
			o, n := gjson.ParseBytes(orig), gjson.ParseBytes(out)
			o.ForEach(func(k, v gjson.Result) bool {
				if k.Str != "input" && k.Str != "instructions" && n.Get(k.Str).Raw != v.Raw {
					t.Errorf("top-level %s changed", k.Str)
				}
				return true
			})
			switch tc.instructions {
			case "":
				if n.Get("instructions").Raw != o.Get("instructions").Raw {
					t.Errorf("instructions changed: %s", n.Get("instructions").Raw)
				}
			case "-":
				if n.Get("instructions").Exists() {
					t.Errorf("instructions left")
				}
			default:
				if n.Get("instructions").Raw != tc.instructions {
					t.Errorf("instructions %s", n.Get("instructions").Raw)
				}
			}
			got := inputs(out)
			want := len(origInputs)
			if tc.count != 0 {
				want = tc.count
			}
			if len(got) != want {
				t.Fatalf("%d input items, want %d:\n%s", len(got), want, out)
			}
			for i, raw := range got {
				if exp, ok := tc.changed[i]; ok {
					if compact(t, raw) != compact(t, exp) {
						t.Errorf("input %d:\n got %s\nwant %s", i, compact(t, raw), compact(t, exp))
					}
				} else if tc.count == 0 && raw != origInputs[i] {
					t.Errorf("input %d changed: %s", i, raw)
				}
			}
			// Opaque items survive byte for byte.
			for _, keep := range []string{gjson.Get(respRequestFixture, "input.6").Raw, gjson.Get(respRequestFixture, "input.9").Raw} {
				if !strings.Contains(string(out), keep) {
					t.Errorf("opaque item lost: %s", keep)
				}
			}
			if _, err := r.DecodeRequest(out); err != nil {
				t.Errorf("re-decode: %v", err)
			}
		})
	}
	t.Run("unchanged returns original", func(t *testing.T) {
		out, err := r.EncodeRequest(req, cloneItems(req.Items))
		if err != nil || &out[0] != &orig[0] {
			t.Errorf("err %v", err)
		}
	})
	t.Run("new reasoning is refused", func(t *testing.T) {
		items := append(cloneItems(req.Items), ahp.Message{ID: "r", Role: "assistant", Parts: []ahp.Part{textPart("r.p0", "x", ahp.CategoryReasoning)}})
		if _, err := r.EncodeRequest(req, items); err == nil {
			t.Error("no error")
		}
	})
}

func TestResponsesEncodeRequestNewToolOutput(t *testing.T) {
	r := NewResponses()
	req, err := r.DecodeRequest([]byte(`{"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"custom_tool_call","call_id":"c2","name":"g","input":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ desc, id, want, err string }{
		{desc: "function call output", id: "c1", want: `{"type":"function_call_output","call_id":"c1","output":"r"}`},
		{desc: "custom tool call output", id: "c2", want: `{"type":"custom_tool_call_output","call_id":"c2","output":"r"}`},
		{desc: "no such call", id: "c3", err: "names no tool call"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			items := append(cloneItems(req.Items), ahp.Message{ID: tc.id, Role: "tool", Parts: []ahp.Part{textPart(tc.id+".p0", "r", ahp.CategoryToolResult)}})
			out, err := r.EncodeRequest(req, items)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(out, "input.2").Raw; got != tc.want {
				t.Errorf("got %s", got)
			}
		})
	}
}

func TestResponsesEncodeRequestStringInput(t *testing.T) {
	r := NewResponses()
	req, err := r.DecodeRequest([]byte(`{"model":"m","input":"hello","instructions":"sys"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.EncodeRequest(req, setText(req.Items, 1, 0, "bye"))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"model":"m","input":"bye","instructions":"sys"}` {
		t.Errorf("got %s", out)
	}
	items := append(cloneItems(req.Items), ahp.Message{ID: "x", Role: "user", Parts: []ahp.Part{ahp.TextPart("x.p0", "more")}})
	out, err = r.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "input").Raw; got != `[{"role":"user","content":"hello"},{"type":"message","role":"user","content":"more"}]` {
		t.Errorf("input %s", got)
	}
}

func TestResponsesDecodeResponse(t *testing.T) {
	resp, err := NewResponses().DecodeResponse([]byte(respResponseFixture))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, resp.Items)
	if len(resp.Items) != 1 || resp.Items[0].ID != "resp_1" || resp.FinishReason != "completed" {
		t.Fatalf("items %+v finish %q", resp.Items, resp.FinishReason)
	}
	want := []partSummary{
		catText("reasoning", "Two calls."),
		text("Checking."),
		catText("tool_call", `{"id":"call_a","name":"get_weather","input":{"city":"Paris"}}`),
		catText("tool_call", `{"id":"call_b","name":"run","input":{"cmd":"rm -rf /"}}`),
	}
	if got := summarize(resp.Items[0].Parts); !reflect.DeepEqual(got, want) {
		t.Errorf("parts %+v", got)
	}
	u := resp.Usage
	if u == nil || *u.InputTokens != 36 || *u.OutputTokens != 87 || *u.CacheReadTokens != 10 || u.CacheWriteTokens != nil {
		t.Errorf("usage %+v", u)
	}
	tests := []struct {
		desc, body string
		upstream   bool
		finish     string
	}{
		{desc: "incomplete", body: `{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`, finish: "max_output_tokens"},
		{desc: "failed", body: `{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, upstream: true},
		{desc: "error body", body: `{"error":{"message":"bad","type":"invalid_request_error"}}`, upstream: true},
		{desc: "no output", body: `{"id":"r","status":"completed"}`},
		{desc: "not JSON", body: `nope`},
		{desc: "call without name", body: `{"id":"r","output":[{"type":"function_call","call_id":"c"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, err := NewResponses().DecodeResponse([]byte(tc.body))
			var ue *mapping.UpstreamError
			switch {
			case tc.upstream:
				if !errors.As(err, &ue) {
					t.Errorf("err = %v", err)
				}
			case tc.finish != "":
				if err != nil || resp.FinishReason != tc.finish {
					t.Errorf("err %v finish %q", err, resp.FinishReason)
				}
			default:
				if !errors.Is(err, mapping.ErrMalformed) {
					t.Errorf("err = %v", err)
				}
			}
		})
	}
}

func TestResponsesEncodeResponse(t *testing.T) {
	r := NewResponses()
	orig := []byte(respResponseFixture)
	resp, err := r.DecodeResponse(orig)
	if err != nil {
		t.Fatal(err)
	}
	out0 := func(i int) string { return gjson.Get(respResponseFixture, "output."+string(rune('0'+i))).Raw }
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
		desc   string
		items  func() []ahp.Message
		finish string
		output []string // expected compact output items
		status string
	}{
		{desc: "deny one call", items: func() []ahp.Message { return without(3) },
			output: []string{out0(0), out0(1), out0(2), out0(3)}, status: "completed"},
		{desc: "rewrite arguments", items: func() []ahp.Message {
			items := cloneItems(resp.Items)
			items[0].Parts[3] = mapping.ToolCallPart(items[0].Parts[3].ID, mapping.ToolCall{ID: "call_b", Name: "run", Input: json.RawMessage(`{"cmd":"ls"}`)})
			return items
		}, output: []string{out0(0), out0(1), out0(2), out0(3),
			`{"type":"function_call","id":"fc_b","call_id":"call_b","name":"run","arguments":"{\"cmd\":\"ls\"}","status":"completed"}`}, status: "completed"},
		{desc: "remove every call and explain", items: func() []ahp.Message {
			items := without(2, 3)
			items[0].Parts = append(items[0].Parts, ahp.TextPart("blk", "Blocked by policy."))
			return items
		}, finish: "completed", output: []string{out0(0),
			`{"type":"message","id":"msg_2","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Checking.","annotations":[]},{"type":"output_text","text":"Blocked by policy.","annotations":[]}]}`,
			out0(3)}, status: "completed"},
		{desc: "edit text", items: func() []ahp.Message { return setText(resp.Items, 0, 1, "Looking.") },
			output: []string{out0(0), `{"type":"message","id":"msg_2","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Looking.","annotations":[]}]}`,
				out0(2), out0(3), out0(4)}, status: "completed"},
		{desc: "incomplete reason", items: func() []ahp.Message { return cloneItems(resp.Items) }, finish: "max_output_tokens",
			output: []string{out0(0), out0(1), out0(2), out0(3), out0(4)}, status: "incomplete"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := r.EncodeResponse(resp, tc.items(), tc.finish)
			if err != nil {
				t.Fatal(err)
			}
			root := gjson.ParseBytes(out)
			gjson.Parse(respResponseFixture).ForEach(func(k, v gjson.Result) bool {
				if k.Str != "output" && k.Str != "status" && k.Str != "incomplete_details" && root.Get(k.Str).Raw != v.Raw {
					t.Errorf("top-level %s changed", k.Str)
				}
				return true
			})
			var got []string
			root.Get("output").ForEach(func(_, v gjson.Result) bool { got = append(got, compact(t, v.Raw)); return true })
			if len(got) != len(tc.output) {
				t.Fatalf("output:\n%s", strings.Join(got, "\n"))
			}
			for i := range got {
				if got[i] != compact(t, tc.output[i]) {
					t.Errorf("output %d:\n got %s\nwant %s", i, got[i], compact(t, tc.output[i]))
				}
			}
			if root.Get("status").Str != tc.status {
				t.Errorf("status %q", root.Get("status").Str)
			}
			if _, err := r.DecodeResponse(out); err != nil {
				t.Errorf("re-decode: %v", err)
			}
		})
	}
	t.Run("unchanged returns original", func(t *testing.T) {
		out, err := r.EncodeResponse(resp, cloneItems(resp.Items), "completed")
		if err != nil || &out[0] != &orig[0] {
			t.Errorf("err %v", err)
		}
	})
}

func TestResponsesSynthesizeResponse(t *testing.T) {
	r := NewResponses()
	req := &mapping.Request{Model: "gpt-5"}
	body, err := r.SynthesizeResponse(req, []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{
		ahp.TextPart("s.p0", "Supplied."),
		mapping.ToolCallPart("s.p1", mapping.ToolCall{ID: "call_s", Name: "f", Input: json.RawMessage(`{"a":1}`)}),
	}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []partSummary{text("Supplied."), catText("tool_call", `{"id":"call_s","name":"f","input":{"a":1}}`)}
	if got := summarize(resp.Items[0].Parts); !reflect.DeepEqual(got, want) || resp.FinishReason != "completed" || resp.Usage != nil ||
		!strings.HasPrefix(resp.ID, "resp_hookproxy_") || resp.Model != "gpt-5" {
		t.Errorf("synthesized %s", body)
	}
}

func TestResponsesStream(t *testing.T) {
	r := NewResponses()
	var rec flushRecorder
	if err := r.WriteStream(&rec, []byte(respResponseFixture)); err != nil {
		t.Fatal(err)
	}
	stream := rec.String()
	for _, ev := range []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"} {
		if !strings.Contains(stream, "event: "+ev+"\n") {
			t.Errorf("no %s event", ev)
		}
	}
	if rec.flushes != strings.Count(stream, "\n\n") {
		t.Errorf("%d flushes for %d events", rec.flushes, strings.Count(stream, "\n\n"))
	}
	want, _ := r.DecodeResponse([]byte(respResponseFixture))
	for _, sizes := range [][]int{nil, {1}, {7, 3}} {
		a := r.NewAssembler()
		s := []byte(stream)
		for i := 0; len(s) > 0; i++ {
			n := len(s)
			if sizes != nil {
				n = min(sizes[i%len(sizes)], len(s))
			}
			a.Write(s[:n])
			s = s[n:]
		}
		body, err := a.Body()
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.DecodeResponse(body)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Items, want.Items) || !reflect.DeepEqual(got.Usage, want.Usage) {
			t.Errorf("assembled response differs")
		}
	}
	t.Run("rebuilt from deltas when the terminal response has no output", func(t *testing.T) {
		ev := func(typ, fields string) string {
			return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"," + fields + "}\n\n"
		}
		s := ev("response.created", `"response":{"id":"r","status":"in_progress","output":[]}`) +
			ev("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"m","role":"assistant","content":[]}`) +
			ev("response.output_text.delta", `"output_index":0,"content_index":0,"delta":"Hel"`) +
			ev("response.output_text.delta", `"output_index":0,"content_index":0,"delta":"lo"`) +
			ev("response.output_item.added", `"output_index":1,"item":{"type":"function_call","call_id":"c","name":"f","arguments":""}`) +
			ev("response.function_call_arguments.delta", `"output_index":1,"delta":"{\"a\""`) +
			ev("response.function_call_arguments.delta", `"output_index":1,"delta":":1}"`) +
			ev("response.completed", `"response":{"id":"r","status":"completed","output":[]}`)
		a := r.NewAssembler()
		a.Write([]byte(s))
		body, err := a.Body()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := r.DecodeResponse(body)
		if err != nil {
			t.Fatal(err)
		}
		want := []partSummary{text("Hello"), catText("tool_call", `{"id":"c","name":"f","input":{"a":1}}`)}
		if got := summarize(resp.Items[0].Parts); !reflect.DeepEqual(got, want) {
			t.Errorf("parts %+v from %s", got, body)
		}
	})
	errs := []struct{ desc, stream string }{
		{desc: "error event", stream: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n"},
		{desc: "failed", stream: "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"x\",\"message\":\"y\"}}}\n\n"},
	}
	for _, tc := range errs {
		t.Run(tc.desc, func(t *testing.T) {
			a := r.NewAssembler()
			a.Write([]byte(tc.stream))
			var ue *mapping.UpstreamError
			if _, err := a.Body(); !errors.As(err, &ue) {
				t.Errorf("err = %v", err)
			}
		})
	}
	t.Run("truncated", func(t *testing.T) {
		a := r.NewAssembler()
		a.Write([]byte(stream[:len(stream)/2]))
		if _, err := a.Body(); err == nil || !strings.Contains(err.Error(), "ended") {
			t.Errorf("err = %v", err)
		}
	})
}
