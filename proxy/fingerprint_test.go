package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
)

// fingerprintVariants are message lists that differ from the first in one member each
// (including presence: a nil and an empty text, no parts and an empty part list), plus
// lists that encode alike from different memory.
func fingerprintVariants() [][]ahp.Message {
	s := func(v string) *string { return &v }
	n := func(v int64) *int64 { return &v }
	base := func() ahp.Message {
		return ahp.Message{ID: "m1", Role: ahp.RoleTool, Synthesized: true, Parts: []ahp.Part{
			{ID: "m1.p0", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody,
				Category: ahp.CategoryToolResult, Text: s("total 0\n-rw-r--r-- a.go")},
			{ID: "m1.p1", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionMetadata,
				Size: n(12), SHA256: "ab"},
		}}
	}
	edit := func(f func(m *ahp.Message)) []ahp.Message {
		m := base()
		m.Parts = append([]ahp.Part(nil), m.Parts...)
		f(&m)
		return []ahp.Message{m}
	}
	vs := [][]ahp.Message{
		{base()},
		edit(func(m *ahp.Message) {}), // same content, other memory
		edit(func(m *ahp.Message) { m.Parts[0].Text = s(strings.Clone("total 0\n-rw-r--r-- a.go")) }),
		// The same text kept across requests, its digest found by its address.
		edit(func(m *ahp.Message) {
			t := strings.Clone("total 0\n-rw-r--r-- a.go")
			heldtexts.Hold(t)
			m.Parts[0].Text = &t
		}),
		edit(func(m *ahp.Message) { m.ID = "m2" }),
		edit(func(m *ahp.Message) { m.Role = ahp.RoleUser }),
		edit(func(m *ahp.Message) { m.Synthesized = false }),
		edit(func(m *ahp.Message) { m.Parts[0].Text = s("total 1\n-rw-r--r-- a.go") }),
		edit(func(m *ahp.Message) { m.Parts[0].Text = s("") }),
		edit(func(m *ahp.Message) { m.Parts[0].Text = nil }),
		edit(func(m *ahp.Message) { m.Parts[0].ID = "m1.p9" }),
		edit(func(m *ahp.Message) { m.Parts[0].Category = "" }),
		edit(func(m *ahp.Message) { m.Parts[0].Selection = ahp.SelectionOmit }),
		edit(func(m *ahp.Message) { m.Parts[0].Gap = &ahp.Gap{Reason: "withheld"} }),
		edit(func(m *ahp.Message) { m.Parts[0].Gap = &ahp.Gap{Path: "/x", Reason: "withheld"} }),
		edit(func(m *ahp.Message) { m.Parts[0].Synthesized = true }),
		edit(func(m *ahp.Message) { m.Parts[1].Size = n(13) }),
		edit(func(m *ahp.Message) { m.Parts[1].Size = nil }),
		edit(func(m *ahp.Message) { m.Parts[1].Body = &ahp.Ref{} }),
		edit(func(m *ahp.Message) { m.Parts[1].Body = &ahp.Ref{Ref: "r1"} }),
		edit(func(m *ahp.Message) { m.Parts[1].SHA256 = "" }),
		edit(func(m *ahp.Message) { m.Parts[1].MediaType = "image/jpeg" }),
		edit(func(m *ahp.Message) { m.Parts[1].Kind = ahp.KindText }),
		edit(func(m *ahp.Message) { m.Parts = m.Parts[:1] }),
		edit(func(m *ahp.Message) { m.Parts = []ahp.Part{} }),
		edit(func(m *ahp.Message) { m.Parts = nil }),
		// Text moved between parts: the framing keeps ("ab", "c") apart from ("a", "bc").
		edit(func(m *ahp.Message) { m.Parts[0].Text, m.Parts[1].Text = s("total 0\n"), s("-rw-r--r-- a.go") }),
		{ahp.PartItem(base().Parts[0])},
		{ahp.PartItem(base().Parts[1])},
		{base(), base()},
		nil,
	}
	// The variants again over one held text: their frames are noted on it (fingerprintSum
	// reuses a noted sum for an equal frame), and each must still get its own fingerprint.
	ht := strings.Clone(*base().Parts[0].Text)
	heldtexts.Hold(ht)
	for _, v := range vs[:len(vs):len(vs)] {
		if len(v) == 1 && len(v[0].Parts) > 0 && v[0].Parts[0].Text != nil && *v[0].Parts[0].Text == ht {
			m := v[0]
			m.Parts = append([]ahp.Part(nil), m.Parts...)
			m.Parts[0].Text = &ht
			vs = append(vs, []ahp.Message{m})
		}
	}
	return vs
}

// fingerprintIs reports whether msgs' fingerprint is fp (a record's) as matchRecords
// decides it for a unit it fingerprints: without making the fingerprint's string.
func fingerprintIs(td *transport.TextDigests, msgs []ahp.Message, fp string) bool {
	if len(msgs) == 0 || len(fp) != 2*sha256.Size {
		return false
	}
	return sumIs(fingerprintSum(td, msgs), fp)
}

// TestFingerprintAgreesWithCanonicalJSON: two message lists get the same settlement
// fingerprint exactly when their canonical JSON is the same, with or without the request's
// digest memo (the fingerprint no longer encodes JSON; a record must still match exactly the
// content it settled).
func TestFingerprintAgreesWithCanonicalJSON(t *testing.T) {
	vs := fingerprintVariants()
	td := transport.NewTextDigests()
	for i, a := range vs {
		ja, _ := json.Marshal(a)
		fa := fingerprint(td, a)
		if fb := fingerprint(nil, a); fb != fa {
			t.Errorf("variant %d: fingerprint with the memo %s, without %s", i, fa, fb)
		}
		for j, b := range vs {
			jb, _ := json.Marshal(b)
			same := bytes.Equal(ja, jb) && len(a) > 0
			if got := fingerprint(td, b) == fa && fa != ""; got != same {
				t.Errorf("variants %d and %d: same fingerprint %v, same canonical JSON %v\n%s\n%s", i, j, got, same, ja, jb)
			}
			// applyRecords' comparison, which makes no string of the fingerprint.
			if got := fingerprintIs(td, b, fa); got != same {
				t.Errorf("variants %d and %d: fingerprintIs %v, same canonical JSON %v", i, j, got, same)
			}
		}
	}
}
