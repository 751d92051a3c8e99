// Package jsontext holds the small JSON-text helpers shared by the mappings and the
// policies: a duplicate-key tracker for strict client-JSON checks, scanning and unquoting
// of string literals in bytes already known to be valid JSON, and a string-literal writer
// that leaves HTML characters as they are.
package jsontext

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// smallKeys is how many keys a KeySet keeps in a slice before it switches to a map.
const smallKeys = 16

// KeySet records the keys of one JSON object to detect duplicates. Small objects keep their
// keys in a slice; past 16 keys it switches to a map, so huge objects stay linear. The zero
// value is ready to use.
type KeySet struct {
	keys []string
	set  map[string]struct{}
}

// Add records key and reports false when the set already has it.
func (k *KeySet) Add(key string) bool {
	if k.set != nil {
		if _, dup := k.set[key]; dup {
			return false
		}
		k.set[key] = struct{}{}
		return true
	}
	for _, s := range k.keys {
		if s == key {
			return false
		}
	}
	if len(k.keys) < smallKeys {
		k.keys = append(k.keys, key)
		return true
	}
	k.set = make(map[string]struct{}, 2*(smallKeys+1))
	for _, s := range k.keys {
		k.set[s] = struct{}{}
	}
	k.set[key] = struct{}{}
	k.keys = nil
	return true
}

// StringEnd returns the index of the quote closing the JSON string that opens at b[i], or
// len(b)-1 when the string is unterminated.
func StringEnd(b []byte, i int) int {
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

// UnquoteKey returns the value of the JSON string literal lit (quotes included), so that
// "inp\u0075t" and "input" compare equal. Escapes are rare in keys, so the common case is
// a plain substring; a literal that does not decode is returned as it is.
func UnquoteKey(lit []byte) string {
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return string(lit)
	}
	return s
}

// AppendString appends s as a JSON string literal. It escapes only what JSON requires
// (quote, backslash, control characters; \n, \r and \t in short form, the others as
// \u00XX) and replaces invalid UTF-8 with \ufffd. Unlike encoding/json it leaves <, > and
// & literal, and it does not escape U+2028/U+2029.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s, false) }

// AppendStringJS is AppendString that also escapes U+2028 and U+2029 (as \u2028 and
// \u2029), so the literal is valid JavaScript too.
func AppendStringJS(dst []byte, s string) []byte { return appendString(dst, s, true) }

// safe marks the bytes copied as they are when the string is valid UTF-8: printable ASCII
// except quote and backslash, and every non-ASCII byte except 0xE2, the lead byte of
// U+2028/U+2029 (decided rune by rune).
var safe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\' && c != 0xE2
	}
	return t
}()

func appendString(dst []byte, s string, lineSeps bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	valid := utf8.ValidString(s)
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if valid && safe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
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
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
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
		if lineSeps && (r == '\u2028' || r == '\u2029') {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
