package jsontext

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// appendStringJSFast writes s as a JSON string literal. It escapes only what JSON requires
// (quote, backslash, control characters; \n, \r and \t in short form, the others as
// \u00XX) plus U+2028/U+2029, and replaces invalid UTF-8 with \ufffd. HTML characters
// stay literal so that patterns such as "> /dev/sda" match the canonical text and audit
// records stay readable.
//
// The output is byte for byte that of appendString(dst, s, true) (TestAppendStringJSMatchesReference
// and FuzzAppendStringJS hold them together, and hold AppendStringGo to encoding/json); it is the implementation of AppendStringJS. Every modify effect of a redacting policy re-encodes the whole message list, about
// 32 KiB for a typical agent request, and profiling showed the shared writer (a
// utf8.ValidString pass, then one table lookup and one append decision per byte) taking
// 25-40 µs of that, about as long as the detectors' whole scan. Agent text is almost all
// ASCII, so this version copies and tests eight bytes per step (a word-at-a-time test,
// below) and jumps straight to the next byte that needs escaping or is not ASCII; it decodes
// non-ASCII text rune by rune, which gives the same result as the shared writer's
// whole-string validity check.
func appendStringJSFast(dst []byte, s string) []byte {
	// AppendStringJSBody leaves room for the closing quote.
	return append(AppendStringJSBody(append(dst, '"'), s), '"')
}

// AppendStringJSBody writes s escaped as in appendStringJSFast, without the quotes.
//
// Plain bytes are stored a word at a time (the word is written before it is tested, and
// the output position then advances past its plain bytes only), so buf, the whole capacity
// of dst, keeps room for the rest of s plus one word; an escape, longer than the byte it
// replaces, first makes room again. That room check is the only capacity test per escape,
// about 15% faster on agent text (an escape every 30 bytes or so: line breaks, quotes,
// tabs) than appending each run of plain bytes and then the escape.
func AppendStringJSBody(dst []byte, s string) []byte { return appendStringBody(dst, s, false) }

// AppendStringGo writes s as a JSON string literal exactly as encoding/json writes a string
// with HTML escaping off: as appendStringJSFast, except that \b and \f are in short form
// too. It is how the AHP event encoder keeps its frames byte for byte encoding/json's.
func AppendStringGo(dst []byte, s string) []byte {
	return append(appendStringBody(append(dst, '"'), s, true), '"')
}

// appendStringBody is AppendStringJSBody; shortBF writes \b and \f in short form.
func appendStringBody(dst []byte, s string, shortBF bool) []byte {
	const hex = "0123456789abcdef"
	const slack = 8 + 6 // a word, and the longest escape
	o := len(dst)
	buf := slices.Grow(dst, len(s)+slack)
	buf = buf[:cap(buf)]
	i := 0
	for i < len(s) {
		// Copy up to the next byte that is not plain: a word at a time, then the tail.
		for i+8 <= len(s) {
			w := load64(s, i)
			binary.LittleEndian.PutUint64(buf[o:o+8], w)
			if m := specialBytes(w); m != 0 {
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
		if len(buf)-o < len(s)-i+slack {
			buf = slices.Grow(buf[:o], len(s)-i+slack)
			buf = buf[:cap(buf)]
		}
		c := s[i]
		if c < utf8.RuneSelf {
			buf[o] = '\\'
			switch c {
			case '"', '\\':
				buf[o+1] = c
			case '\n':
				buf[o+1] = 'n'
			case '\r':
				buf[o+1] = 'r'
			case '\t':
				buf[o+1] = 't'
			case '\b', '\f':
				if shortBF {
					buf[o+1] = 'b'
					if c == '\f' {
						buf[o+1] = 'f'
					}
					break
				}
				buf[o+1], buf[o+2], buf[o+3], buf[o+4], buf[o+5] = 'u', '0', '0', hex[c>>4], hex[c&0xF]
				o += 4
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
	return buf[:o]
}

// load64 reads s[i:i+8] as a little-endian word (the compiler turns it into one load).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// specialBytes returns a word with the high bit set in the bytes of x that are not copied
// as they are, and in none before the first of them: control characters, quote, backslash
// and non-ASCII bytes. It uses the "has a byte less than n" and "has a zero byte" word
// tests, (x - n·0x01…) &^ x & 0x80…, which flag exactly the first such byte (a borrow can
// only cause false flags above a true one), so the trailing zero count of the result
// locates the first byte to handle.
func specialBytes(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * lo)
	b := x ^ ('\\' * lo)
	return (x | (x-0x20*lo)&^x | (q-lo)&^q | (b-lo)&^b) & hi
}
