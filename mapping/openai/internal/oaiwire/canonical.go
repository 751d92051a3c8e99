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

// PartStore holds the values a cloned part's pointer fields point to. Kept inside a
// native origin record, it lets recording every decoded part cost no allocation per part.
type PartStore struct {
	text   string
	values ahp.PartValues
}

// Clone returns a copy of p whose pointer fields point into s.
func (s *PartStore) Clone(p ahp.Part) ahp.Part {
	if p.Text != nil {
		s.text = *p.Text
		p.Text = &s.text
	}
	s.values.Own(&p)
	return p
}
