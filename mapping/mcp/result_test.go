package mcp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestMCPParseResult(t *testing.T) {
	tests := []struct {
		desc           string
		raw            string
		server, policy bool // valid as a server result / as a supplied result
	}{
		{desc: "text", raw: `{"content":[{"type":"text","text":"hi"}]}`, server: true, policy: true},
		{desc: "empty content", raw: `{"content":[]}`, server: true, policy: true},
		{desc: "error flag", raw: `{"content":[{"type":"text","text":"boom"}],"isError":true}`, server: true, policy: true},
		{desc: "all known items", raw: `{"content":[{"type":"image","data":"AAE=","mimeType":"image/png"},{"type":"audio","data":"","mimeType":"audio/wav"},` +
			`{"type":"resource","resource":{"uri":"file:///a","text":"t"}},{"type":"resource_link","uri":"file:///b","name":"b"}]}`, server: true, policy: true},
		{desc: "unknown item type", raw: `{"content":[{"type":"hologram","x":1}]}`, server: true},
		{desc: "input required (SEP-2322)", raw: `{"resultType":"input_required","inputRequests":{}}`, server: true},
		{desc: "not an object", raw: `[1]`},
		{desc: "not JSON", raw: `{"content":`},
		{desc: "no content", raw: `{"structuredContent":{}}`},
		{desc: "content not an array", raw: `{"content":"text"}`},
		{desc: "isError not a boolean", raw: `{"content":[],"isError":"yes"}`},
		{desc: "text item without text", raw: `{"content":[{"type":"text"}]}`},
		{desc: "item without type", raw: `{"content":[{"text":"x"}]}`},
		{desc: "image without data", raw: `{"content":[{"type":"image","mimeType":"image/png"}]}`},
		{desc: "resource without body", raw: `{"content":[{"type":"resource","resource":{"uri":"x"}}]}`},
		{desc: "duplicate content", raw: `{"content":[],"content":[{"type":"text","text":"hidden"}]}`},
		{desc: "case variant of content", raw: `{"content":[],"Content":[{"type":"text","text":"hidden"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ParseResult([]byte(tc.raw))
			if (err == nil) != tc.server {
				t.Errorf("ParseResult err = %v, want valid=%v", err, tc.server)
			}
			_, err = ParseSupplied([]byte(tc.raw))
			if (err == nil) != tc.policy {
				t.Errorf("ParseSupplied err = %v, want valid=%v", err, tc.policy)
			}
		})
	}
}

func TestMCPNewOutputItems(t *testing.T) {
	raw := `{"content":[` +
		`{"type":"text","text":"hello","annotations":{"audience":["user"]}},` +
		`{"type":"image","data":"aGVsbG8=","mimeType":"image/png"},` +
		`{"type":"audio","data":"aGVsbG8=","mimeType":"text/plain"},` +
		`{"type":"resource","resource":{"uri":"file:///n.txt","mimeType":"text/plain","text":"notes"}},` +
		`{"type":"resource","resource":{"uri":"file:///b.bin","blob":"aGVsbG8="}},` +
		`{"type":"resource_link","uri":"file:///l","name":"l"}` +
		`],"structuredContent":{"n":1},"isError":true}`
	r, err := ParseResult([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError {
		t.Error("isError not read")
	}
	o := NewOutput("res", r)
	if len(o.Items) != 1 || o.Items[0].Role != ahp.RoleTool || o.Items[0].ID != "res" || !o.Items[0].Synthesized {
		t.Fatalf("items = %+v", o.Items)
	}
	parts := o.Items[0].Parts
	if len(parts) != 7 {
		t.Fatalf("%d parts, want 7", len(parts))
	}
	sum := sha256.Sum256([]byte("hello"))
	hash := hex.EncodeToString(sum[:])
	wantText := map[int]string{0: "hello", 3: "notes", 5: `{"type":"resource_link","uri":"file:///l","name":"l"}`, 6: `{"n":1}`}
	for i, p := range parts {
		if text, ok := wantText[i]; ok {
			if p.Kind != ahp.KindText || p.TextOf() != text || p.Category != ahp.CategoryToolResult || p.Selection != ahp.SelectionBody {
				t.Errorf("part %d = %+v, want tool_result text %q", i, p, text)
			}
			continue
		}
		if p.Kind != ahp.KindAttachment || p.Selection != ahp.SelectionMetadata || p.Size == nil || *p.Size != 5 || p.SHA256 != hash || p.Category != "" {
			t.Errorf("part %d = %+v, want a metadata attachment of 5 bytes", i, p)
		}
	}
	if parts[1].MediaType != "image/png" || parts[2].MediaType != octetStream || parts[4].MediaType != octetStream {
		t.Errorf("media types = %s %s %s", parts[1].MediaType, parts[2].MediaType, parts[4].MediaType)
	}
	if parts[6].ID != "res.structured" || parts[0].ID != "res.c0" {
		t.Errorf("part ids = %s %s", parts[0].ID, parts[6].ID)
	}
}

// edit returns a copy of items with fn applied to the single message's parts.
func edit(items []ahp.Message, fn func(parts []ahp.Part) []ahp.Part) []ahp.Message {
	out := make([]ahp.Message, len(items))
	copy(out, items)
	out[0].Parts = fn(append([]ahp.Part(nil), items[0].Parts...))
	return out
}

func setText(p ahp.Part, text string) ahp.Part { p.Text = &text; return p }

func TestMCPApply(t *testing.T) {
	const raw = `{"content":[{"type":"text","text":"key=sk-123","annotations":{"priority":1}},{"type":"image","data":"AAE=","mimeType":"image/png"},` +
		`{"type":"resource","resource":{"uri":"file:///a","text":"sk-123 again"}}],"structuredContent":{"key":"sk-123"},"_meta":{"m":1}}`
	tests := []struct {
		desc string
		fn   func(parts []ahp.Part) []ahp.Part
		// want are gjson paths → expected raw values of the rendered result.
		want    map[string]string
		wantErr bool
	}{
		{desc: "unchanged", fn: func(p []ahp.Part) []ahp.Part { return p }, want: map[string]string{
			"content":           `[{"type":"text","text":"key=sk-123","annotations":{"priority":1}},{"type":"image","data":"AAE=","mimeType":"image/png"},{"type":"resource","resource":{"uri":"file:///a","text":"sk-123 again"}}]`,
			"structuredContent": `{"key":"sk-123"}`, "_meta": `{"m":1}`,
		}},
		{desc: "text redacted, structured left alone: structured dropped", fn: func(p []ahp.Part) []ahp.Part {
			p[0] = setText(p[0], "key=[redacted]")
			p[2] = setText(p[2], "[redacted] again")
			return p
		}, want: map[string]string{
			"content":           `[{"type":"text","text":"key=[redacted]","annotations":{"priority":1}},{"type":"image","data":"AAE=","mimeType":"image/png"},{"type":"resource","resource":{"uri":"file:///a","text":"[redacted] again"}}]`,
			"structuredContent": ``, "_meta": `{"m":1}`,
		}},
		{desc: "both redacted: structured rewritten", fn: func(p []ahp.Part) []ahp.Part {
			p[0] = setText(p[0], "key=[redacted]")
			p[3] = setText(p[3], `{"key":"[redacted]"}`)
			return p
		}, want: map[string]string{"structuredContent": `{"key":"[redacted]"}`, "content.0.text": `"key=[redacted]"`}},
		{desc: "structured rewritten to non-JSON: dropped", fn: func(p []ahp.Part) []ahp.Part {
			p[3] = setText(p[3], `redacted`)
			return p
		}, want: map[string]string{"structuredContent": ``, "content.0.text": `"key=sk-123"`}},
		{desc: "replaced by a new message: items gone, structured dropped", fn: func(p []ahp.Part) []ahp.Part {
			return []ahp.Part{ahp.TextPart("new", "nothing to see")}
		}, want: map[string]string{"content": `[{"type":"text","text":"nothing to see"}]`, "structuredContent": ``}},
		{desc: "appended note keeps the rest", fn: func(p []ahp.Part) []ahp.Part {
			return append(p, ahp.TextPart("note", "checked by policy"))
		}, want: map[string]string{"content.3": `{"type":"text","text":"checked by policy"}`, "structuredContent": `{"key":"sk-123"}`, "content.#": "4"}},
		{desc: "attachment removed", fn: func(p []ahp.Part) []ahp.Part {
			return append(p[:1], p[2:]...)
		}, want: map[string]string{"content.#": "2", "content.1.type": `"resource"`}},
		{desc: "new attachment cannot be rendered", fn: func(p []ahp.Part) []ahp.Part {
			a := p[1]
			a.ID = "forged"
			return append(p, a)
		}, wantErr: true},
		{desc: "attachment turned into text", fn: func(p []ahp.Part) []ahp.Part {
			p[1] = ahp.TextPart(p[1].ID, "x")
			return p
		}, wantErr: true},
		{desc: "withheld text", fn: func(p []ahp.Part) []ahp.Part {
			p[0].Text, p[0].Selection = nil, ahp.SelectionMetadata
			return p
		}, wantErr: true},
	}
	r, err := ParseResult([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			o := NewOutput("m", r)
			got, err := o.Apply(edit(o.Items, tc.fn))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Apply succeeded: %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			for path, want := range tc.want {
				if v := gjson.GetBytes(got, path); v.Raw != want {
					t.Errorf("%s = %s, want %s\n%s", path, v.Raw, want, got)
				}
			}
			if _, err := ParseSupplied(got); err != nil {
				t.Errorf("the rendered result is no longer a CallToolResult: %v", err)
			}
		})
	}
}

func TestMCPApplyUnchangedIsByteIdentical(t *testing.T) {
	raw := `{ "content" : [ {"type":"text", "text":"a"} ], "isError": false, "x": {"y": 1} }`
	r, err := ParseResult([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	o := NewOutput("m", r)
	got, err := o.Apply(o.Items)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `{"type":"text", "text":"a"}`) || !strings.Contains(string(got), `"x": {"y": 1}`) {
		t.Errorf("unknown members or items lost their bytes: %s", got)
	}
}

func TestMCPDenialResult(t *testing.T) {
	got := DenialResult(`Deleting "/" is not allowed <ever>.`)
	want := `{"content":[{"type":"text","text":"Deleting \"/\" is not allowed <ever>."}],"isError":true}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r, err := ParseSupplied(got)
	if err != nil || !r.IsError {
		t.Errorf("a denial must be a valid error CallToolResult: %v", err)
	}
}

// TestMCPTextBlob: a resource blob of a textual media type is a text part; an edit goes
// back as base64 in the blob, the resource keeping its uri and type. A blob without a
// textual type, or whose bytes are not UTF-8, stays an attachment.
func TestMCPTextBlob(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	raw := `{"content":[` +
		`{"type":"resource","resource":{"uri":"file:///c.json","mimeType":"application/json","blob":"` + b64([]byte(`{"token":"T0K3N"}`)) + `"}},` +
		`{"type":"resource","resource":{"uri":"file:///x.bin","mimeType":"application/octet-stream","blob":"` + b64([]byte("T0K3N")) + `"}},` +
		`{"type":"resource","resource":{"uri":"file:///y.txt","mimeType":"text/plain","blob":"` + b64([]byte("\xff\xfe")) + `"}}` +
		`]}`
	r, err := ParseResult([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	o := NewOutput("res", r)
	parts := o.Items[0].Parts
	if parts[0].Kind != ahp.KindText || parts[0].TextOf() != `{"token":"T0K3N"}` {
		t.Fatalf("json blob part = %+v", parts[0])
	}
	if parts[1].Kind != ahp.KindAttachment || parts[2].Kind != ahp.KindAttachment {
		t.Fatalf("binary blobs = %+v, %+v", parts[1], parts[2])
	}
	same, err := o.Apply(o.Items)
	if err != nil || string(same) != raw {
		t.Fatalf("unchanged output re-rendered: %s, %v", same, err)
	}
	out, err := o.Apply(edit(o.Items, func(ps []ahp.Part) []ahp.Part {
		ps[0] = setText(ps[0], `{"token":"[REDACTED]"}`)
		return ps
	}))
	if err != nil {
		t.Fatal(err)
	}
	res := gjson.GetBytes(out, "content.0.resource")
	blob, _ := base64.StdEncoding.DecodeString(res.Get("blob").String())
	if string(blob) != `{"token":"[REDACTED]"}` || res.Get("uri").String() != "file:///c.json" || res.Get("mimeType").String() != "application/json" || res.Get("text").Exists() {
		t.Fatalf("rendered resource = %s", res.Raw)
	}
	if gjson.GetBytes(out, "content.1").Raw != gjson.Get(raw, "content.1").Raw {
		t.Fatalf("binary blob changed: %s", out)
	}
}
