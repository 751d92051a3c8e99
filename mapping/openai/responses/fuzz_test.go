package responses

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// The fuzz targets run in CI for a few seconds each (.ci/fuzz-targets); their committed seed
// corpus is the f.Add seeds plus testdata/fuzz/<FuzzName>/.

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		fullRequest,
		`{"input":"hi"}`,
		`{"model":"m","instructions":"sys","input":[],"stream":true,"previous_response_id":"resp_1"}`,
		`{"input":[{"type":"function_call","call_id":"a","name":"f","arguments":"{\"x\":[1,2]}"},{"type":"function_call_output","call_id":"a","output":[{"type":"input_text","text":"r"},{"type":"input_file","file_data":"aGk=","filename":"a.md"}]}]}`,
		`{"input":[{"type":"reasoning","id":"rs","summary":[],"content":[{"type":"reasoning_text","text":"t"}],"encrypted_content":"e"},{"type":"item_reference","id":"x"}]}`,
		`{"input":[{"role":"user","content":"a","content":"b"}]}`,
		toolItemsRequest,
		`{"input":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"*** Begin Patch"},{"type":"custom_tool_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"}]},{"type":"local_shell_call","call_id":"l","action":{"type":"exec","command":"ls"}},{"type":"local_shell_call_output","call_id":"l","output":"x"},{"type":"shell_call","call_id":"s","action":{}},{"type":"shell_call_output","call_id":"s","output":[]}]}`,
	} {
		f.Add([]byte(s))
	}
	tr := New()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := tr.DecodeRequest(body)
		if err != nil {
			var br *mapping.BadRequest
			if !errors.As(err, &br) || br.Reason == "" {
				t.Fatalf("error is not a *mapping.BadRequest with a reason: %v", err)
			}
			return
		}
		if req.PromptStart >= len(req.Items) {
			t.Fatalf("prompt start %d of %d items", req.PromptStart, len(req.Items))
		}
		for _, r := range req.ToolResults {
			if r.ItemIndex < 0 || r.ItemIndex >= len(req.Items) || req.Items[r.ItemIndex].Role != ahp.RoleTool {
				t.Fatalf("tool result %+v does not point at a tool message", r)
			}
		}
		checkSchema(t, req.Items)
		out, err := tr.EncodeRequest(req, cloneItems(req.Items))
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("unchanged items: err %v, same bytes %v", err, bytes.Equal(out, body))
		}
		// Every text part can be edited; the edit renders, decodes again and is what the
		// model sees.
		const edit = "fuzz <&> \u2028 edit"
		for i := range req.Items {
			for j := range req.Items[i].Parts {
				p := &req.Items[i].Parts[j]
				if p.Kind != ahp.KindText || p.Text == nil || noChunks(req, p.ID) {
					continue
				}
				want := edit
				text := edit
				if c, ok := mapping.ParseToolCall(p); ok {
					// An input each call type can carry (tools.go).
					in, w := `{"fuzz":"<&>"}`, `"fuzz":`
					if o := req.Native.(*requestState).calls[p.ID]; o != nil {
						if fi, ok := fuzzInputs[o.typ]; ok {
							in, w = fi, "fuzz <&>"
						}
					}
					cp := mapping.ToolCallPart(p.ID, mapping.ToolCall{ID: c.ID, Name: c.Name, Input: []byte(in)})
					text = cp.TextOf()
					want = w
				}
				out, err := tr.EncodeRequest(req, setText(req.Items, i, j, text))
				if err != nil {
					t.Fatalf("edit of part %s: %v", p.ID, err)
				}
				again, err := tr.DecodeRequest(out)
				if err != nil {
					t.Fatalf("edited body does not decode: %v\n%s", err, out)
				}
				if !containsText(again.Items, want) {
					t.Fatalf("edit of part %s is not in the rendered body:\n%s", p.ID, out)
				}
			}
		}
		// Removing any one message renders (or is refused) without a panic.
		for i := range req.Items {
			items := append(cloneItems(req.Items[:i]), cloneItems(req.Items[i+1:])...)
			if out, err := tr.EncodeRequest(req, items); err == nil {
				if _, err := tr.DecodeRequest(out); err != nil {
					t.Fatalf("body without message %d does not decode: %v\n%s", i, err, out)
				}
			}
		}
	})
}

// noChunks reports whether part id is the text of a shell_call_output without output
// chunks, which has nowhere to put text (writeShellOutput refuses to invent an outcome).
func noChunks(req *mapping.Request, id string) bool {
	st := req.Native.(*requestState)
	o := st.parts[id]
	return o != nil && o.src == srcShellOutput && len(arrayOf(gjson.Get(st.items[o.item].raw, "output"))) == 0
}

