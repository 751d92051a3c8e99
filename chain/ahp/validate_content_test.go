package ahp_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// TestParseContentMessages: canonical messages are roles with ordered parts, text inline
// and no JSON part (AHP-CONTENT-001).
func TestParseContentMessages(t *testing.T) {
	size := int64(1)
	text := ""
	tests := []struct {
		desc string
		list string
		role string
		want []ahp.Message
		path string // path of the first violation; "" means valid
		msg  string // substring of its message
	}{
		{desc: "every part variant decodes", list: `[{"id":"m","role":"assistant","synthesized":true,"parts":[` +
			`{"id":"t","kind":"text","mediaType":"text/plain","selection":"body","text":"","category":"reasoning"},` +
			`{"id":"a","kind":"attachment","mediaType":"image/png","selection":"body","body":{"ref":"r1"}},` +
			`{"id":"g","kind":"attachment","mediaType":"image/png","selection":"body","gap":{"reason":"too big","path":"x"},"size":1.0},` +
			`{"id":"o","kind":"attachment","mediaType":"image/png","selection":"omit","sha256":"` + strings.Repeat("a", 64) + `"}]}]`,
			want: []ahp.Message{{ID: "m", Role: "assistant", Synthesized: true, Parts: []ahp.Part{
				{ID: "t", Kind: "text", MediaType: "text/plain", Selection: "body", Text: &text, Category: "reasoning"},
				{ID: "a", Kind: "attachment", MediaType: "image/png", Selection: "body", Body: &ahp.Ref{Ref: "r1"}},
				{ID: "g", Kind: "attachment", MediaType: "image/png", Selection: "body", Gap: &ahp.Gap{Reason: "too big", Path: "x"}, Size: &size},
				{ID: "o", Kind: "attachment", MediaType: "image/png", Selection: "omit", SHA256: strings.Repeat("a", 64)},
			}}}},
		{desc: "empty list", list: `[]`, want: []ahp.Message{}},
		{desc: "not a list", list: `{}`, path: "$", msg: "must be an array"},
		{desc: "role of the slot", list: `[{"id":"m","role":"user","parts":[]}]`, role: "assistant", path: "$[0].role", msg: `must be "assistant"`},
		{desc: "member written twice", list: `[{"id":"m","role":"user","role":"assistant","parts":[]}]`, path: "$", msg: "$[0].role is written more than once"},
		{desc: "case-variant member is unknown", list: `[{"id":"m","Role":"user","role":"user","parts":[]}]`, path: "$[0].Role", msg: "closed object"},
		{desc: "size beyond int64", list: `[{"id":"m","role":"user","parts":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"omit","size":9223372036854775808}]}]`,
			path: "$[0].parts[0].size", msg: "at most"},
		{desc: "metadata part leaking text", list: `[{"id":"m","role":"user","parts":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"metadata","text":"t"}]}]`,
			path: "$[0].parts[0].text", msg: "unknown member"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ahp.ParseContentMessages(json.RawMessage(tc.list), tc.role)
			if tc.path == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					a, _ := json.Marshal(got)
					b, _ := json.Marshal(tc.want)
					t.Fatalf("decoded\n%s\nwant\n%s", a, b)
				}
				return
			}
			var verr *ahp.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			if first := verr.Violations[0]; first.Path != tc.path || !strings.Contains(first.Message, tc.msg) {
				t.Fatalf("first violation %q, want path %q containing %q", first, tc.path, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "invalid canonical content: ") {
				t.Fatalf("error %q does not name canonical content", err)
			}
		})
	}
}

func TestParseContentParts(t *testing.T) {
	got, err := ahp.ParseContentParts(json.RawMessage(`[{"id":"s","kind":"text","mediaType":"text/plain","selection":"body","text":"summary"}]`), true)
	if err != nil || len(got) != 1 || got[0].TextOf() != "summary" {
		t.Fatalf("got %+v, %v", got, err)
	}
	_, err = ahp.ParseContentParts(json.RawMessage(`[{"id":"a","kind":"attachment","mediaType":"image/png","selection":"omit"}]`), true)
	if err == nil || !strings.Contains(err.Error(), `$[0].kind: must be "text" in a text-part list`) {
		t.Fatalf("attachment in a text-part list: %v", err)
	}
}
