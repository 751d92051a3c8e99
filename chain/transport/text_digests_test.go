package transport

import (
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"
)

// TestTextDigestsAreExact: the digest of a text is its SHA-256 however the text reaches
// the memo — the same bytes in another request's memory (answered from the texts of
// earlier requests), a text differing in one byte (never another text's digest), a short
// text, the empty text, or without a memo.
func TestTextDigestsAreExact(t *testing.T) {
	base := strings.Repeat("tool output line\n", 40)
	texts := []string{base, base[:len(base)-1] + "?", "short", "", strings.Repeat("x", 5000)}
	for round := 0; round < 3; round++ {
		td := NewTextDigests() // a new request
		for _, s := range texts {
			in := strings.Clone(s) // this request's copy
			want := sha256.Sum256([]byte(s))
			if got := td.Sum(in); got != want {
				t.Fatalf("round %d: digest of a %d-byte text differs from its SHA-256", round, len(s))
			}
			if got := (*TextDigests)(nil).Sum(in); got != want {
				t.Fatalf("round %d: digest without a memo differs", round)
			}
		}
	}
	if _, ok := knownTexts.get(strings.Clone(base)); !ok {
		t.Error("a text seen by earlier requests is not remembered")
	}
}

// TestKnownTextsAreBounded: however many distinct texts pass, the memo across requests
// holds at most its limit, and what is in use survives.
func TestKnownTextsAreBounded(t *testing.T) {
	c := newTextCache(256 << 10)
	keep := strings.Repeat("k", 100)
	c.put(keep, sha256.Sum256([]byte(keep)))
	for i := 0; i < 20000; i++ {
		s := strings.Repeat("t", 80) + strconv.Itoa(i)
		c.put(s, sha256.Sum256([]byte(s)))
		if i%50 == 0 {
			if _, ok := c.get(keep); !ok {
				t.Fatalf("after %d texts the one in use was dropped", i)
			}
		}
		if h, _ := c.m.Stats(); h > c.m.Limit() {
			t.Fatalf("after %d texts the memo holds %d bytes, limit %d", i, h, c.m.Limit())
		}
	}
	if h, _ := c.m.Stats(); h < c.m.Limit()/4 {
		t.Fatalf("the memo holds only %d bytes: it keeps nothing", h)
	}
	if _, ok := c.get(strings.Repeat("t", 80) + "1"); ok {
		t.Error("a text unused since the start survived 20,000 others")
	}
}
