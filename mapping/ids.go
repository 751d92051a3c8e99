package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// HashID derives an id from content (SPEC-DIGEST §15.4): prefix followed by the first n
// bytes, in hex, of the SHA-256 of parts joined by NUL bytes, so that ("ab", "c") and
// ("a", "bc") differ. Any replica derives the same id from the same request, which is what
// lets a later request reproduce it. n is at most 32.
func HashID(prefix string, n int, parts ...string) string {
	return HashIDOf(prefix, n, writeString, parts...)
}

// HashIDOf is HashID with each part written to the hash by write: a codec whose ids must
// not change with how a client writes its JSON passes one that hashes a canonical form
// (the Responses codec compacts whitespace away).
func HashIDOf(prefix string, n int, write func(h hash.Hash, part string), parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		write(h, p)
	}
	var sum [sha256.Size]byte
	return prefix + hex.EncodeToString(h.Sum(sum[:0])[:n])
}

func writeString(h hash.Hash, s string) { io.WriteString(h, s) }
