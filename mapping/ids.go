package mapping

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashID derives an id from content, since native messages often have none: prefix followed by
// the first n bytes, in hex, of the SHA-256 of parts joined by NUL bytes, so that ("ab", "c")
// and ("a", "bc") differ. Any replica derives the same id from the same request, which is what
// lets a later request reproduce it. n is at most 32.
//
// The hash stays a local of concrete type, so the compiler keeps it and the parts' bytes
// off the heap (passing it to a writer function would cost two allocations an id: +300 on
// a Gemini request decode). The Responses codec, whose ids hash compacted JSON, has its
// own hashID for that reason.
func HashID(prefix string, n int, parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	return prefix + hex.EncodeToString(h.Sum(sum[:0])[:n])
}
