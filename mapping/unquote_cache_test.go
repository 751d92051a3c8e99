package mapping

import (
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// A long literal with escapes is decoded once and its value reused by later decodes of the
// same literal (the same string, no copy); a literal that differs in one byte, escapes
// included, gets its own value. Every value is what encoding/json decodes.
func TestKnownLiteralsAreExact(t *testing.T) {
	text := strings.Repeat("line\twith \"quotes\" and \\ slashes é\n", 20)
	lit := string(jsontext.AppendString(nil, text))
	// Same value, other spelling (\u escapes for two characters): a different literal.
	other := strings.Replace(lit, `\t`, `\u0009`, 1)
	// One character changed in the text.
	changed := strings.Replace(lit, "slashes", "slasheS", 1)
	var a, b Arena
	first := a.Unquote(string([]byte(lit))) // bodies are distinct buffers
	again := b.Unquote(string([]byte(lit)))
	if first != text || again != text {
		t.Fatalf("decoded %.40q / %.40q, want %.40q", first, again, text)
	}
	if unsafe.StringData(first) != unsafe.StringData(again) {
		t.Errorf("the second decode of a known literal made a new copy")
	}
	for _, l := range []string{other, changed} {
		var want string
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			t.Fatal(err)
		}
		if got := a.Unquote(l); got != want {
			t.Errorf("Unquote(%.40s…) = %.40q, want %.40q", l, got, want)
		}
	}
	if got := a.Unquote(changed); got == text {
		t.Errorf("a changed literal got the known literal's value")
	}
	// Below the size kept, a literal is decoded into the arena each time.
	short := `"a\nb"`
	if x, y := a.Unquote(short), b.Unquote(short); x != "a\nb" || unsafe.StringData(x) == unsafe.StringData(y) {
		t.Errorf("short literal: %q, shared %v", x, unsafe.StringData(x) == unsafe.StringData(y))
	}
}

// The memo holds at most its limit, whatever passes through it, and keeps no request body
// alive (its keys are copies).
func TestKnownLiteralsAreBounded(t *testing.T) {
	c := newLiteralCache(64 << 10)
	for i := 0; i < 2000; i++ {
		text := strings.Repeat("x\n", 200) + strings.Repeat("y", i%50) + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		lit := string(jsontext.AppendString(nil, text))
		if got := c.unquote(lit); got != text {
			t.Fatalf("literal %d decoded to %.20q", i, got)
		}
		if held, _ := c.m.Stats(); held > c.m.Limit()+literalCost(lit, text) {
			t.Fatalf("after %d literals the memo holds %d bytes, limit %d", i+1, held, c.m.Limit())
		}
	}
	if held, entries := c.m.Stats(); held == 0 || entries == 0 {
		t.Errorf("the memo kept nothing")
	}
	// The value comes from the memo, not a fresh decode, and the key is the memo's copy.
	text := strings.Repeat("k\n", 200)
	body := []byte(jsontext.AppendString(nil, text))
	first := c.unquote(string(body))
	if again := c.unquote(string(jsontext.AppendString(nil, text))); unsafe.StringData(again) != unsafe.StringData(first) {
		t.Errorf("a remembered literal was decoded again")
	}
	for i := range body {
		body[i] = ' ' // the request's bytes are reused: the memo must not see it
	}
	if again := c.unquote(string(jsontext.AppendString(nil, text))); again != text {
		t.Errorf("the memo keeps a request's bytes as a key: %.20q", again)
	}
}

// FuzzKnownLiterals: a value from the memo is the value the literal decodes to, the first
// time and every time after.
func FuzzKnownLiterals(f *testing.F) {
	f.Add(strings.Repeat(`ab\n`, 100), 3)
	f.Add(strings.Repeat(`\u00e9\ud83d\ude00`, 30), 0)
	f.Add(strings.Repeat(`\ud800 x\"`, 60), 1)
	f.Fuzz(func(t *testing.T, body string, k int) {
		body = strings.Repeat(body, 1+min(max(k, 0), 8))
		lit := `"` + body + `"`
		if jsontext.Check([]byte(lit), 1) != nil || !strings.Contains(body, `\`) {
			t.Skip()
		}
		want := jsontext.Unquote(lit)
		var a, b Arena
		if got := a.Unquote(lit); got != want {
			t.Fatalf("first decode %q, want %q", got, want)
		}
		if got := b.Unquote(string([]byte(lit))); got != want {
			t.Fatalf("second decode %q, want %q", got, want)
		}
	})
}
