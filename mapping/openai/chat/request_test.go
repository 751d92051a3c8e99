package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

func TestDecodeRequestMessageKinds(t *testing.T) {
	req, err := NewChat().DecodeRequest([]byte(fullRequest))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, req.Items)
	attach := func(mt, sel string, size bool, gap string) partSummary {
		return partSummary{Kind: "attachment", MediaType: mt, Selection: sel, HasSize: size, Gap: gap}
	}
	legacyID := legacyCallID("legacy_fn", "{}")
	tests := []struct {
		desc  string
		index int
		role  string
		id    string // "" = synthesized hash id
		parts []partSummary
	}{
		{desc: "system string", index: 0, role: "system", parts: []partSummary{text("You are terse.")}},
		{desc: "developer array", index: 1, role: "developer", parts: []partSummary{text("Use tools.")}},
		{desc: "user multimodal", index: 2, role: "user", parts: []partSummary{
			text("What is in this image?"),
			attach("image/png", "metadata", true, ""),
			attach("image/jpeg", "body", false, gapRemoteURL),
			attach("audio/wav", "metadata", true, ""),
			text("hello"), // a text file is text, never an attachment
			attach("application/pdf", "metadata", true, ""),
			attach("application/octet-stream", "body", false, gapProviderID),
			attach("application/octet-stream", "metadata", false, ""),
		}},
		{desc: "assistant reasoning, text, tool calls", index: 3, role: "assistant", parts: []partSummary{
			catText("reasoning", "Need the weather."),
			text("Checking."),
			catText("tool_call", `{"id":"call_1","name":"get_weather","input":{"city":"Paris"}}`),
			catText("tool_call", `{"id":"call_2","name":"broken","input":{"raw_arguments":"not json"}}`),
			catText("tool_call", `{"id":"call_3","name":"apply_patch","input":{"input":"*** Begin Patch"}}`),
		}},
		{desc: "tool string", index: 4, role: "tool", id: "call_1", parts: []partSummary{catText("tool_result", `{"temp":21}`)}},
		{desc: "tool text parts joined", index: 5, role: "tool", id: "call_2", parts: []partSummary{catText("tool_result", "part a part b")}},
		{desc: "custom tool result", index: 6, role: "tool", id: "call_3", parts: []partSummary{catText("tool_result", "Done")}},
		{desc: "orphan tool result", index: 7, role: "tool", id: "call_missing", parts: []partSummary{catText("tool_result", "orphan")}},
		{desc: "assistant text and refusal parts", index: 8, role: "assistant", parts: []partSummary{text("Sorry."), text("I can't.")}},
		{desc: "legacy function_call", index: 9, role: "assistant", parts: []partSummary{
			catText("tool_call", `{"id":"`+legacyID+`","name":"legacy_fn","input":{}}`)}},
		{desc: "legacy function result", index: 10, role: "tool", parts: []partSummary{catText("tool_result", "legacy result")}},
		{desc: "assistant refusal field", index: 11, role: "assistant", parts: []partSummary{text(""), text("No.")}},
		{desc: "user prompt 1", index: 12, role: "user", parts: []partSummary{text("Thanks")}},
		{desc: "user prompt 2", index: 13, role: "user", parts: []partSummary{text("And tomorrow?")}},
	}
	if len(req.Items) != len(tests) {
		t.Fatalf("got %d items, want %d", len(req.Items), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := req.Items[tc.index]
			if m.Role != tc.role {
				t.Errorf("role = %q, want %q", m.Role, tc.role)
			}
			if tc.id != "" && m.ID != tc.id {
				t.Errorf("id = %q, want %q", m.ID, tc.id)
			}
			if tc.id == "" && (len(m.ID) != 17 || m.ID[0] != 'm') {
				t.Errorf("id = %q, want a synthesized m<16 hex>", m.ID)
			}
			if !m.Synthesized {
				t.Errorf("message not marked synthesized")
			}
			for j, p := range m.Parts {
				if want := partID(m.ID, j); p.ID != want {
					t.Errorf("part %d id = %q, want %q", j, p.ID, want)
				}
			}
			if got := summarize(m.Parts); !reflect.DeepEqual(got, tc.parts) {
				t.Errorf("parts:\n got %+v\nwant %+v", got, tc.parts)
			}
		})
	}

	t.Run("request fields", func(t *testing.T) {
		if req.Model != "gpt-4o" || !req.Stream || req.SessionHint != "u-42" || req.PromptStart != 12 {
			t.Errorf("model %q stream %v session %q promptStart %d", req.Model, req.Stream, req.SessionHint, req.PromptStart)
		}
		p := gjson.ParseBytes(req.Params)
		if !p.IsObject() || p.Get("x_vendor.a").Int() != 1 || p.Get("model").Str != "gpt-4o" {
			t.Errorf("params = %s", req.Params)
		}
		// The messages are not params; only their names, file names and remote URLs are, as
		// the messages residue (mapping.ResidueMembers), one entry per message in order
		// (inline data is not residue: it is the part).
		if got := p.Get("messages").Raw; got != `[{},{},{"name":"ann","content":[{},{},{"image_url":{"url":"https://example.com/cat.jpg?x=1"}},{},{"file":{"filename":"notes.txt"}},{"file":{"filename":"a.pdf"}},{},{}]},{},{},{},{},{},{},{},{"name":"legacy_fn"},{},{},{}]` {
			t.Errorf("messages residue = %s", got)
		}
	})
	t.Run("tool results", func(t *testing.T) {
		want := []mapping.ToolResult{
			{CallID: "call_1", ItemIndex: 4, ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`), CallFound: true},
			{CallID: "call_2", ItemIndex: 5, ToolName: "broken", Input: json.RawMessage(`{"raw_arguments":"not json"}`), CallFound: true},
			{CallID: "call_3", ItemIndex: 6, ToolName: "apply_patch", Input: json.RawMessage(`{"input":"*** Begin Patch"}`), CallFound: true},
			{CallID: "call_missing", ItemIndex: 7},
			{CallID: legacyID, ItemIndex: 10, ToolName: "legacy_fn", Input: json.RawMessage(`{}`), CallFound: true},
		}
		if !reflect.DeepEqual(req.ToolResults, want) {
			t.Errorf("tool results:\n got %+v\nwant %+v", req.ToolResults, want)
		}
	})
	t.Run("gaps", func(t *testing.T) {
		var reasons []string
		for _, g := range req.Gaps {
			if g.Path != "items" {
				t.Errorf("gap path %q", g.Path)
			}
			reasons = append(reasons, g.Reason)
		}
		joined := strings.Join(reasons, "|")
		for _, want := range []string{"tool call call_2 arguments not a JSON object", `content part type "video_url" not represented`} {
			if !strings.Contains(joined, want) {
				t.Errorf("gaps %q lack %q", joined, want)
			}
		}
	})
	t.Run("attachment digest", func(t *testing.T) {
		p := req.Items[2].Parts[1]
		// "iVBORw0KGgo=" is the 8-byte PNG signature.
		if *p.Size != 8 || p.SHA256 != "4c4b6a3be1314ab86138bef4314dde022e600960d8689a2c8f8631802d20dab6" {
			t.Errorf("size %d sha %s", *p.Size, p.SHA256)
		}
		mt, data, ok := NewChat().AttachmentData(req, p.ID)
		if !ok || mt != "image/png" || !bytes.Equal(data, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("AttachmentData = %q %q %v", mt, data, ok)
		}
	})
}

func TestDecodeRequestPromptStartAndSession(t *testing.T) {
	tests := []struct {
		desc        string
		body        string
		promptStart int
		session     string
		stream      bool
	}{
		{desc: "single prompt", body: `{"messages":[{"role":"user","content":"hi"}]}`, promptStart: 0},
		{desc: "ends with tool result", body: `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`, promptStart: -1},
		{desc: "ends with assistant", body: `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, promptStart: -1},
		{desc: "empty", body: `{"messages":[]}`, promptStart: -1},
		{desc: "safety_identifier", body: `{"messages":[],"safety_identifier":"s1","prompt_cache_key":"p"}`, promptStart: -1, session: "s1"},
		{desc: "prompt_cache_key", body: `{"messages":[],"prompt_cache_key":"p"}`, promptStart: -1, session: "p"},
		{desc: "metadata.session_id", body: `{"messages":[],"metadata":{"session_id":"sess"},"stream":false}`, promptStart: -1, session: "sess"},
		{desc: "stream", body: `{"messages":[],"stream":true}`, promptStart: -1, stream: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, err := NewChat().DecodeRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if req.PromptStart != tc.promptStart || req.SessionHint != tc.session || req.Stream != tc.stream {
				t.Errorf("promptStart %d session %q stream %v", req.PromptStart, req.SessionHint, req.Stream)
			}
			if req.Items == nil && len(gjson.Get(tc.body, "messages").Array()) > 0 {
				t.Error("no items")
			}
		})
	}
}

