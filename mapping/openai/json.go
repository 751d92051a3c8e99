package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// maxRequestDepth bounds the nesting of a client body. Real requests nest a few levels (tool
// parameter schemas the deepest); the bound keeps every later walk linear and shallow.
const maxRequestDepth = 256

// checkClientJSON validates a client body before anything reads it: syntax, nesting depth,
// and no duplicate object keys. Duplicate keys matter because gjson reads the first
// occurrence while most upstream parsers keep the last one, so a body with two "messages"
// (or two "content") would let a policy inspect one value while the model receives the
// other. One linear pass, no allocation for ordinary bodies.
//
// raw and body are the same bytes; body is the string the decoder reads anyway.
// encoding/json validates first because it is iterative with its own depth limit, where a
// recursive validator could exhaust the stack on a hostile body.
func checkClientJSON(raw []byte, body string) error {
	if !json.Valid(raw) {
		return fmt.Errorf("body is not valid JSON")
	}
	var stack []keyFrame
	expectKey := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
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
			end := stringEnd(body, i)
			if expectKey && len(stack) > 0 {
				key := unquoteKey(body[i : end+1])
				f := &stack[len(stack)-1]
				if !f.add(key) {
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

// unquoteKey returns the value of a JSON string literal. Keys almost never hold escapes, so
// the common case is a substring; "mess\u0061ges" still compares equal to "messages".
func unquoteKey(lit string) string {
	if strings.IndexByte(lit, '\\') < 0 {
		return lit[1 : len(lit)-1]
	}
	var s string
	if json.Unmarshal([]byte(lit), &s) != nil {
		return lit
	}
	return s
}

// stringEnd returns the index of the closing quote of the JSON string opening at i. The body
// is already known to be valid JSON.
func stringEnd(b string, i int) int {
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

// jsonString returns s as a JSON string literal.
func jsonString(s string) string { return string(appendJSONString(make([]byte, 0, len(s)+2), s)) }

// appendJSONString appends s as a JSON string literal. Unlike encoding/json it does not
// escape <, > and &: text goes upstream as the client wrote it, as OpenAI itself writes it.
// Invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
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
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
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

// writeCompact writes raw JSON to w without insignificant whitespace, so that ids derived
// from a message do not change when a client re-indents its history.
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
