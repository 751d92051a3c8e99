package jsontext

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, plain, js string }{
		{"plain", `"plain"`, `"plain"`},
		{"<a&b>", `"<a&b>"`, `"<a&b>"`},
		{"q\"b\\", `"q\"b\\"`, `"q\"b\\"`},
		{"\n\r\t\b\f\x00\x1f", `"\n\r\t\u0008\u000c\u0000\u001f"`, `"\n\r\t\u0008\u000c\u0000\u001f"`},
		{"é→\u2028x\u2029", "\"é→\u2028x\u2029\"", `"é→\u2028x\u2029"`},
		{"a\xffb\xe2\x80", `"a\ufffdb\ufffd\ufffd"`, `"a\ufffdb\ufffd\ufffd"`},
		{"bad\xff\u2028", "\"bad\\ufffd\u2028\"", `"bad\ufffd\u2028"`},
	} {
		if got := string(AppendString(nil, tc.in)); got != tc.plain {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.plain)
		}
		if got := string(AppendStringJS([]byte("x"), tc.in)); got != "x"+tc.js {
			t.Errorf("AppendStringJS(%q) = %s, want x%s", tc.in, got, tc.js)
		}
	}
}

func TestUnquoteMatchesGjson(t *testing.T) {
	for _, lit := range []string{
		`""`, `"plain"`, `"a\nb\tc\"d\\e\/f\bg\fh\ri"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00 smile"`,
		`"\ud800 lone high"`, `"\udc00 lone low"`, `"\ud800\u0041"`, `"tail\\"`, `"\u0000"`,
		`"\ud800\ud800\udc00"`, `"\udc00\ud800"`, "\"\xff\xfe\\n\"", "\"\xe2\x82\\n\"", "\"\xed\xa0\x80\\ud800\"",
	} {
		if got, want := Unquote(lit), gjson.Parse(lit).Str; got != want {
			t.Errorf("Unquote(%s) = %q, gjson %q", lit, got, want)
		}
	}
}

func FuzzUnquote(f *testing.F) {
	f.Add(`"a\nb\u00e9\ud83d\ude00"`)
	f.Add(`"\ud800\udc00\\"`)
	f.Fuzz(func(t *testing.T, lit string) {
		lit = strings.Trim(lit, " \t\r\n") // a literal alone, as the decoders pass it
		if !json.Valid([]byte(lit)) || len(lit) < 2 || lit[0] != '"' {
			return
		}
		want := gjson.Parse(lit).Str
		if got := Unquote(lit); got != want {
			t.Fatalf("Unquote(%s) = %q, gjson %q", lit, got, want)
		}
		// AppendUnquote keeps what dst holds and fits in len(lit) spare bytes (decoders
		// rely on that to place many values in one buffer without reallocating).
		dst := make([]byte, 3, 3+len(lit))
		copy(dst, "pre")
		got := AppendUnquote(dst, lit)
		if string(got) != "pre"+want || &got[0] != &dst[0] {
			t.Fatalf("AppendUnquote(pre, %s) = %q (same buffer %v), want %q", lit, got, &got[0] == &dst[0], "pre"+want)
		}
		// Check's key names are encoding/json's decoding: AppendUnquote plus the byte-wise
		// U+FFFD fix-up.
		var std string
		if err := json.Unmarshal([]byte(lit), &std); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", lit, err)
		}
		if key, start := appendKeyName(nil, []byte(lit)); string(key[start:]) != std {
			t.Fatalf("appendKeyName(%s) = %q, encoding/json %q", lit, key[start:], std)
		}
	})
}

func TestNesting(t *testing.T) {
	for s, want := range map[string]int{
		`1`: 0, `"[{"`: 0, `{}`: 1, `{"a":1}`: 1, `{"a":[]}`: 2, `[[],[[]]]`: 3,
		`{"a":"]]]","b":[{"c":"\"[["}]}`: 3,
	} {
		if got := Nesting(s); got != want {
			t.Errorf("Nesting(%s) = %d, want %d", s, got, want)
		}
	}
}
