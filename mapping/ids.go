package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
)

// HashID derives an id from content (SPEC-DIGEST §15.4): prefix followed by the first n
// bytes, in hex, of the SHA-256 of parts joined by NUL bytes, so that ("ab", "c") and
// ("a", "bc") differ. Any replica derives the same id from the same request, which is what
// lets a later request reproduce it. n is at most 32.
//
// Codecs whose ids must ignore how the JSON is written (whitespace, cache_control
// breakpoints) hash their own canonical form instead: see the anthropic idHash and the
// responses hashID.
func HashID(prefix string, n int, parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		io.WriteString(h, p)
	}
	var sum [sha256.Size]byte
	return prefix + hex.EncodeToString(h.Sum(sum[:0])[:n])
}
