package anthropic_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

func TestDecodeRequestBlocks(t *testing.T) {
	const png = `"source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}` // "hello"
	tests := []struct {
		desc        string
		body        string
		want        string
		promptStart int
		gaps        int
	}{
		{
			desc:        "string content",
			body:        `{"messages":[{"role":"user","content":"hi"}]}`,
			want:        `user{text "hi"}`,
			promptStart: 0,
		},
		{
			desc:        "string system first",
			body:        `{"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
			want:        `system{text "be brief"} user{text "hi"}`,
			promptStart: 1,
		},
		{
			desc:        "system blocks become one system message",
			body:        `{"system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`,
			want:        `system{text "a"; text "b"} user{text "hi"}`,
			promptStart: 1,
		},
		{
			desc:        "base64 image is measured and hashed",
			body:        `{"messages":[{"role":"user","content":[{"type":"image",` + png + `},{"type":"text","text":"what is this"}]}]}`,
			want:        `user{attachment image/png metadata size=5 sha=2cf24dba; text "what is this"}`,
			promptStart: 0,
		},
		{
			desc:        "url image has no size",
			body:        `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`,
			want:        `user{attachment application/octet-stream metadata [images]}`,
			promptStart: 0,
		},
		{
			desc:        "pdf documents: base64 and url",
			body:        `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="}},{"type":"document","source":{"type":"url","url":"https://x/y.pdf"}}]}]}`,
			want:        `user{attachment application/pdf metadata size=4 sha=315d429b; attachment application/pdf metadata}`,
			promptStart: 0,
		},
		{
			desc:        "plain-text document is a text part",
			body:        `{"messages":[{"role":"user","content":[{"type":"document","title":"t","source":{"type":"text","media_type":"text/plain","data":"doc body"}}]}]}`,
			want:        `user{text "doc body"}`,
			promptStart: 0,
		},
		{
			desc: "thinking, redacted thinking and tool_use",
			body: `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[` +
				`{"type":"thinking","thinking":"plan","signature":"s"},{"type":"redacted_thinking","data":"ENC"},` +
				`{"type":"tool_use","id":"toolu_9","name":"Bash","input":{"command":"ls"}}]}]}`,
			want:        `user{text "go"} assistant{text [reasoning] "plan"; text metadata [reasoning]; text [tool_call] "{\"id\":\"toolu_9\",\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}"}`,
			promptStart: -1,
		},
		{
			desc: "tool results split out before the prompt",
			body: `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"A","input":{}},{"type":"tool_use","id":"t2","name":"B","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"one"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"x"},{"type":"text","text":"y"},{"type":"image",` + png + `}]},{"type":"text","text":"next"}]}]}`,
			want: `assistant{text [tool_call] "{\"id\":\"t1\",\"name\":\"A\",\"input\":{}}"; text [tool_call] "{\"id\":\"t2\",\"name\":\"B\",\"input\":{}}"} ` +
				`tool{text [tool_result] "one"} tool{text [tool_result] "x\ny"; attachment image/png metadata size=5 sha=2cf24dba} user{text "next"}`,
			promptStart: 3,
		},
		{
			desc:        "ends with tool results",
			body:        `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]}`,
			want:        `tool{text [tool_result] ""}`,
			promptStart: -1,
		},
		{
			desc:        "assistant prefill",
			body:        `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`,
			want:        `user{text "hi"} assistant{text "Sure:"}`,
			promptStart: -1,
		},
		{
			desc:        "consecutive user messages are one prompt",
			body:        `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
			want:        `user{text "a"} user{text "b"}`,
			promptStart: 0,
		},
		{
			desc:        "empty content stays an empty message",
			body:        `{"messages":[{"role":"user","content":[]}]}`,
			want:        `user{}`,
			promptStart: 0,
		},
		{
			desc: "unmapped blocks are gap parts",
			body: `{"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}]},` +
				`{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]}`,
			want:        `assistant{text gap; text gap} user{text gap}`,
			promptStart: 1,
			gaps:        3,
		},
		{
			// "aGVsbG8=" is "hello"; "/w==" is the byte 0xff, not UTF-8.
			desc: "text documents and search results are text; other documents attachments",
			body: `{"messages":[{"role":"user","content":[` +
				`{"type":"document","source":{"type":"base64","media_type":"text/markdown","data":"aGVsbG8="}},` +
				`{"type":"document","source":{"type":"base64","media_type":"text/plain","data":"/w=="}},` +
				`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"aGVsbG8="}},` +
				`{"type":"document","source":{"type":"content","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}},` +
				`{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"c"}]}]}]}`,
			want:        `user{text "hello"; attachment application/octet-stream metadata size=1 sha=a8100ae6; attachment application/pdf metadata size=5 sha=2cf24dba; text "a\n\nb"; text "c"}`,
			promptStart: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			req := decode(t, tt.body)
			if got := summary(req.Items); got != tt.want {
				t.Errorf("items\n got: %s\nwant: %s", got, tt.want)
			}
			if req.PromptStart != tt.promptStart {
				t.Errorf("PromptStart = %d, want %d", req.PromptStart, tt.promptStart)
			}
			if len(req.Gaps) != tt.gaps {
				t.Errorf("Gaps = %v, want %d", req.Gaps, tt.gaps)
			}
			// Every emitted message is closed and valid: ids present, part ids derived.
			for _, m := range req.Items {
				if m.ID == "" || !m.Synthesized {
					t.Errorf("message %+v: want a synthesized id", m)
				}
				for j, p := range m.Parts {
					if !strings.HasPrefix(p.ID, m.ID+".p") || p.ID != m.ID+".p"+itoa(j) {
						t.Errorf("part id %q of %q", p.ID, m.ID)
					}
				}
			}
			if got, err := tr.EncodeRequest(req, clone(req.Items)); err != nil || !bytes.Equal(got, []byte(tt.body)) {
				t.Errorf("EncodeRequest(unchanged) = %s, %v; want the original bytes", got, err)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestDecodeRequestFields(t *testing.T) {
	req := decode(t, conversation)
	if req.Model != "claude-sonnet-4-5" || req.Stream || req.SessionHint != "user-42" {
		t.Errorf("Model %q Stream %v SessionHint %q", req.Model, req.Stream, req.SessionHint)
	}
	p := gjson.ParseBytes(req.Params)
	if p.Get("messages").Exists() || p.Get("system").Exists() || p.Get("x_vendor").Raw != `{"a":1}` || p.Get("max_tokens").Int() != 1024 {
		t.Errorf("Params = %s", req.Params)
	}
	want := []mapping.ToolResult{
		{CallID: "toolu_1", ItemIndex: 3, ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`), CallFound: true},
		{CallID: "toolu_2", ItemIndex: 4, ToolName: "Read", Input: json.RawMessage(`{"path":"a.png"}`), IsError: true, CallFound: true},
	}
	if len(req.ToolResults) != len(want) {
		t.Fatalf("ToolResults = %+v", req.ToolResults)
	}
	for i, w := range want {
		g := req.ToolResults[i]
		if g.CallID != w.CallID || g.ItemIndex != w.ItemIndex || g.ToolName != w.ToolName || string(g.Input) != string(w.Input) || g.IsError != w.IsError || g.CallFound != w.CallFound {
			t.Errorf("ToolResults[%d] = %+v, want %+v", i, g, w)
		}
		if req.Items[g.ItemIndex].Role != ahp.RoleTool {
			t.Errorf("ToolResults[%d].ItemIndex points at %s", i, req.Items[g.ItemIndex].Role)
		}
	}
	if req.PromptStart != 5 {
		t.Errorf("PromptStart = %d", req.PromptStart)
	}

	orphan := decode(t, `{"stream":true,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"gone","content":"x"}]}]}`)
	if !orphan.Stream || len(orphan.ToolResults) != 1 || orphan.ToolResults[0].CallFound || orphan.ToolResults[0].ToolName != "" {
		t.Errorf("orphan result: %+v", orphan.ToolResults)
	}
}

func TestRequestIDsStableAsConversationGrows(t *testing.T) {
	turn1 := `{"system":"s","messages":[{"role":"user","content":"list files"}]}`
	turn2 := `{"system":"s","messages":[{"role":"user","content":"list files"},` +
		`{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"text","text":"continue","cache_control":{"type":"ephemeral"}}]}]}`
	// The client moved the cache breakpoint and turned the first prompt into blocks: the
	// content is the same, so every id must be too.
	turn3 := `{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"list files"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"text","text":"continue"}]},` +
		`{"role":"assistant","content":"done"},{"role":"user","content":[{"type":"text","text":"continue","cache_control":{"type":"ephemeral"}}]}]}`

	r1, r2, r3 := decode(t, turn1), decode(t, turn2), decode(t, turn3)
	ids := func(r *mapping.Request) []string {
		var out []string
		for _, m := range r.Items {
			out = append(out, m.ID)
			for _, p := range m.Parts {
				out = append(out, p.ID)
			}
		}
		return out
	}
	i1, i2, i3 := ids(r1), ids(r2), ids(r3)
	for i := range i1 {
		if i1[i] != i2[i] {
			t.Errorf("turn1→2 id %d: %s != %s", i, i1[i], i2[i])
		}
	}
	for i := range i2 {
		if i2[i] != i3[i] {
			t.Errorf("turn2→3 id %d: %s != %s", i, i2[i], i3[i])
		}
	}
	// The same text at another position is another message.
	seen := map[string]bool{}
	for _, m := range r3.Items {
		if seen[m.ID] {
			t.Errorf("duplicate id %s in %s", m.ID, summary(r3.Items))
		}
		seen[m.ID] = true
	}
	if again := decode(t, turn3); strings.Join(ids(again), ",") != strings.Join(i3, ",") {
		t.Error("ids are not deterministic")
	}
}

func TestEncodeRequest(t *testing.T) {
	tests := []struct {
		desc string
		body string
		edit func(t *testing.T, items []ahp.Message) []ahp.Message
		// want is the exact expected body; wantFn checks what cannot be spelled out.
		want   string
		wantFn func(t *testing.T, out []byte)
		// view: the edit hides content (a metadata view), so the re-decoded texts differ.
		view bool
	}{
		{
			desc: "changed user text patches only that text",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[5].Parts[0].Text = ptr("now summarize <b>&</b>")
				return items
			},
			want: strings.Replace(conversation, `"now summarize"`, `"now summarize <b>&</b>"`, 1),
		},
		{
			desc: "string tool result keeps tool_use_id and unknown fields",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[find(t, items, "tool", 0)].Parts[0].Text = ptr("[redacted]")
				return items
			},
			want: strings.Replace(conversation, `"content":"a.png\nb.txt"`, `"content":"[redacted]"`, 1),
		},
		{
			desc: "array tool result: text replaced, image and is_error kept",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[find(t, items, "tool", 1)].Parts[0].Text = ptr("withheld")
				return items
			},
			want: strings.Replace(conversation, `{"type":"text","text":"binary"}`, `{"type":"text","text":"withheld"}`, 1),
		},
		{
			desc: "tool result attachment removed",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				i := find(t, items, "tool", 1)
				items[i].Parts = items[i].Parts[:1]
				return items
			},
			want: strings.Replace(conversation, `,{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}}`, ``, 1),
		},
		{
			desc: "tool result: removing one image keeps the client's block order",
			body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://a"}},{"type":"text","text":"x"},{"type":"image","source":{"type":"url","url":"https://b"}}]}]}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				if got := summary(items); got != `tool{text [tool_result] "x"; attachment application/octet-stream metadata [images]; attachment application/octet-stream metadata [images]}` {
					t.Fatalf("decoded %s", got)
				}
				items[0].Parts = items[0].Parts[:2]
				return items
			},
			want: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://a"}},{"type":"text","text":"x"}]}]}]}`,
		},
		{
			desc: "tool result rebuilt by tool.after with a new text part id",
			body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://a"}},{"type":"text","text":"x"}]}]}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				text := ahp.TextPart(items[0].ID+".0", "y")
				text.Category = ahp.CategoryToolResult
				items[0].Parts = []ahp.Part{text, items[0].Parts[1]}
				return items
			},
			want: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"y"},{"type":"image","source":{"type":"url","url":"https://a"}}]}]}]}`,
		},
		{
			desc: "regrouping: removing the first result keeps [tool, user] in one message",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				return append(items[:3], items[4:]...)
			},
			want: strings.Replace(conversation, `{"type":"tool_result","tool_use_id":"toolu_1","content":"a.png\nb.txt","x_res":[1]},`, ``, 1),
		},
		{
			desc: "regrouping: reordered items stay in one native message in the new order",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[3], items[4] = items[4], items[3]
				return items
			},
			wantFn: func(t *testing.T, out []byte) {
				msgs := gjson.GetBytes(out, "messages").Array()
				if len(msgs) != 3 {
					t.Fatalf("messages: %s", gjson.GetBytes(out, "messages").Raw)
				}
				ids := gjson.Get(msgs[2].Raw, "content.#.tool_use_id").Raw
				if ids != `["toolu_2","toolu_1"]` {
					t.Errorf("order = %s", ids)
				}
			},
		},
		{
			desc: "assistant text change keeps the signed thinking block and tool_use bytes",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[2].Parts[1].Text = ptr("Running now.")
				return items
			},
			want: strings.Replace(conversation, `"Running."`, `"Running now."`, 1),
		},
		{
			desc: "tool_use input rewritten in history",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[2].Parts[2] = mapping.ToolCallPart(items[2].Parts[2].ID, mapping.ToolCall{ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{"command": "ls -la"}`)})
				return items
			},
			want: strings.Replace(conversation, `"input":{"command":"ls"}`, `"input":{"command":"ls -la"}`, 1),
		},
		{
			desc: "system text change keeps cache_control",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[0].Parts[0].Text = ptr("You are verbose.")
				return items
			},
			want: strings.Replace(conversation, `"You are terse."`, `"You are verbose."`, 1),
		},
		{
			desc: "string system stays a string",
			body: `{"system":"old","messages":[{"role":"user","content":"hi"}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[0].Parts[0].Text = ptr("new")
				return items
			},
			want: `{"system":"new","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			desc: "string user content stays a string",
			body: `{"messages":[ {"role":"user","content":"hi"} ]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[0].Parts[0].Text = ptr("hello")
				return items
			},
			want: `{"messages":[ {"role":"user","content":"hello"} ]}`,
		},
		{
			desc: "system removed",
			body: `{"system":"old","messages":[{"role":"user","content":"hi"}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message { return items[1:] },
			want: `{"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			desc: "leading injected developer message joins the system prompt",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				inj := ahp.Message{ID: "inj-1", Role: ahp.RoleDeveloper, Parts: []ahp.Part{ahp.TextPart("inj-1.p0", "Never run rm.")}}
				return append(items[:1], append([]ahp.Message{inj}, items[1:]...)...)
			},
			want: strings.Replace(conversation, `"cache_control":{"type":"ephemeral"}}]`, `"cache_control":{"type":"ephemeral"}},{"type":"text","text":"Never run rm."}]`, 1),
		},
		{
			desc: "injected user context after the prompt merges into the last user message",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				return append(items, ahp.Message{ID: "inj-2", Role: ahp.RoleUser, Parts: []ahp.Part{ahp.TextPart("inj-2.p0", "Note: repo is read-only.")}})
			},
			want: strings.Replace(conversation, `"x_unknown":{"b":2}}]}]}`, `"x_unknown":{"b":2}},{"type":"text","text":"Note: repo is read-only."}]}]}`, 1),
		},
		{
			desc: "system message injected mid-conversation is a wrapped user block",
			body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				inj := ahp.Message{ID: "inj-3", Role: ahp.RoleSystem, Parts: []ahp.Part{ahp.TextPart("inj-3.p0", "be safe")}}
				return append(items[:2], append([]ahp.Message{inj}, items[2:]...)...)
			},
			want: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"<system-message>\nbe safe\n</system-message>"},{"type":"text","text":"c"}]}]}`,
		},
		{
			desc: "removing an assistant message merges the neighbours so roles alternate",
			body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"c","x":1}]}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message { return []ahp.Message{items[0], items[2]} },
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"c","x":1}]}]}`,
		},
		{
			desc: "adjacent user messages of the client stay separate",
			body: `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[1].Parts[0].Text = ptr("B")
				return items
			},
			want: `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"B"}]}`,
		},
		{
			desc: "new assistant tool call is rendered as tool_use",
			body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[1].Parts = append(items[1].Parts, mapping.ToolCallPart("new.p0", mapping.ToolCall{ID: "toolu_x", Name: "T", Input: json.RawMessage(`{"k":"<v>"}`)}))
				return items
			},
			want: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"},{"type":"tool_use","id":"toolu_x","name":"T","input":{"k":"<v>"}}]}]}`,
		},
		{
			desc: "emptied text block is dropped, not sent empty",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"secret"},{"type":"text","text":"keep"}]}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[0].Parts[0].Text = ptr("")
				return items
			},
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"keep"}]}]}`,
		},
		{
			desc: "metadata view of a part keeps the original block",
			body: conversation,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[2].Parts[0].Selection, items[2].Parts[0].Text = ahp.SelectionMetadata, nil
				items[2].Parts[1].Text = ptr("x")
				return items
			},
			want: strings.Replace(conversation, `"Running."`, `"x"`, 1),
			view: true,
		},
		{
			desc: "text document rewritten in source.data",
			body: `{"messages":[{"role":"user","content":[{"type":"document","title":"t","source":{"type":"text","media_type":"text/plain","data":"key=SECRET"}}]}]}`,
			edit: func(t *testing.T, items []ahp.Message) []ahp.Message {
				items[0].Parts[0].Text = ptr("key=***")
				return items
			},
			want: `{"messages":[{"role":"user","content":[{"type":"document","title":"t","source":{"type":"text","media_type":"text/plain","data":"key=***"}}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			req := decode(t, tt.body)
			orig := append([]byte(nil), req.Original...)
			items := tt.edit(t, clone(req.Items))
			out, err := tr.EncodeRequest(req, items)
			if err != nil {
				t.Fatalf("EncodeRequest: %v", err)
			}
			if !bytes.Equal(req.Original, orig) {
				t.Fatal("EncodeRequest modified the original body")
			}
			if tt.want != "" && string(out) != tt.want {
				t.Errorf("body\n got: %s\nwant: %s", out, tt.want)
			}
			if tt.wantFn != nil {
				tt.wantFn(t, out)
			}
			// The result is a valid request whose canonical view is the edit.
			again, err := tr.DecodeRequest(out)
			if err != nil {
				t.Fatalf("re-decode: %v\n%s", err, out)
			}
			if got, want := texts(again.Items), texts(items); got != want && !tt.view {
				t.Errorf("re-decoded texts\n got: %s\nwant: %s", got, want)
			}
		})
	}
}

