package anthropic

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// commonPrefix over pieces agrees with a byte-by-byte comparison of the joined string,
// wherever the first difference falls (inside a chunk, at a piece boundary, nowhere).
func TestCommonPrefixOfPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for k := 0; k < 2000; k++ {
		whole := strings.Repeat("ab", rng.IntN(6000))
		var pieces []string
		for rest := whole; rest != ""; {
			n := min(len(rest), 1+rng.IntN(5000))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		s := []byte(whole + "tail")
		if len(whole) > 0 && rng.IntN(3) > 0 {
			s[rng.IntN(len(whole))] = 'x'
		}
		if rng.IntN(4) == 0 {
			s = s[:rng.IntN(len(s)+1)]
		}
		want := 0
		for want < len(s) && want < len(whole) && s[want] == whole[want] {
			want++
		}
		if got := commonPrefix(string(s), pieces); got != want {
			t.Fatalf("commonPrefix = %d, want %d (%d bytes in %d pieces)", got, want, len(whole), len(pieces))
		}
	}
}
