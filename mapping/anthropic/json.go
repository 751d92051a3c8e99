package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// maxDepth bounds JSON nesting. gjson recurses, and no legitimate Messages body comes near
// this depth.
const maxDepth = 512

// strictJSON is the one-pass check of checkJSON.
var strictJSON = jsontext.CheckOptions{
	MaxDepth:          maxDepth,
	RejectInvalidUTF8: true,
	EscapedKey: func(name string) error {
		if isPlainKey(name) {
			return fmt.Errorf("object key %q is written with escapes", name)
		}
		return nil
	},
}

// checkJSON rejects bodies that gjson would read differently from the upstream: invalid
// UTF-8 (canonical text would silently gain U+FFFD), excessive nesting, invalid JSON,
// duplicate object keys (gjson reads the first, many servers the last: a policy would vet
// one value while the model saw another), and escaped spellings of plain ASCII keys
// ("te\u0078t"), which gjson paths and sjson patches would not match. One pass
// (jsontext.CheckOptions.Check); only a rejected body is looked at again, to report its
// faults in that order.
func checkJSON(body string) error {
	err := strictJSON.CheckString(body)
	if err == nil {
		return nil
	}
	if !utf8.ValidString(body) {
		return fmt.Errorf("body is not valid UTF-8")
	}
	if nestingDepth(body) > maxDepth {
		return fmt.Errorf("JSON nesting deeper than %d", maxDepth)
	}
	var ce *jsontext.CheckError
	errors.As(err, &ce)
	switch ce.Kind {
	case jsontext.ErrKey:
		return ce.Err
	case jsontext.ErrDuplicateKey:
		return fmt.Errorf("duplicate object key %q", ce.Key)
	}
	return fmt.Errorf("body is not valid JSON: %s at byte %d", ce.Msg, ce.Offset)
}

// nestingDepth returns the maximum array/object nesting of a JSON text, ignoring brackets
// inside strings. It does not validate.
func nestingDepth(s string) int {
	depth, max := 0, 0
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > max {
				max = depth
			}
		case ']', '}':
			depth--
		}
	}
	return max
}

// isPlainKey reports whether a key uses only the characters of Anthropic field names, so an
// escaped spelling of it can only be an attempt to hide it.
func isPlainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// quote encodes s as a JSON string the way Anthropic does (no HTML escaping).
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// unescapeHTML undoes the \u003c, \u003e and \u0026 escapes encoding/json adds to tool
// inputs (mapping.ToolCallPart), so a rewritten input reads as Anthropic writes JSON. Escape
// pairs are consumed whole, so an escaped backslash followed by "u003c" stays text.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteByte(c)
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}

// compact returns raw JSON without insignificant whitespace.
func compact(raw []byte) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// setRaw patches one field of a small native JSON object.
func setRaw(obj, path, raw string) (string, error) {
	out, err := sjson.SetRaw(obj, path, raw)
	if err != nil {
		return "", fmt.Errorf("anthropic: set %s: %w", path, err)
	}
	return out, nil
}

// joinArray renders raw JSON values as an array.
func joinArray(raws []string) string {
	n := 2
	for _, r := range raws {
		n += len(r) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('[')
	for i, r := range raws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
	}
	b.WriteByte(']')
	return b.String()
}

// escapeKey escapes a JSON key for use as one sjson path component.
func escapeKey(k string) string {
	if !strings.ContainsAny(k, `.*?|#@\!:`) {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		if strings.IndexByte(`.*?|#@\!:`, k[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(k[i])
	}
	return b.String()
}

// ---- canonical values ----

func messagesEqual(a, b []ahp.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !messageEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

func messageEqual(a, b *ahp.Message) bool {
	if a.ID != b.ID || a.Role != b.Role || a.Synthesized != b.Synthesized || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i := range a.Parts {
		if !partEqual(&a.Parts[i], &b.Parts[i]) {
			return false
		}
	}
	return true
}

func partEqual(a, b *ahp.Part) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.MediaType == b.MediaType && a.Selection == b.Selection &&
		a.Category == b.Category && a.SHA256 == b.SHA256 && a.Synthesized == b.Synthesized &&
		strPtrEqual(a.Text, b.Text) && int64PtrEqual(a.Size, b.Size) &&
		refEqual(a.Body, b.Body) && gapEqual(a.Gap, b.Gap)
}

func strPtrEqual(a, b *string) bool  { return a == b || a != nil && b != nil && *a == *b }
func int64PtrEqual(a, b *int64) bool { return a == b || a != nil && b != nil && *a == *b }
func refEqual(a, b *ahp.Ref) bool    { return a == b || a != nil && b != nil && *a == *b }
func gapEqual(a, b *ahp.Gap) bool    { return a == b || a != nil && b != nil && *a == *b }
func cloneStr(p *string) *string     { return clonePtr(p) }
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cloneMessages deep-copies a canonical list, so the translator's record of what it
// decoded cannot be changed through the slices it handed out.
func cloneMessages(in []ahp.Message) []ahp.Message {
	out := make([]ahp.Message, len(in))
	for i := range in {
		out[i] = cloneMessage(&in[i])
	}
	return out
}

func cloneMessage(m *ahp.Message) ahp.Message {
	c := *m
	c.Parts = make([]ahp.Part, len(m.Parts))
	for j := range m.Parts {
		c.Parts[j] = clonePart(&m.Parts[j])
	}
	return c
}

func clonePart(p *ahp.Part) ahp.Part {
	c := *p
	c.Text = cloneStr(p.Text)
	c.Size = clonePtr(p.Size)
	c.Body = clonePtr(p.Body)
	c.Gap = clonePtr(p.Gap)
	return c
}

// ---- synthesized ids ----

// idHash hashes position and canonical content into a short stable id component. Content,
// not raw JSON, is hashed so that moving a cache_control breakpoint or turning string
// content into a block array (both routine between turns) keeps every id.
type idHash struct {
	h   hash.Hash
	buf []byte // framing scratch, so hashing strings does not copy them one by one
}

func newIDHash() *idHash { return &idHash{h: sha256.New(), buf: make([]byte, 0, 256)} }

func (h *idHash) str(s string) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(s)))
	if len(h.buf)+len(s) > cap(h.buf) {
		h.flush()
		if len(s) > cap(h.buf) {
			_, _ = io.WriteString(h.h, s)
			return
		}
	}
	h.buf = append(h.buf, s...)
}

func (h *idHash) int(i int) { h.buf = binary.AppendVarint(h.buf, int64(i)) }

func (h *idHash) flush() {
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
}

func (h *idHash) part(p *ahp.Part, fingerprint string) {
	h.str(p.Kind)
	h.str(p.Category)
	h.str(p.MediaType)
	h.str(p.TextOf())
	h.str(p.SHA256)
	h.str(fingerprint)
}

func (h *idHash) sum() string {
	h.flush()
	return hex.EncodeToString(h.h.Sum(nil)[:8])
}

func partID(msgID string, n int) string { return fmt.Sprintf("%s.p%d", msgID, n) }