// fuzzInputs are edited inputs of the call types whose input has a fixed shape.
var fuzzInputs = map[string]string{
	"custom_tool_call": `{"input":"fuzz <&>"}`,
	"local_shell_call": `{"command":"echo 'fuzz <&>'"}`,
	"shell_call":       `{"command":"echo 'fuzz <&>'"}`,
	"apply_patch_call": `{"type":"delete_file","path":"fuzz <&>"}`,
	"computer_call":    `{"action":{"type":"type","text":"fuzz <&>"}}`,
}

// containsText reports whether some part's text contains s.
func containsText(items []ahp.Message, s string) bool {
	for _, m := range items {
		for _, p := range m.Parts {
			if strings.Contains(p.TextOf(), s) {
				return true
			}
		}
	}
	return false
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		toolResponse,
		`{"id":"r","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`,
		`{"error":{"message":"m","type":"t","code":"c"}}`,
		`{"output":[{"type":"message","content":[{"type":"refusal","refusal":"no"},{"type":"output_text","text":"x","annotations":[{"type":"url_citation"}]}]}]}`,
		toolItemsResponse,
		`{"output":[{"type":"custom_tool_call","name":"n","input":"i"},{"type":"local_shell_call","action":{"type":"exec","command":["ls"]}},{"type":"shell_call","action":{"commands":[]},"environment":{"type":"container_reference"}},{"type":"apply_patch_call","operation":null},{"type":"computer_call"}]}`,
	} {
		f.Add([]byte(s))
	}
	tr := New()
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := tr.DecodeResponse(body)
		mappingtest.CheckScreen(t, tr, body, resp, err)
		if err != nil {
			var ue *mapping.UpstreamError
			if !errors.Is(err, mapping.ErrMalformed) && !errors.As(err, &ue) {
				t.Fatalf("error is neither ErrMalformed nor an upstream error: %v", err)
			}
			return
		}
		checkSchema(t, resp.Items)
		out, err := tr.EncodeResponse(resp, cloneItems(resp.Items), "")
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("unchanged: err %v, same bytes %v", err, bytes.Equal(out, body))
		}
		// Removing every tool call (what a denial does) renders a response without them.
		items := cloneItems(resp.Items)
		var kept []ahp.Part
		for _, p := range items[0].Parts {
			if _, ok := mapping.ParseToolCall(&p); !ok {
				kept = append(kept, p)
			}
		}
		items[0].Parts = kept
		out, err = tr.EncodeResponse(resp, items, tr.TerminalFinishReason())
		if err != nil {
			t.Fatalf("removing the tool calls: %v", err)
		}
		again, err := tr.DecodeResponse(out)
		if err != nil || len(mapping.ToolCalls(again.Items)) != 0 {
			t.Fatalf("rendered: err %v\n%s", err, out)
		}
		var buf bytes.Buffer
		if err := tr.WriteStream(&buf, out); err != nil {
			t.Fatalf("WriteStream: %v", err)
		}
	})
}

func FuzzAssembler(f *testing.F) {
	for _, s := range []string{
		toolStream,
		"event: error\ndata: {\"type\":\"error\",\"code\":\"c\",\"message\":\"m\"}\n\n",
		"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\"}}\r\n\r\n",
		toolStream[:len(toolStream)/3],
		customToolStream,
		customToolStream[:len(customToolStream)/2],
	} {
		f.Add([]byte(s), uint8(7))
	}
	tr := New()
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		a := tr.NewAssembler()
		n := int(chunk) + 1
		for rest := stream; len(rest) > 0; {
			k := min(n, len(rest))
			if w, err := a.Write(rest[:k]); w != k || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			rest = rest[k:]
		}
		body, err := a.Body()
		if err != nil {
			return
		}
		resp, err := tr.DecodeResponse(body)
		if err != nil {
			return // an assembled body can still be something the decoder refuses
		}
		// What the assembler yields streams out and assembles back to the same response.
		var buf bytes.Buffer
		if err := tr.WriteStream(&buf, body); err != nil {
			t.Fatalf("WriteStream of an assembled body: %v", err)
		}
		a2 := tr.NewAssembler()
		a2.Write(buf.Bytes())
		body2, err := a2.Body()
		if err != nil {
			t.Fatalf("re-assembling: %v", err)
		}
		resp2, err := tr.DecodeResponse(body2)
		if err != nil || !reflect.DeepEqual(resp.Items, resp2.Items) || resp.FinishReason != resp2.FinishReason {
			t.Fatalf("round trip changed the response: %v\n%s\n%s", err, body, body2)
		}
	})
}
