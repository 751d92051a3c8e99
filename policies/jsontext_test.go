package policies

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// stringByteByByte is the straightforward decoder that jsonParser.string replaced (a
// buffer grown byte by byte); the two must agree on the value, the error and the position.
func (p *jsonParser) stringByteByByte() (string, error) {
	p.pos++
	buf := []byte{}
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.data) {
			return "", p.errorf("unterminated escape")
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					save := p.pos
					p.pos += 2
					if lo, ok := p.hex4(); ok {
						if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
							r2 = dec
						} else {
							p.pos = save
						}
					} else {
						p.pos = save
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errorf("invalid escape %q", e)
		}
	}
	return "", p.errorf("unterminated string")
}

func TestJSONParserString(t *testing.T) {
	pieces := []string{"a", "bc", " ", "é", "\xff", "\"", "\\", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\b", "\\f", "\\r",
		"\\u0041", "\\u00e9", "\\u2028", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "\\ud83d\\u0041", "\\u12", "\\uZZZZ", "\\x", "\x01", "\n"}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 50000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if rng.IntN(4) > 0 {
			b.WriteString(`"`)
		}
		if rng.IntN(2) == 0 {
			b.WriteString(`,"x"`)
		}
		data := []byte(b.String())
		p, q := jsonParser{data: data}, jsonParser{data: data}
		got, gerr := p.string()
		want, werr := q.stringByteByByte()
		if got != want || (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || p.pos != q.pos {
			t.Fatalf("%q: string() = %q, %v, pos %d; want %q, %v, pos %d", data, got, gerr, p.pos, want, werr, q.pos)
		}
	}
}
