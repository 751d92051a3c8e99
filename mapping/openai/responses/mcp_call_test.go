package responses

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

const mcpCallBody = `{"model":"gpt-5","input":[{"role":"user","content":"read it"},` +
	`{"type":"mcp_call","id":"mcp_1","server_label":"vault","name":"read_secret","arguments":"{\"path\": \"deploy\"}","output":"key AKIA-1","error":"token ghp-2 expired","status":"completed","x_unknown":[1]},` +
	`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}]}`

// An mcp_call input item is a tool result: a tool message under the item's id with its
// output and error text, joined with the call's name and arguments.
func TestDecodeRequestMCPCallIsAToolResult(t *testing.T) {
	req := mustDecode(t, mcpCallBody)
	checkSchema(t, req.Items)
	if len(req.Items) != 3 || req.Items[1].Role != ahp.RoleTool || req.Items[1].ID != "mcp_1" {
		t.Fatalf("items: %+v", req.Items)
	}
	if got := summarize(req.Items[1].Parts); len(got) != 2 || got[0] != catText(ahp.CategoryToolResult, "key AKIA-1") || got[1] != catText(ahp.CategoryToolResult, "token ghp-2 expired") {
		t.Errorf("parts: %+v", got)
	}
	if len(req.ToolResults) != 1 {
		t.Fatalf("tool results: %+v", req.ToolResults)
	}
	r := req.ToolResults[0]
	if r.CallID != "mcp_1" || r.ItemIndex != 1 || r.ToolName != "read_secret" || !r.CallFound || !r.IsError || string(r.Input) != `{"path":"deploy"}` {
		t.Errorf("tool result: %+v (input %s)", r, r.Input)
	}
	for _, g := range req.Gaps {
		if strings.Contains(g.Reason, "mcp_call") {
			t.Errorf("the mcp_call is still named a gap: %+v", g)
		}
	}
	// No output and no error: one empty result, not an error.
	req = mustDecode(t, `{"model":"gpt-5","input":[{"type":"mcp_call","id":"mcp_2","name":"ping","arguments":"x","output":null,"error":null}]}`)
	if r := req.ToolResults[0]; r.IsError || string(r.Input) != `{}` || len(req.Items[0].Parts) != 1 || req.Items[0].Parts[0].TextOf() != "" {
		t.Errorf("empty mcp_call: %+v %+v", r, req.Items)
	}
	for _, bad := range []string{`"output":{"a":1}`, `"error":{"message":"x"}`} {
		if _, err := New().DecodeRequest([]byte(`{"model":"m","input":[{"type":"mcp_call","id":"x",` + bad + `}]}`)); err == nil {
			t.Errorf("an mcp_call with %s was accepted", bad)
		}
	}
}

// An edited result goes back into output and error; every other member of the item stays
// byte for byte, and an unchanged list is the original body.
func TestEncodeRequestMCPCall(t *testing.T) {
	tr := New()
	req := mustDecode(t, mcpCallBody)
	if out, err := tr.EncodeRequest(req, req.Items); err != nil || string(out) != mcpCallBody {
		t.Fatalf("unchanged: %s %v", out, err)
	}
	items := setText(setText(ahp.CloneMessages(req.Items), 1, 0, "key [REDACTED]"), 1, 1, "token [REDACTED] expired")
	out, err := tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"mcp_call","id":"mcp_1","server_label":"vault","name":"read_secret","arguments":"{\"path\": \"deploy\"}","output":"key [REDACTED]","error":"token [REDACTED] expired","status":"completed","x_unknown":[1]}`
	if got := gjson.GetBytes(out, "input.1").Raw; got != want {
		t.Errorf("rendered:\n got %s\nwant %s", got, want)
	}
	// A policy that replaces the whole result with one text: the error is cleared, not left
	// behind with what the policy took out.
	items = ahp.CloneMessages(req.Items)
	items[1].Parts = items[1].Parts[:1]
	items = setText(items, 1, 0, "withheld")
	out, err = tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "input.1"); got.Get("output").String() != "withheld" || got.Get("error").Type != gjson.Null {
		t.Errorf("rendered: %s", got.Raw)
	}
	// A failed call without output: its one part is the error, and an edit goes back there.
	failed := `{"model":"gpt-5","input":[{"type":"mcp_call","id":"mcp_3","name":"push","arguments":"{}","output":null,"error":"token ghp-2 expired","status":"failed"}]}`
	req3 := mustDecode(t, failed)
	if got := summarize(req3.Items[0].Parts); len(got) != 1 || got[0] != catText(ahp.CategoryToolResult, "token ghp-2 expired") || !req3.ToolResults[0].IsError {
		t.Fatalf("failed call parts: %+v", got)
	}
	out, err = tr.EncodeRequest(req3, setText(ahp.CloneMessages(req3.Items), 0, 0, "token [REDACTED] expired"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "input.0").Raw; got != `{"type":"mcp_call","id":"mcp_3","name":"push","arguments":"{}","output":null,"error":"token [REDACTED] expired","status":"failed"}` {
		t.Errorf("rendered failed call: %s", got)
	}
	// Attachments cannot be written into an mcp_call.
	items = ahp.CloneMessages(req.Items)
	items[1].Parts = append(items[1].Parts, ahp.Part{ID: "new", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionMetadata})
	if _, err := tr.EncodeRequest(req, items); err == nil {
		t.Error("an attachment was rendered into an mcp_call")
	}
}