// texts lists the non-empty texts of items in order, with system/developer messages
// (which may be re-rendered as wrapped user text) reduced to their content.
func texts(items []ahp.Message) string {
	var out []string
	for _, m := range items {
		for _, p := range m.Parts {
			if t := p.TextOf(); t != "" {
				if p.Category == ahp.CategoryToolCall {
					var c mapping.ToolCall
					_ = json.Unmarshal([]byte(t), &c)
					t = c.ID + " " + c.Name + " " + string(mustCompact(c.Input))
				}
				t = strings.TrimSuffix(strings.TrimPrefix(t, "<system-message>\n"), "\n</system-message>")
				out = append(out, t)
			}
		}
	}
	return strings.Join(out, "|")
}

func mustCompact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func TestEncodeRequestUnchanged(t *testing.T) {
	for _, body := range []string{conversation, `{"messages":[]}`, "{\n  \"messages\": [ {\"role\": \"user\", \"content\": \"hi\"} ]\n}"} {
		req := decode(t, body)
		for _, items := range [][]ahp.Message{req.Items, clone(req.Items)} {
			out, err := tr.EncodeRequest(req, items)
			if err != nil || &out[0] != &req.Original[0] {
				t.Errorf("EncodeRequest(unchanged) = %s, %v; want req.Original itself", out, err)
			}
		}
	}
	// An edit made in a copy of the returned list (a message's parts replaced: the list and
	// its parts are shared, never written in place) is seen by change detection.
	req := decode(t, conversation)
	items := slices.Clone(req.Items)
	parts := slices.Clone(items[1].Parts)
	edited := "edited in a copy"
	parts[0].Text = &edited
	items[1].Parts = parts
	out, err := tr.EncodeRequest(req, items)
	if err != nil || !strings.Contains(string(out), "edited in a copy") {
		t.Errorf("edit lost: %s, %v", out, err)
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	tests := []struct {
		desc string
		edit func(items []ahp.Message) []ahp.Message
		want error
	}{
		{
			desc: "thinking text rewritten",
			edit: func(items []ahp.Message) []ahp.Message {
				items[2].Parts[0].Text = ptr("other plan")
				return items
			},
			want: anthropic.ErrReasoningImmutable,
		},
		{
			desc: "reasoning invented",
			edit: func(items []ahp.Message) []ahp.Message {
				p := ahp.TextPart("new.r", "invented")
				p.Category = ahp.CategoryReasoning
				items[2].Parts = append(items[2].Parts, p)
				return items
			},
			want: anthropic.ErrReasoningImmutable,
		},
		{
			desc: "new attachment",
			edit: func(items []ahp.Message) []ahp.Message {
				items[5].Parts = append(items[5].Parts, ahp.Part{ID: "new.a", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionMetadata})
				return items
			},
		},
		{
			desc: "new tool message without a native result",
			edit: func(items []ahp.Message) []ahp.Message {
				return append(items, ahp.Message{ID: "x", Role: ahp.RoleTool, Parts: []ahp.Part{ahp.TextPart("x.p0", "r")}})
			},
		},
		{
			desc: "unknown role",
			edit: func(items []ahp.Message) []ahp.Message {
				items[5].Role = "narrator"
				return items
			},
		},
		{
			desc: "malformed tool call",
			edit: func(items []ahp.Message) []ahp.Message {
				items[2].Parts[2].Text = ptr("not json")
				return items
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			req := decode(t, conversation)
			out, err := tr.EncodeRequest(req, tt.edit(clone(req.Items)))
			if err == nil {
				t.Fatalf("EncodeRequest = %s, want an error", out)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := tr.EncodeRequest(&mapping.Request{Original: []byte(`{}`)}, nil); err == nil {
		t.Error("EncodeRequest without Native: want an error")
	}
}

func TestDecodeRequestMalformed(t *testing.T) {
	tests := []struct {
		desc string
		body string
	}{
		{"empty", ``},
		{"not JSON", `{"messages":[`},
		{"not an object", `[1,2]`},
		{"no messages", `{"model":"m"}`},
		{"messages not an array", `{"messages":{}}`},
		{"message not an object", `{"messages":[1]}`},
		{"role not a string", `{"messages":[{"role":5,"content":"x"}]}`},
		{"missing content", `{"messages":[{"role":"user"}]}`},
		{"content number", `{"messages":[{"role":"user","content":3}]}`},
		{"block without type", `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`},
		{"text not string", `{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`},
		{"tool_use without id", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"x","input":{}}]}]}`},
		{"tool_use input not object", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":"ls"}]}]}`},
		{"tool_use in user message", `{"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]}]}`},
		{"tool_result in assistant message", `{"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`},
		{"tool_result without id", `{"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`},
		{"tool_result content number", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":1}]}]}`},
		{"system number", `{"system":1,"messages":[]}`},
		{"system image", `{"system":[{"type":"image","source":{}}],"messages":[]}`},
		{"duplicate key hides a message", `{"messages":[],"messages":[{"role":"user","content":"x"}]}`},
		{"duplicate block key", `{"messages":[{"role":"user","content":[{"type":"text","text":"ok","text":"evil"}]}]}`},
		{"escaped key", `{"messages":[{"role":"user","content":[{"type":"text","te\u0078t":"x"}]}]}`},
		{"invalid UTF-8", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}"},
		{"too deep", `{"messages":[],"x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			req, err := tr.DecodeRequest([]byte(tt.body))
			var bad *mapping.BadRequest
			if !errors.As(err, &bad) || bad.Reason == "" {
				t.Fatalf("DecodeRequest = %+v, %v; want *mapping.BadRequest", req, err)
			}
		})
	}
}

// claudeCodeRequest is shaped like what Claude Code 2.x sends: its environment block as a
// "system" entry inside messages (with cache_control), thinking, context_management,
// output_config and metadata.user_id.
const claudeCodeRequest = `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,` +
	`"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],` +
	`"messages":[{"role":"system","content":[{"type":"text","text":"<env>cwd: /repo, token AKIAIOSFODNN7EXAMPLE</env>","cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"user","content":[{"type":"text","text":"list the files"}]}],` +
	`"thinking":{"type":"enabled","budget_tokens":31999},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` +
	`"output_config":{"effort":"high"},"metadata":{"user_id":"user_abc_account__session_123"},"tools":[]}`

func TestDecodeRequestForeignRoles(t *testing.T) {
	// A role other than user and assistant inside messages is carried, never refused: its
	// text is canonical content, and it renders back under its own role.
	req := decode(t, claudeCodeRequest)
	k := find(t, req.Items, ahp.RoleSystem, 1) // the second system message: the first is the top-level prompt
	if got := req.Items[k].Parts[0].TextOf(); !strings.Contains(got, "AKIAIOSFODNN7EXAMPLE") {
		t.Fatalf("system entry text %q", got)
	}
	if got, err := tr.EncodeRequest(req, clone(req.Items)); err != nil || !bytes.Equal(got, []byte(claudeCodeRequest)) {
		t.Fatalf("EncodeRequest(unchanged) = %s, %v; want the original bytes", got, err)
	}
	items := clone(req.Items)
	redacted := strings.Replace(items[k].Parts[0].TextOf(), "AKIAIOSFODNN7EXAMPLE", "[REDACTED]", 1)
	items[k].Parts[0].Text = &redacted
	got, err := tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	m := gjson.GetBytes(got, "messages.0")
	if m.Get("role").String() != "system" || m.Get("content.0.text").String() != "<env>cwd: /repo, token [REDACTED]</env>" ||
		m.Get("content.0.cache_control.type").String() != "ephemeral" || strings.Contains(string(got), "AKIA") {
		t.Fatalf("re-rendered %s", got)
	}
	if gjson.GetBytes(got, "context_management").Raw != `{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}` {
		t.Errorf("unknown fields changed: %s", got)
	}
	// An unknown role reads as user text, with a gap saying so.
	r2 := decode(t, `{"model":"m","max_tokens":1,"messages":[{"role":"critic","content":"be brief"},{"role":"user","content":"hi"}]}`)
	if r2.Items[0].Role != ahp.RoleUser || len(r2.Gaps) != 1 || !strings.Contains(r2.Gaps[0].Reason, `"critic"`) {
		t.Errorf("unknown role: %+v gaps %+v", r2.Items[0], r2.Gaps)
	}
}
