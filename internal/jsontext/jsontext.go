package jsontext

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// AppendString appends s as a JSON string literal. It escapes only what JSON requires
// (quote, backslash, control characters; \n, \r and \t in short form, the others as
// \u00XX) and replaces invalid UTF-8 with \ufffd. Unlike encoding/json it leaves <, > and
// & literal, and it does not escape U+2028/U+2029.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s, false) }

// AppendStringJS is AppendString that also escapes U+2028 and U+2029 (as \u2028 and
// \u2029), so the literal is valid JavaScript too.
func AppendStringJS(dst []byte, s string) []byte { return appendStringJSFast(dst, s) }

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

// StringEnd returns the index of the quote that closes the string literal opening at
// s[open], or len(s)-1 when it is unterminated. A quote closes the literal when an even
// number of backslashes precedes it. The search for quotes is vectorised, so skipping the
// long text values that make up most of a request costs little.
func StringEnd(s string, open int) int {
	for i := open + 1; i < len(s); {
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			return len(s) - 1
		}
		q += i
		bs := 0
		for j := q - 1; j > open && s[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 0 {
			return q
		}
		i = q + 1
	}
	return len(s) - 1
}

// SkipSpace returns the index of the first non-whitespace byte of s at or after i.
func SkipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue returns the index just past the JSON value that starts at s[i]. s must be valid
// JSON (Check): a container ends where its depth returns to zero, and string literals are
// skipped with StringEnd's vectorised search. It is how the codecs and the engine locate
// members without decoding them.
func SkipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		return StringEnd(s, i) + 1
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				i = StringEnd(s, i)
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(s)
	}
	for ; i < len(s); i++ { // number, true, false, null
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// Nesting returns how deeply the arrays and objects of s, a valid JSON text, nest: 0 for
// a scalar, 1 for {"a":1}, 2 for {"a":[]}.
func Nesting(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = StringEnd(s, i)
		case '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// IsCompact reports whether the JSON text s has no whitespace outside its string literals,
// so that it is already in the form json.Compact would give.
func IsCompact(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = StringEnd(s, i)
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}

// Unquote returns the value of the JSON string literal lit, quotes included, from a body
// that passed Check. It decodes exactly as gjson does (a lone surrogate escape becomes
// U+FFFD; other bytes are kept as they are) but copies the runs between escapes whole
// instead of byte by byte: tool results and prompts are full of \n and \". A literal
// without escapes is returned as a substring of lit; otherwise one allocation holds the
// value.
func Unquote(lit string) string {
	if len(lit) < 2 {
		return ""
	}
	s := lit[1 : len(lit)-1]
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	b := AppendUnquote(make([]byte, 0, len(s)), lit)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not kept: the string owns it
}

// AppendUnquote appends the value of the JSON string literal lit (as Unquote decodes it) to
// dst. The value is never longer than the literal, so a dst with len(lit) spare capacity is
// not reallocated: decoders use that to place many values in one buffer. It is the
// package's one unquote routine: Check compares escaped keys with it too (appendKeyName).
func AppendUnquote(dst []byte, lit string) []byte {
	if len(lit) < 2 {
		return dst
	}
	s := lit[1 : len(lit)-1]
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return append(dst, s...)
	}
	b := dst
	for {
		b = append(b, s[:i]...)
		if i+1 >= len(s) {
			return b
		}
		adv := 2
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			b = append(b, c)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if i+6 > len(s) {
				return b
			}
			r := hex4(s[i+2 : i+6])
			adv = 6
			if utf16.IsSurrogate(r) && r < 0xDC00 && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if r2 := hex4(s[i+8 : i+12]); r2 >= 0xDC00 && r2 < 0xE000 {
					r = utf16.DecodeRune(r, r2)
					adv = 12
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return b
		}
		s = s[i+adv:]
		if i = strings.IndexByte(s, '\\'); i < 0 {
			return append(b, s...)
		}
	}
}
