package gemini_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// TestSignatureKeptAfterRemoval: the thoughtSignature of a removed first call lands on the
// first call kept — in the held path and in the edited stream, whatever the chunking — or
// on the note of the removal when no call is kept; it is never duplicated, and a kept
// first call keeps its own. Each spelling is kept as the upstream wrote it.
func TestSignatureKeptAfterRemoval(t *testing.T) {
	snake := make([]string, len(streamChunks))
	for i, c := range streamChunks {
		snake[i] = strings.ReplaceAll(c, `"thoughtSignature"`, `"thought_signature"`)
	}
	for _, tc := range []struct {
		desc   string
		chunks []string
		key    string
		script mappingtest.Script
		want   string // what carries S1: a call name, or "note"
	}{
		{"first removed", streamChunks, "thoughtSignature", mappingtest.Script{0: {Remove: true, Note: "blocked run"}}, "read"},
		{"first two removed", streamChunks, "thoughtSignature", mappingtest.Script{0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}}, "list"},
		{"all removed", streamChunks, "thoughtSignature", mappingtest.Script{0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}, 2: {Remove: true, Note: "c"}}, "note"},
		{"second removed", streamChunks, "thoughtSignature", mappingtest.Script{1: {Remove: true, Note: "no"}}, "run"},
		{"snake_case spelling", snake, "thought_signature", mappingtest.Script{0: {Remove: true, Note: "blocked run"}}, "read"},
	} {
		stream := sse(tc.chunks...)
		held, err := mappingtest.Held(sseTr, stream, tc.script)
		if err != nil {
			t.Fatalf("%s: held: %v", tc.desc, err)
		}
		if got := signedBy(held, tc.key); got != tc.want {
			t.Errorf("%s: held path: S1 on %q, want %q\n%s", tc.desc, got, tc.want, held)
		}
		for _, chunk := range []int{0, 1, 13} {
			edited, err := mappingtest.Edit(sseTr, stream, chunk, &mappingtest.Decider{Script: tc.script})
			if err != nil {
				t.Fatalf("%s: edit: %v", tc.desc, err)
			}
			if n := strings.Count(string(edited), `"S1"`); n != 1 {
				t.Errorf("%s, chunk %d: S1 sent %d times\n%s", tc.desc, chunk, n, edited)
			}
			body, err := mappingtest.Assembled(sseTr, edited)
			if err != nil {
				t.Fatalf("%s: assemble: %v", tc.desc, err)
			}
			if got := signedBy(body, tc.key); got != tc.want {
				t.Errorf("%s, chunk %d: stream: S1 on %q, want %q\n%s", tc.desc, chunk, got, tc.want, edited)
			}
		}
	}
}

// signedBy names the part of a response that carries the signature S1 under key: the name
// of its call, "note" for a text part, "" when none does.
func signedBy(body []byte, key string) string {
	out := ""
	gjson.GetBytes(body, "candidates.0.content.parts").ForEach(func(_, p gjson.Result) bool {
		if p.Get(key).String() != "S1" {
			return true
		}
		switch {
		case p.Get("functionCall").Exists():
			out = p.Get("functionCall.name").String()
		case p.Get("function_call").Exists():
			out = p.Get("function_call.name").String()
		case p.Get("text").Exists():
			out = "note"
		}
		return false
	})
	return out
}
