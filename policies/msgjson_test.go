package policies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// appendMessages must write what encoding/json writes for the ahp types (up to HTML
// escaping and the nil-parts case), and must learn about any member added to them.
func TestAppendMessagesMatchesEncodingJSON(t *testing.T) {
	if n := reflect.TypeOf(ahp.Message{}).NumField(); n != 5 {
		t.Fatalf("ahp.Message has %d fields; update appendMessages", n)
	}
	if n := reflect.TypeOf(ahp.Part{}).NumField(); n != 11 {
		t.Fatalf("ahp.Part has %d fields; update appendPart", n)
	}
	size := int64(48213)
	msgs := []ahp.Message{
		{ID: "m0", Role: ahp.RoleSystem, Parts: []ahp.Part{text("m0p0", "plain <b>&</b> \"quoted\" \\ \n\t\x01 \u2028 é 🎉 \xff")}},
		{ID: "m1", Role: ahp.RoleUser, Synthesized: true, Parts: []ahp.Part{
			{ID: "a", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionMetadata, Size: &size, SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
			{ID: "b", Kind: ahp.KindAttachment, MediaType: "image/jpeg", Selection: ahp.SelectionBody, Body: &ahp.Ref{Ref: "upl_1"}, Category: "images", Synthesized: true},
			{ID: "c", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody, Gap: &ahp.Gap{Reason: "size limit", Path: "items/1"}},
			{ID: "d", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody, Gap: &ahp.Gap{Reason: "unavailable"}},
		}},
		{ID: "m2", Role: ahp.RoleAssistant, Parts: []ahp.Part{}},
		ahp.PartItem(ahp.Part{ID: "bare", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionMetadata, Size: &size, Synthesized: true}),
	}
	var got, want []any
	if err := json.Unmarshal(appendMessages(nil, msgs), &got); err != nil {
		t.Fatalf("appendMessages wrote invalid JSON: %v", err)
	}
	ref, _ := json.Marshal(msgs)
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("appendMessages = %s\nencoding/json = %s", appendMessages(nil, msgs), ref)
	}
	if s := string(appendMessages(nil, []ahp.Message{{ID: "x", Role: "user"}})); s != `[{"id":"x","role":"user","parts":[]}]` {
		t.Fatalf("nil parts: %s", s)
	}
}

func TestAppendJSONStringEscapes(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "nl\n\r\t\x00\x1f\x7f", "é🎉", "\u2028\u2029", "\xff\xfe", "a\xe2\x80", "\xe2\x82\xac"} {
		var back string
		if err := json.Unmarshal(appendJSONString(nil, s), &back); err != nil {
			t.Fatalf("%q: invalid JSON %s: %v", s, appendJSONString(nil, s), err)
		}
		// encoding/json's own reading of the same string (invalid UTF-8 becomes U+FFFD)
		var want string
		ref, _ := json.Marshal(s)
		_ = json.Unmarshal(ref, &want)
		if back != want {
			t.Fatalf("%q round-trips to %q, want %q", s, back, want)
		}
	}
}

// redactedListJSON must write what encoding a redacted copy of the list writes, for any
// findings (even ones cutting a UTF-8 sequence) and any replacement text (even one that
// rejoins the halves of a broken character).
func TestRedactedListJSONMatchesCopy(t *testing.T) {
	// copyRedacted is the straightforward way: copy the list, rebuild the edited texts.
	copyRedacted := func(items []ahp.Message, hits []partHit, d detector, repl replFunc) []byte {
		out := slices.Clone(items)
		for _, h := range hits {
			out[h.msg].Parts = slices.Clone(out[h.msg].Parts)
			p := &out[h.msg].Parts[h.part]
			s := redactPartText(p, h.findings, d, repl)
			p.Text = &s
		}
		return messagesJSON(out)
	}
	alphabet := []string{"a", "b", " ", "\n", "\"", "\\", "é", "\u2028", "\u200b", "🎉", "\xff", "\xc3", "\xa9", "\xe2\x80", "\x01"}
	repls := []string{"", "[REDACTED:k:0011aabb]", "\xa9", "\xc3", "é", "\u2028", "\"q\"\n", "\x80\x80"}
	rng := rand.New(rand.NewPCG(3, 4))
	secrets := mustSecrets(t)
	for n := range 5000 {
		var items []ahp.Message
		var hits []partHit
		for i := range 1 + rng.IntN(3) {
			m := ahp.Message{ID: fmt.Sprintf("m%d", i), Role: ahp.RoleUser}
			for j := range 1 + rng.IntN(3) {
				var b strings.Builder
				for range rng.IntN(24) {
					b.WriteString(alphabet[rng.IntN(len(alphabet))])
				}
				s := b.String()
				m.Parts = append(m.Parts, text(fmt.Sprintf("m%dp%d", i, j), s))
				var fs []Finding
				for at := 0; at < len(s); {
					start := at + rng.IntN(len(s)-at+1)
					end := start + rng.IntN(len(s)-start+1)
					if end == start {
						break
					}
					fs = append(fs, Finding{Start: start, End: end, Kind: repls[rng.IntN(len(repls))]})
					at = end
				}
				if len(fs) > 0 && rng.IntN(4) > 0 {
					hits = append(hits, partHit{msg: i, part: j, findings: fs})
				}
			}
			items = append(items, m)
		}
		if n%10 == 0 {
			// a tool call part: rewritten through the JSON reader by both ways
			call := `{"command":"export AWS_ACCESS_KEY_ID=` + testAWSKeyID + `"}`
			p := text("tc", call)
			p.Category = ahp.CategoryToolCall
			items = append(items, ahp.Message{ID: "tc", Role: ahp.RoleAssistant, Parts: []ahp.Part{p}})
			hits = append(hits, partHit{msg: len(items) - 1, part: 0, findings: []Finding{{Start: 0, End: 1, Kind: "x"}}})
		}
		repl := func(f Finding, value string) string { return f.Kind + value[:len(value)/2] }
		if n%2 == 0 {
			repl = func(f Finding, _ string) string { return f.Kind }
		}
		got := redactedListJSON(items, hits, secrets.scan, repl)
		want := copyRedacted(items, hits, secrets.scan, repl)
		if !bytes.Equal(got, want) {
			t.Fatalf("redactedListJSON = %s\nwant               %s", got, want)
		}
	}
}
