package responses

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestComputerCallOutputCurrentURL: the page URL a browser harness sends with a screenshot
// (in the output object or on the item) is tool_result text; an edited URL is written back
// where it came from, a removed one is removed, and the screenshot stays byte for byte.
func TestComputerCallOutputCurrentURL(t *testing.T) {
	const shot = `{"type":"computer_screenshot","image_url":"data:image/png;base64,iVBORw0KGgo="`
	call := `{"type":"computer_call","call_id":"c1","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"}`
	for _, tc := range []struct{ name, item, path string }{
		{"in output", `{"type":"computer_call_output","call_id":"c1","output":` + shot + `,"current_url":"https://u:pw@a.example/x"}}`, "output.current_url"},
		{"on the item", `{"type":"computer_call_output","call_id":"c1","output":` + shot + `},"current_url":"https://u:pw@a.example/x"}`, "current_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"computer-use-preview","input":[` + call + `,` + tc.item + `]}`
			req := mustDecode(t, body)
			tool := req.Items[1]
			if len(tool.Parts) != 2 || tool.Parts[1].TextOf() != "https://u:pw@a.example/x" || tool.Parts[1].Category != "tool_result" {
				t.Fatalf("tool parts = %+v", tool.Parts)
			}
			out, err := New().EncodeRequest(req, setText(req.Items, 1, 1, "https://u:[REDACTED]@a.example/x"))
			if err != nil {
				t.Fatal(err)
			}
			item := gjson.GetBytes(out, "input.1")
			if got := item.Get(tc.path).String(); got != "https://u:[REDACTED]@a.example/x" {
				t.Fatalf("%s = %q in %s", tc.path, got, out)
			}
			if strings.Contains(string(out), ":pw@") || !strings.Contains(item.Get("output").Raw, `"image_url":"data:image/png;base64,iVBORw0KGgo="`) {
				t.Fatalf("rendered %s", out)
			}
			// Dropping the URL part removes the URL; the screenshot stays.
			items := cloneItems(req.Items)
			items[1].Parts = slices.Delete(items[1].Parts, 1, 2)
			out, err = New().EncodeRequest(req, items)
			if err != nil {
				t.Fatal(err)
			}
			if gjson.GetBytes(out, "input.1."+tc.path).Exists() || !gjson.GetBytes(out, "input.1.output.image_url").Exists() {
				t.Fatalf("after removal: %s", out)
			}
		})
	}
}