func TestDecodeRequestMalformed(t *testing.T) {
	tests := []struct {
		desc, body, reason string
	}{
		{desc: "not JSON", body: `{"messages":`, reason: "not valid JSON"},
		{desc: "array body", body: `[]`, reason: "not a JSON object"},
		{desc: "no messages", body: `{"model":"x"}`, reason: "no messages array"},
		{desc: "messages not array", body: `{"messages":{}}`, reason: "no messages array"},
		{desc: "message not object", body: `{"messages":[1]}`, reason: "messages[0] is not an object"},
		{desc: "no role", body: `{"messages":[{"content":"x"}]}`, reason: "messages[0] has no role"},
		{desc: "unknown role", body: `{"messages":[{"role":"robot","content":"x"}]}`, reason: `unknown role "robot"`},
		{desc: "content number", body: `{"messages":[{"role":"user","content":5}]}`, reason: "neither a string nor an array"},
		{desc: "text part without text", body: `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, reason: "text part without text"},
		{desc: "image without url", body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, reason: "without url"},
		{desc: "file without data", body: `{"messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`, reason: "file part without file_data"},
		{desc: "tool without call id", body: `{"messages":[{"role":"tool","content":"x"}]}`, reason: "without tool_call_id"},
		{desc: "tool call without id", body: `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`, reason: "tool call without id"},
		{desc: "tool call without name", body: `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{}}]}]}`, reason: "without a name"},
		{desc: "tool_calls not array", body: `{"messages":[{"role":"assistant","tool_calls":{}}]}`, reason: "tool_calls is not an array"},
		{desc: "duplicate messages key", body: `{"messages":[],"messages":[{"role":"user","content":"x"}]}`, reason: `duplicate object key "messages"`},
		{desc: "duplicate escaped key", body: `{"messages":[{"role":"user","content":"a","cont\u0065nt":"b"}]}`, reason: `duplicate object key "content"`},
		{desc: "too deep", body: `{"messages":[],"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, reason: "nesting deeper"},
		{desc: "very deep", body: strings.Repeat("[", 100000) + strings.Repeat("]", 100000), reason: "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := NewChat().DecodeRequest([]byte(tc.body))
			var br *mapping.BadRequest
			if !errors.As(err, &br) {
				t.Fatalf("err = %v, want *mapping.BadRequest", err)
			}
			if !strings.Contains(br.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", br.Reason, tc.reason)
			}
		})
	}
}

func TestMessageIDsStableAsConversationGrows(t *testing.T) {
	first := `{"model":"m","messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":"hello"}]}`
	second := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hello"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_9","content":"ok"},
		{"role":"assistant","content":"done"},
		{"role":"user","content":"hello"}]}`
	a, err := NewChat().DecodeRequest([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewChat().DecodeRequest([]byte(second))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		same bool
		x, y string
	}{
		{desc: "system keeps its id (whitespace differs)", same: true, x: a.Items[0].ID, y: b.Items[0].ID},
		{desc: "first prompt keeps its id", same: true, x: a.Items[1].ID, y: b.Items[1].ID},
		{desc: "first prompt part keeps its id", same: true, x: a.Items[1].Parts[0].ID, y: b.Items[1].Parts[0].ID},
		{desc: "same text at another position is another message", same: false, x: b.Items[1].ID, y: b.Items[5].ID},
		{desc: "tool message takes the call id", same: true, x: "call_9", y: b.Items[3].ID},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if (tc.x == tc.y) != tc.same {
				t.Errorf("%q vs %q", tc.x, tc.y)
			}
		})
	}
}

func TestEncodeRequest(t *testing.T) {
	c := NewChat()
	orig := []byte(fullRequest)
	req, err := c.DecodeRequest(orig)
	if err != nil {
		t.Fatal(err)
	}
	messages := func(body []byte) []string {
		var out []string
		gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
			out = append(out, m.Raw)
			return true
		})
		return out
	}
	origMsgs := messages(orig)
	withTool := func(call mapping.ToolCall) []ahp.Message {
		items := cloneItems(req.Items)
		items[3].Parts[2] = mapping.ToolCallPart(items[3].Parts[2].ID, call)
		return items
	}
	tests := []struct {
		desc    string
		items   func() []ahp.Message
		changed map[int]string // message index -> expected compact JSON (others byte-identical)
		count   int            // expected message count (0 = unchanged count)
	}{
		{desc: "modify one user text", items: func() []ahp.Message { return setText(req.Items, 13, 0, "And next week?") },
			changed: map[int]string{13: `{"role": "user", "content": "And next week?"}`}},
		{desc: "modify a text entry keeps its other fields", items: func() []ahp.Message { return setText(req.Items, 1, 0, "Use no tools.") },
			changed: map[int]string{1: `{"role": "developer", "content": [{"type": "text", "text": "Use no tools.", "cache_control": {"type": "ephemeral"}}]}`}},
		{desc: "redact text beside attachments keeps the attachments and name",
			items:   func() []ahp.Message { return setText(req.Items, 2, 0, "[redacted]") },
			changed: map[int]string{2: compact(t, strings.Replace(gjson.Get(fullRequest, "messages.2").Raw, "What is in this image?", "[redacted]", 1))}},
		{desc: "edit text file content", items: func() []ahp.Message { return setText(req.Items, 2, 4, "bye") },
			changed: map[int]string{2: compact(t, strings.Replace(gjson.Get(fullRequest, "messages.2").Raw, "data:text/plain;base64,aGVsbG8=", "data:text/plain;base64,Ynll", 1))}},
		{desc: "tool result rewrite", items: func() []ahp.Message { return setText(req.Items, 4, 0, `{"temp":"[hidden]"}`) },
			changed: map[int]string{4: `{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":\"[hidden]\"}"}`}},
		{desc: "joined tool result rewrite keeps the array form", items: func() []ahp.Message { return setText(req.Items, 5, 0, "x") },
			changed: map[int]string{5: `{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"x"}]}`}},
		{desc: "legacy function result rewrite", items: func() []ahp.Message { return setText(req.Items, 10, 0, "new") },
			changed: map[int]string{10: `{"role":"function","name":"legacy_fn","content":"new"}`}},
		{desc: "refusal part rewrite", items: func() []ahp.Message { return setText(req.Items, 8, 1, "Nope.") },
			changed: map[int]string{8: `{"role":"assistant","content":[{"type":"text","text":"Sorry."},{"type":"refusal","refusal":"Nope."}],"refusal":null}`}},
		{desc: "refusal field rewrite", items: func() []ahp.Message { return setText(req.Items, 11, 1, "Never.") },
			changed: map[int]string{11: `{"role":"assistant","content":"","refusal":"Never."}`}},
		{desc: "history tool call argument rewrite",
			items: func() []ahp.Message {
				return withTool(mapping.ToolCall{ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"city": "Lyon", "u": "<c>"}`)})
			},
			changed: map[int]string{3: compact(t, strings.Replace(gjson.Get(fullRequest, "messages.3").Raw,
				`"{\"city\": \"Paris\"}"`, `"{\"city\":\"Lyon\",\"u\":\"<c>\"}"`, 1))}},
		{desc: "reasoning rewrite", items: func() []ahp.Message { return setText(req.Items, 3, 0, "hm") },
			changed: map[int]string{3: compact(t, strings.Replace(gjson.Get(fullRequest, "messages.3").Raw, "Need the weather.", "hm", 1))}},
		{desc: "inject a new system message at the end",
			items: func() []ahp.Message {
				items := cloneItems(req.Items)
				return append(items, ahp.Message{ID: "inj-1", Role: "system", Parts: []ahp.Part{ahp.TextPart("inj-1.p0", "Be safe.")}})
			},
			changed: map[int]string{14: `{"role":"system","content":"Be safe."}`}, count: 15},
		{desc: "inject a multi-part user message",
			items: func() []ahp.Message {
				items := cloneItems(req.Items)
				return append(items, ahp.Message{ID: "inj-2", Role: "user", Parts: []ahp.Part{ahp.TextPart("a", "x"), ahp.TextPart("b", "y")}})
			},
			changed: map[int]string{14: `{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}`}, count: 15},
		{desc: "drop a message", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			return append(items[:12], items[13])
		}, count: 13},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := bytes.Clone(orig)
			out, err := c.EncodeRequest(req, tc.items())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(orig, before) {
				t.Fatal("EncodeRequest modified the original body")
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			// Every top-level field except messages stays byte-identical.
			o, n := gjson.ParseBytes(orig), gjson.ParseBytes(out)
			o.ForEach(func(k, v gjson.Result) bool {
				if k.Str != "messages" && n.Get(k.Str).Raw != v.Raw {
					t.Errorf("top-level %s changed: %s -> %s", k.Str, v.Raw, n.Get(k.Str).Raw)
				}
				return true
			})
			got := messages(out)
			want := len(origMsgs)
			if tc.count != 0 {
				want = tc.count
			}
			if len(got) != want {
				t.Fatalf("got %d messages, want %d", len(got), want)
			}
			for i, raw := range got {
				if exp, ok := tc.changed[i]; ok {
					if compact(t, raw) != compact(t, exp) {
						t.Errorf("message %d:\n got %s\nwant %s", i, compact(t, raw), compact(t, exp))
					}
				} else if tc.count == 0 && raw != origMsgs[i] {
					t.Errorf("message %d changed:\n%s\n->\n%s", i, origMsgs[i], raw)
				}
			}
			// The result decodes again, and the edit is what the model will see.
			again, err := c.DecodeRequest(out)
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			checkSchema(t, again.Items)
		})
	}
}

func TestEncodeRequestUnchangedReturnsOriginal(t *testing.T) {
	c := NewChat()
	for _, body := range []string{fullRequest, `{"messages":[]}`, `{"messages":[{"role":"user","content":"x"}],"z":[1,  2]}`} {
		req, err := c.DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		// A deep copy (as the chain hands back) counts as unchanged, synthesized flag or not.
		items := cloneItems(req.Items)
		for i := range items {
			items[i].Synthesized = false
		}
		out, err := c.EncodeRequest(req, items)
		if err != nil {
			t.Fatal(err)
		}
		if &out[0] != &req.Original[0] {
			t.Errorf("unchanged items did not return the original bytes")
		}
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	c := NewChat()
	req, err := c.DecodeRequest([]byte(fullRequest))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(3)
	tests := []struct {
		desc   string
		items  func() []ahp.Message
		reason string
	}{
		{desc: "new attachment", reason: "not an unchanged original attachment", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			items[12].Parts = append(items[12].Parts, ahp.Part{ID: "new", Kind: "attachment", MediaType: "image/png", Selection: "metadata", Size: &size})
			return items
		}},
		{desc: "attachment with another media type", reason: "not an unchanged original attachment", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			items[2].Parts[1].MediaType = "image/gif"
			return items
		}},
		{desc: "new tool message without a call", reason: "names no tool call", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			return append(items, ahp.Message{ID: "x", Role: "tool", Parts: []ahp.Part{ahp.TextPart("x.p0", "r")}})
		}},
		{desc: "tool call in a user message", reason: "cannot carry a tool call", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			items[12].Parts = append(items[12].Parts, mapping.ToolCallPart("tc", mapping.ToolCall{ID: "c", Name: "f"}))
			return items
		}},
		{desc: "withheld text", reason: "without text", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			items[12].Parts[0].Text = nil
			items[12].Parts[0].Selection = "metadata"
			return items
		}},
		{desc: "broken tool call text", reason: "tool_call text", items: func() []ahp.Message {
			return setText(req.Items, 3, 2, "{")
		}},
		{desc: "unknown role", reason: "unknown role", items: func() []ahp.Message {
			items := cloneItems(req.Items)
			return append(items, ahp.Message{ID: "q", Role: "narrator"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := c.EncodeRequest(req, tc.items())
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("err = %v, want %q", err, tc.reason)
			}
		})
	}
	t.Run("foreign request", func(t *testing.T) {
		if _, err := c.EncodeRequest(&mapping.Request{}, nil); err == nil {
			t.Error("no error for a request another translator decoded")
		}
	})
}

func TestEncodeRequestNewToolMessageByCallID(t *testing.T) {
	c := NewChat()
	req, err := c.DecodeRequest([]byte(`{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_7","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	items := append(cloneItems(req.Items), ahp.Message{ID: "call_7", Role: "tool",
		Parts: []ahp.Part{textPart("call_7.p0", "supplied", ahp.CategoryToolResult)}})
	out, err := c.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "messages.2").Raw; got != `{"role":"tool","tool_call_id":"call_7","content":"supplied"}` {
		t.Errorf("tool message = %s", got)
	}
	// Removing the assistant's only tool call leaves content null and no tool_calls.
	items = cloneItems(req.Items)
	items[1].Parts = nil
	out, err = c.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "messages.1").Raw; got != `{"role":"assistant","content":""}` {
		t.Errorf("assistant message = %s", got)
	}
}

// Messages' part lists share backing arrays (the decoder's slab); each is capped, so a
// caller that appends to one message's parts cannot overwrite the next message's.
func TestDecodedPartListsAreIndependent(t *testing.T) {
	req, err := NewChat().DecodeRequest([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},` +
		`{"role":"user","content":"u"},{"role":"assistant","content":"a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	before := req.Items[1].Parts[0]
	req.Items[0].Parts = append(req.Items[0].Parts, ahp.TextPart("extra", "x"))
	if after := req.Items[1].Parts[0]; after.ID != before.ID || after.TextOf() != "u" {
		t.Fatalf("appending to message 0 changed message 1: %+v", after)
	}
	if len(req.Items[0].Parts) != 2 || cap(req.Items[1].Parts) != len(req.Items[1].Parts) {
		t.Fatalf("part lists are not capped: len %d, cap %d", len(req.Items[1].Parts), cap(req.Items[1].Parts))
	}
}
