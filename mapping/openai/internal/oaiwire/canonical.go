package oaiwire

import "github.com/hookproxy/hookproxy/chain/ahp"

// PartsEqual compares two parts field by field (pointers by value).
func PartsEqual(a, b *ahp.Part) bool {
	if a.ID != b.ID || a.Kind != b.Kind || a.MediaType != b.MediaType || a.Selection != b.Selection ||
		a.Category != b.Category || a.SHA256 != b.SHA256 || a.Synthesized != b.Synthesized {
		return false
	}
	if (a.Text == nil) != (b.Text == nil) || a.Text != nil && *a.Text != *b.Text {
		return false
	}
	if (a.Size == nil) != (b.Size == nil) || a.Size != nil && *a.Size != *b.Size {
		return false
	}
	if (a.Body == nil) != (b.Body == nil) || a.Body != nil && *a.Body != *b.Body {
		return false
	}
	return (a.Gap == nil) == (b.Gap == nil) && (a.Gap == nil || *a.Gap == *b.Gap)
}

// PartListsEqual compares two part lists.
func PartListsEqual(a, b []ahp.Part) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !PartsEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// MessagesEqual compares id, role and parts. The synthesized flag does not count: a hook that
// hands a message back without it has not changed what the model sees.
func MessagesEqual(a, b *ahp.Message) bool {
	return a.ID == b.ID && a.Role == b.Role && PartListsEqual(a.Parts, b.Parts)
}

// ItemsEqual compares two message lists without allocating.
func ItemsEqual(a, b []ahp.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !MessagesEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// CloneParts deep-copies parts, so that later edits elsewhere cannot alter the translator's
// record of the original.
func CloneParts(ps []ahp.Part) []ahp.Part {
	out := make([]ahp.Part, len(ps))
	for i := range ps {
		out[i] = ClonePart(ps[i])
	}
	return out
}

// ClonePart deep-copies one part: its pointer fields get copies of their own. Strings are
// immutable and shared.
func ClonePart(p ahp.Part) ahp.Part {
	if p.Text != nil {
		t := *p.Text
		p.Text = &t
	}
	if p.Size != nil {
		s := *p.Size
		p.Size = &s
	}
	if p.Body != nil {
		b := *p.Body
		p.Body = &b
	}
	if p.Gap != nil {
		g := *p.Gap
		p.Gap = &g
	}
	return p
}

// CloneItems deep-copies a message list.
func CloneItems(ms []ahp.Message) []ahp.Message {
	out := make([]ahp.Message, len(ms))
	for i, m := range ms {
		m.Parts = CloneParts(m.Parts)
		out[i] = m
	}
	return out
}
