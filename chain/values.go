package chain

// Effective-value helpers for modification targets (AHP-EDIT-001): shallow object merge
// that keeps member order, and equality used to decide whether an accepted modification
// really changed the effective value.

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// member is one name/value pair of a JSON object, in document order.
type member struct {
	key string
	val json.RawMessage
}

// orderedMembers decodes a JSON object keeping member order. A repeated name keeps its
// first position and its last value, as a map decode would.
func orderedMembers(raw []byte) ([]member, error) {
	if !isJSONObject(raw) {
		return nil, errors.New("must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, errors.New("must be an object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, errors.New("malformed object")
		}
		k, ok := t.(string)
		if !ok {
			return nil, errors.New("malformed object")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errors.New("malformed object")
		}
		replaced := false
		for i := range out {
			if out[i].key == k {
				out[i].val = v
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, member{key: k, val: v})
		}
	}
	return out, nil
}

// shallowMerge merges patch into base: top-level members of patch overwrite or are
// appended, nested values are replaced whole and null stays a literal value — it never
// deletes (AHP-EDIT-001). Both must be objects.
func shallowMerge(base, patch []byte) (json.RawMessage, error) {
	bm, err := orderedMembers(base)
	if err != nil {
		return nil, errors.New("current value is not an object")
	}
	pm, err := orderedMembers(patch)
	if err != nil {
		return nil, errors.New("merge value is not an object")
	}
	for _, p := range pm {
		found := false
		for i := range bm {
			if bm[i].key == p.key {
				bm[i].val = p.val
				found = true
				break
			}
		}
		if !found {
			bm = append(bm, p)
		}
	}
	var buf bytes.Buffer
	buf.Grow(len(base) + len(patch))
	buf.WriteByte('{')
	for i, m := range bm {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(m.key)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(bytes.TrimSpace(m.val))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonEqual compares two JSON texts semantically (member order and whitespace ignored).
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// ptrEqual reports whether a and b are both nil or point to equal values.
func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func partEqual(a, b ahp.Part) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.MediaType == b.MediaType && a.Selection == b.Selection &&
		a.Category == b.Category && a.SHA256 == b.SHA256 && a.Synthesized == b.Synthesized &&
		ptrEqual(a.Text, b.Text) && ptrEqual(a.Size, b.Size) && ptrEqual(a.Body, b.Body) && ptrEqual(a.Gap, b.Gap)
}

func partsEqual(a, b []ahp.Part) bool { return slices.EqualFunc(a, b, partEqual) }

func messagesEqual(a, b []ahp.Message) bool {
	return slices.EqualFunc(a, b, func(x, y ahp.Message) bool {
		return x.ID == y.ID && x.Role == y.Role && x.Synthesized == y.Synthesized && partsEqual(x.Parts, y.Parts)
	})
}
