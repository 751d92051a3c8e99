package jsontext

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// AppendStringJS (the word-at-a-time writer) must write what the rune-by-rune reference
// appendString(dst, s, true) writes, and AppendStringGo what encoding/json writes (HTML
// escaping off): every string of up to three symbols from an alphabet of the bytes that matter
// (escapes, the ASCII edges, UTF-8 lead and continuation bytes, U+2028), padded to cross
// the eight-byte word boundary at every offset, and random strings.
func TestAppendStringJSMatchesReference(t *testing.T) {
	alphabet := []string{"a", " ", "~", "\x7f", "\x00", "\x1f", "\n", "\r", "\t", "\"", "\\", "/", "<", "&",
		"é", "\u2028", "\u2029", "\u2027", "\u202a", "€", "🎉", "\ufffd", "\xff", "\xe2", "\xe2\x80", "\x80", "\xc3", "\xf0\x9f"}
	alphabet = append(alphabet, "\b", "\f", "\x07", "\x0e")
	check := func(s string) {
		t.Helper()
		if got, want := AppendStringJS(nil, s), appendString(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("AppendStringJS(%q) = %s, want %s", s, got, want)
		}
		if got, want := AppendStringGo(nil, s), goJSON(s); !bytes.Equal(got, want) {
			t.Fatalf("AppendStringGo(%q) = %s, want encoding/json's %s", s, got, want)
		}
	}
	var sym func(prefix string, n int)
	sym = func(prefix string, n int) {
		for pad := 0; pad < 9; pad++ {
			check(strings.Repeat("x", pad) + prefix + strings.Repeat("y", 9-pad))
		}
		if n == 0 {
			return
		}
		for _, a := range alphabet {
			sym(prefix+a, n-1)
		}
	}
	sym("", 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = byte(rng.IntN(256))
			default:
				b[i] = byte(0x20 + rng.IntN(0x60))
			}
		}
		check(string(b))
	}
}

func FuzzAppendStringJS(f *testing.F) {
	for _, s := range []string{"", "plain text of some length", "q\"b\\\n\t\x01", "é\u2028\xff\xe2\x80", "abcdefgh\x1fijklmnop"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendStringJS(nil, s), appendString(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("AppendStringJS(%q) = %s, want %s", s, got, want)
		}
		if got, want := AppendStringGo(nil, s), goJSON(s); !bytes.Equal(got, want) {
			t.Fatalf("AppendStringGo(%q) = %s, want encoding/json's %s", s, got, want)
		}
	})
}

// goJSON is s as encoding/json writes it with HTML escaping off: what AppendStringGo must
// write (the AHP frames are byte for byte encoding/json's).
func goJSON(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
