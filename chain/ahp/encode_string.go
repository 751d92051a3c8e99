package ahp

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// appendJSONString appends s as a JSON string literal exactly as encoding/json writes a
// string with HTML escaping off: quote and backslash escaped; \b, \f, \n, \r and \t in
// short form and the other control characters as \u00XX; invalid UTF-8 replaced by \ufffd;
// U+2028 and U+2029 escaped; everything else, <, > and & included, as it is.
//
// Agent text is almost all ASCII, so plain bytes are copied and tested eight at a time
// (specialWord) and the writer jumps straight to the next byte that needs attention. The
// word is stored before it is tested, so the buffer keeps room for the rest of s plus one
// word and the longest escape.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	const slack = 8 + 6 // a word, and the longest escape
	dst = append(dst, '"')
	o := len(dst)
	buf := slices.Grow(dst, len(s)+slack+1)
	buf = buf[:cap(buf)]
	i := 0
	for i < len(s) {
		for i+8 <= len(s) {
			w := loadWord(s, i)
			binary.LittleEndian.PutUint64(buf[o:o+8], w)
			if m := specialWord(w); m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				i += k
				o += k
				goto special
			}
			i += 8
			o += 8
		}
		for i < len(s) && s[i] >= 0x20 && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\' {
			buf[o] = s[i]
			i++
			o++
		}
		if i >= len(s) {
			break
		}
	special:
		if len(buf)-o < len(s)-i+slack+1 {
			buf = slices.Grow(buf[:o], len(s)-i+slack+1)
			buf = buf[:cap(buf)]
		}
		c := s[i]
		if c < utf8.RuneSelf {
			buf[o] = '\\'
			switch c {
			case '"', '\\':
				buf[o+1] = c
			case '\b':
				buf[o+1] = 'b'
			case '\f':
				buf[o+1] = 'f'
			case '\n':
				buf[o+1] = 'n'
			case '\r':
				buf[o+1] = 'r'
			case '\t':
				buf[o+1] = 't'
			default:
				buf[o+1], buf[o+2], buf[o+3], buf[o+4], buf[o+5] = 'u', '0', '0', hex[c>>4], hex[c&0xF]
				o += 4
			}
			o += 2
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			o += copy(buf[o:], `\ufffd`)
		case r == '\u2028' || r == '\u2029':
			o += copy(buf[o:], `\u202`)
			buf[o] = hex[r&0xF]
			o++
		default:
			o += copy(buf[o:], s[i:i+size])
		}
		i += size
	}
	buf[o] = '"'
	return buf[:o+1]
}

// loadWord reads s[i:i+8] as a little-endian word (the compiler makes it one load).
func loadWord(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// specialWord returns a word with the high bit set in the bytes of x that are not copied
// as they are, and in none before the first of them: control characters, quote, backslash
// and non-ASCII bytes. It is the "has a byte less than n" and "has a zero byte" word test,
// (x - n·0x01…) &^ x & 0x80…, which flags exactly the first such byte (a borrow can only
// cause false flags above a true one), so the trailing zero count locates it.
func specialWord(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * lo)
	b := x ^ ('\\' * lo)
	return (x | (x-0x20*lo)&^x | (q-lo)&^q | (b-lo)&^b) & hi
}
