package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestHashID(t *testing.T) {
	sum := sha256.Sum256([]byte("ab\x00c"))
	if got, want := HashID("x_", 8, "ab", "c"), "x_"+hex.EncodeToString(sum[:8]); got != want {
		t.Fatalf("HashID = %s, want %s", got, want)
	}
	// The NUL separator keeps part boundaries: moving a byte between parts changes the id.
	if HashID("", 16, "ab", "c") == HashID("", 16, "a", "bc") {
		t.Fatal(`("ab","c") and ("a","bc") derive the same id`)
	}
	if got := HashID("p", 32); len(got) != 1+64 {
		t.Fatalf("a whole digest is 64 hex digits, got %q", got)
	}
}
