package responses

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

// checkSchema validates canonical messages against the protocol's content rules.
func checkSchema(t testing.TB, items []ahp.Message) {
	t.Helper()
	b, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := ahp.ValidateContentMessages(b, ""); err != nil {
		t.Fatalf("canonical items are not valid AHP content: %v\n%s", err, b)
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
	Kind, MediaType, Selection, Category, Text, Gap string
	HasSize                                         bool
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

// toolCall is the summary of a tool_call part.
func toolCall(s string) partSummary { return catText("tool_call", s) }

// encrypted is the summary of an encrypted reasoning part.
var encrypted = partSummary{Kind: "text", MediaType: "text/plain", Selection: "metadata", Category: "reasoning"}

// setText returns a copy of items with the text of one part replaced.
func setText(items []ahp.Message, msg, part int, s string) []ahp.Message {
	out := cloneItems(items)
	out[msg].Parts[part].Text = &s
	return out
}

// fixture returns a file of testdata.
func fixture(name string) string {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Shared fixtures: a request with every input item kind; a response with reasoning, text,
// a hosted tool call and two function calls; the same response as the API streams it.
var (
	fullRequest  = fixture("requests/full_request.json")
	toolResponse = fixture("responses/tool_response.json")
	toolStream   = fixture("responses/tool_stream.sse")
)

// mustDecode decodes a request or fails the test.
func mustDecode(t testing.TB, body string) *mapping.Request {
	t.Helper()
	req, err := New().DecodeRequest([]byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v\n%s", err, body)
	}
	checkSchema(t, req.Items)
	return req
}

// Short names for the shared helpers the tests of this package use.
var (
	cloneItems = ahp.CloneMessages
	textPart   = oaiwire.TextPart
)

const (
	gapRemoteURL    = oaiwire.GapRemoteURL
	gapProviderFile = oaiwire.GapProviderFile
)
