package oaiwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"
)

// compactSum is the reference: sha256 of encoding/json's compact form.
func compactSum(t testing.TB, raw string) [32]byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(raw)); err != nil {
		t.Fatalf("reference compact of %q: %v", raw, err)
	}
	return sha256.Sum256(b.Bytes())
}

func hashCompactSum(raw string) [32]byte {
	h := sha256.New()
	HashCompact(h, raw)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func TestHashCompactIgnoresOnlyInsignificantWhitespace(t *testing.T) {
	cases := []string{
		`{"role":"user","content":"hi"}`,
		"{ \"role\" : \"user\",\n\t\"content\" : \"hi\" }\r\n",
		`{"content":"a \"quoted\" word and spaces   inside"}`,
		`{"content":"ends with a backslash \\","x": [1, 2, 3]}`,
		`{"content":"\\\"","y" : "\\\\" , "z":"\\\\\"" }`,
		`["", " ", "\n", {"": ""}]`,
		`  "just a string with   spaces"  `,
		`{"unicode":"h\u00e9llo  wörld","n":-1.5e+10}`,
	}
	for _, c := range cases {
		if got, want := hashCompactSum(c), compactSum(t, c); got != want {
			t.Errorf("HashCompact(%q) differs from sha256 of the compact form", c)
		}
	}
	// Whitespace inside a string is content: changing it must change the id.
	if hashCompactSum(`{"a":"x y"}`) == hashCompactSum(`{"a":"xy"}`) {
		t.Error("whitespace inside a string was ignored")
	}
}

func FuzzHashCompact(f *testing.F) {
	f.Add(`{"role":"user","content":"hi"}`)
	f.Add("{ \"a\" : [ 1 , \"b \\\" c\" ] }")
	f.Add(`"\\\\\" "`)
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			HashCompact(sha256.New(), raw) // must not panic on anything
			return
		}
		if got, want := hashCompactSum(raw), compactSum(t, raw); got != want {
			t.Fatalf("HashCompact(%q) differs from sha256 of the compact form", raw)
		}
	})
}
