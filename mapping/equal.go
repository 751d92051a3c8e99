package mapping

import "github.com/hookproxy/hookproxy/chain/ahp"

// MessagesEqual reports whether two canonical lists are the same content, field by field:
// codecs use it to return the original bytes for an unchanged list.
func MessagesEqual(a, b []ahp.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !MessageEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// MessageEqual reports whether two canonical messages are the same content.
func MessageEqual(a, b *ahp.Message) bool {
	if a.ID != b.ID || a.Role != b.Role || a.Synthesized != b.Synthesized || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i := range a.Parts {
		if !PartEqual(&a.Parts[i], &b.Parts[i]) {
			return false
		}
	}
	return true
}

// PartEqual reports whether two canonical parts are the same content.
func PartEqual(a, b *ahp.Part) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.MediaType == b.MediaType && a.Selection == b.Selection &&
		a.Category == b.Category && a.SHA256 == b.SHA256 && a.Synthesized == b.Synthesized &&
		PtrEqual(a.Text, b.Text) && PtrEqual(a.Size, b.Size) && PtrEqual(a.Body, b.Body) && PtrEqual(a.Gap, b.Gap)
}

// PtrEqual reports whether a and b are both nil or both point to equal values.
func PtrEqual[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }
