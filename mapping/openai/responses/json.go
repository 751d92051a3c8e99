package responses

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRequestDepth bounds the nesting of a client body. Real requests nest a few levels (tool
// parameter schemas the deepest); the bound keeps every later walk shallow.
const maxRequestDepth = 256

// checkClientJSON validates a client body before anything reads it: syntax, nesting depth,
// and no duplicate object keys. Duplicate keys matter because gjson reads the first
// occurrence while most upstream parsers keep the last, so a body with two "input" members
// would let a policy inspect one value while the model receives the other.
//
// encoding/json validates first: it is iterative, so a hostile body cannot exhaust the
// stack; the key scan below then only runs over valid JSON.
func checkClientJSON(raw []byte) error {
	if !json.Valid(raw) {
		return fmt.Errorf("body is not valid JSON")
	}
	var stack []keyFrame
	expectKey := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '{', '[':
			if len(stack) >= maxRequestDepth {
				return fmt.Errorf("JSON nesting deeper than %d levels", maxRequestDepth)
			}
			stack = append(stack, keyFrame{object: c == '{'})
			expectKey = c == '{'
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1].object
		case '"':
			end := stringEnd(raw, i)
			if expectKey && len(stack) > 0 {
				key := unquoteKey(raw[i : end+1])
				if !stack[len(stack)-1].add(key) {
					return fmt.Errorf("duplicate object key %q", key)
				}
				expectKey = false
			}
			i = end
		}
	}
	return nil
}

// keyFrame is one open object or array of checkClientJSON. Small objects keep their keys in
// a slice; large ones (tool parameter schemas) switch to a set.
type keyFrame struct {
	object bool
	keys   []string
	set    map[string]struct{}
}

// add records key and reports false when the object already has it.
func (f *keyFrame) add(key string) bool {
	if f.set != nil {
		if _, dup := f.set[key]; dup {
			return false
		}
		f.set[key] = struct{}{}
		return true
	}
	for _, k := range f.keys {
		if k == key {
			return false
		}
	}
	if len(f.keys) < 16 {
		f.keys = append(f.keys, key)
		return true
	}
	f.set = make(map[string]struct{}, 32)
	for _, k := range f.keys {
		f.set[k] = struct{}{}
	}
	f.set[key] = struct{}{}
	f.keys = nil
	return true
}

// stringEnd returns the index of the closing quote of the JSON string opening at i.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(b) - 1
}

// unquoteKey returns the value of a JSON string literal, so that "inp\u0075t" and "input"
// count as the same key.
func unquoteKey(lit []byte) string {
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return string(lit)
	}
	return s
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string { return string(appendJSONString(make([]byte, 0, len(s)+2), s)) }

// appendJSONString appends s as a JSON string literal. Unlike encoding/json it does not
// escape <, > and &: text goes upstream as the client wrote it, as OpenAI itself writes it.
// Invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compactJSON removes insignificant whitespace from valid JSON; other input is returned
// unchanged.
func compactJSON(s string) string {
	if !strings.ContainsAny(s, " \t\r\n") {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

// normalizeJSON is the form tool inputs are compared and re-rendered in: compact, with the
// HTML escapes encoding/json adds (\u003c, \u003e, \u0026) turned back into the characters,
// so that "<" in arguments stays "<" after a round through a tool_call part.
func normalizeJSON(s string) string {
	s = compactJSON(s)
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inString {
			inString = c == '"'
			b.WriteByte(c)
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+5 < len(s) && s[i+1] == 'u' {
				var r byte
				switch strings.ToLower(s[i+2 : i+6]) {
				case "003c":
					r = '<'
				case "003e":
					r = '>'
				case "0026":
					r = '&'
				}
				if r != 0 {
					b.WriteByte(r)
					i += 5
					continue
				}
			}
			b.WriteByte(c)
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// writeCompact writes raw JSON to w without insignificant whitespace, so that ids derived
// from an item do not change when a client re-indents its history.
func writeCompact(w io.Writer, raw string) {
	start := 0
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			if start < i {
				io.WriteString(w, raw[start:i])
			}
			start = i + 1
		}
	}
	if start < len(raw) {
		io.WriteString(w, raw[start:])
	}
}

// hashID derives a deterministic id: prefix + 16 hex digits of sha256 over the NUL-separated
// fields, each JSON field compacted so that whitespace does not count.
func hashID(prefix string, fields ...string) string {
	h := sha256.New()
	for i, f := range fields {
		if i > 0 {
			h.Write([]byte{0})
		}
		writeCompact(h, f)
	}
	var sum [sha256.Size]byte
	return prefix + hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// itemID derives the id of a native input item that has none, from its position, its
// kind and its JSON: the same item at the same position keeps its id while the
// conversation grows (SPEC-DIGEST §15.4).
func itemID(index int, kind, raw string) string {
	return hashID("m", strconv.Itoa(index), kind, raw)
}

// partID is the id of the n-th part of message id.
func partID(messageID string, n int) string { return messageID + ".p" + strconv.Itoa(n) }
