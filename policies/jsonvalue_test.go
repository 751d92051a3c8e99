package policies

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestJSONValueStrings: the tree's strings are what encoding/json decodes, escapes and
// surrogates included, and a document is accepted exactly when encoding/json accepts it.
func TestJSONValueStrings(t *testing.T) {
	pieces := []string{"a", "bc", " ", "é", "\"", "\\", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\b", "\\f", "\\r",
		"\\u0041", "\\u00e9", "\\u2028", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "\\ud83d\\u0041", "\\u12", "\\uZZZZ", "\\x", "\x01", "\n"}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 50000 {
		var b strings.Builder
		b.WriteString(`{"k":["`)
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if rng.IntN(4) > 0 {
			b.WriteString(`"`)
		}
		b.WriteString(`]}`)
		data := []byte(b.String())
		v, err := parseJSON(data)
		var want struct{ K []string }
		werr := json.Unmarshal(data, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: parseJSON error %v, encoding/json error %v", data, err, werr)
		}
		if err != nil {
			continue
		}
		got := v.elems[0].elems[0].str
		if got != want.K[0] || !utf8.ValidString(got) {
			t.Fatalf("%q: decoded %q, encoding/json %q", data, got, want.K[0])
		}
		// Written back and read again, the value is the same.
		again, err := parseJSON(v.appendJSON(nil))
		if err != nil || again.elems[0].elems[0].str != got {
			t.Fatalf("%q: round trip %q, %v", data, v.appendJSON(nil), err)
		}
	}
}

func TestJSONValueShape(t *testing.T) {
	doc := `{"b":1,"a":[true,null,{"c":"x"}],"d":"two","n":-1.5e3}`
	v, err := parseJSON([]byte(" " + doc + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(v.appendJSON(nil)); got != doc {
		t.Errorf("compact form %s, want %s (key order kept)", got, doc)
	}
	var seen []string
	v.eachString("", func(k, s string) { seen = append(seen, k+"="+s) })
	if strings.Join(seen, " ") != "c=x d=two" {
		t.Errorf("strings with keys: %v", seen)
	}
	// Duplicate keys are refused like any fault: a policy must not read one value where a
	// consumer reads the other (the input is then scanned as text and cannot be edited).
	for _, bad := range []string{`{"a":}`, `{"a":1} x`, `{"a":1,"a":2}`, strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), ``} {
		if _, err := parseJSON([]byte(bad)); err == nil {
			t.Errorf("%.40q accepted", bad)
		}
	}
	var got []string
	if err := topLevelMembers([]byte(doc), func(k string) bool { return k != "a" }, func(k string, v jsonValue) { got = append(got, k+":"+string(v.appendJSON(nil))) }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != `b:1 d:"two" n:-1.5e3` {
		t.Errorf("top-level members %v", got)
	}
	if err := topLevelMembers([]byte(`[1]`), func(string) bool { return true }, func(string, jsonValue) {}); err == nil {
		t.Error("an array was read as an object")
	}
}
