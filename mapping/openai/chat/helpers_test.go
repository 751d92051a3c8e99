package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// checkSchema checks canonical messages against the rules of the AHP content schema (the
// schema itself is checked in ./sdkcheck, which keeps heavy dependencies out of the fuzz
// binary of this package).
func checkSchema(t testing.TB, items []ahp.Message) {
	t.Helper()
	roles := map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}
	for _, m := range items {
		if m.ID == "" || !roles[m.Role] || m.Parts == nil {
			t.Errorf("bad message %s (role %q)", m.ID, m.Role)
		}
		checkPartsShape(t, m.Parts)
	}
}

// checkPartsShape checks the schema rules of parts.
func checkPartsShape(t testing.TB, ps []ahp.Part) {
	t.Helper()
	sels := map[string]bool{"body": true, "metadata": true, "omit": true}
	for _, p := range ps {
		switch {
		case p.ID == "" || p.MediaType == "" || !sels[p.Selection]:
			t.Fatalf("part without id, media type or selection: %+v", p)
		case p.Kind == ahp.KindText && (p.MediaType != ahp.MediaTypeText || p.Body != nil ||
			p.Selection == ahp.SelectionBody && (p.Text == nil) == (p.Gap == nil) ||
			p.Selection != ahp.SelectionBody && (p.Text != nil || p.Gap != nil) ||
			p.Text != nil && (p.Size != nil || p.SHA256 != "")):
			t.Fatalf("bad text part: %+v", p)
		case p.Kind == ahp.KindAttachment && (isTextMediaType(p.MediaType) || p.Text != nil ||
			p.Selection == ahp.SelectionBody && (p.Gap == nil) == (p.Body == nil) ||
			p.Selection != ahp.SelectionBody && (p.Body != nil || p.Gap != nil)):
			t.Fatalf("bad attachment part: %+v", p)
		case p.Kind != ahp.KindText && p.Kind != ahp.KindAttachment:
			t.Fatalf("bad kind: %+v", p)
		case p.SHA256 != "" && len(p.SHA256) != 64, p.Size != nil && *p.Size < 0:
			t.Fatalf("bad size or sha256: %+v", p)
		}
	}
}

// jsonEqual reports whether two JSON documents hold the same value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// compact returns compact JSON, for readable comparisons.
func compact(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact: %v\n%s", err, s)
	}
	return b.String()
}

// partSummary is a short form of a part for table expectations.
type partSummary struct {
	Kind, MediaType, Selection, Category, Text string
	Gap                                        string
	HasSize                                    bool
}

func summarize(ps []ahp.Part) []partSummary {
	out := make([]partSummary, 0, len(ps))
	for _, p := range ps {
		s := partSummary{Kind: p.Kind, MediaType: p.MediaType, Selection: p.Selection, Category: p.Category,
			Text: p.TextOf(), HasSize: p.Size != nil}
		if p.Gap != nil {
			s.Gap = p.Gap.Reason
		}
		out = append(out, s)
	}
	return out
}

func text(s string) partSummary {
	return partSummary{Kind: "text", MediaType: "text/plain", Selection: "body", Text: s}
}

func catText(cat, s string) partSummary {
	p := text(s)
	p.Category = cat
	return p
}

// setText returns a copy of items with the text of one part replaced.
func setText(items []ahp.Message, msg, part int, s string) []ahp.Message {
	out := cloneItems(items)
	out[msg].Parts[part].Text = &s
	return out
}

// fixture returns a file of testdata/chat.
func fixture(name string) string {
	b, err := os.ReadFile("testdata/chat/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Shared fixtures: every chat message kind, and a completion with reasoning, text and two
// parallel tool calls.
var (
	fullRequest  = fixture("full_request.json")
	toolResponse = fixture("tool_response.json")
)

// Short names for the shared helpers the tests of this package use.
var (
	cloneItems      = ahp.CloneMessages
	textPart        = oaiwire.TextPart
	jsonString      = mapping.Quote
	normalizeJSON   = oaiwire.NormalizeJSON
	isTextMediaType = oaiwire.IsTextMediaType
)

const (
	gapRemoteURL  = oaiwire.GapRemoteURL
	gapProviderID = oaiwire.GapProviderFile
)
