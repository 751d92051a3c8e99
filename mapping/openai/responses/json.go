package responses

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// hashID derives a deterministic id: prefix + 16 hex digits of sha256 over the NUL-separated
// fields, each JSON field compacted so that whitespace does not count.
func hashID(prefix string, fields ...string) string {
	h := sha256.New()
	for i, f := range fields {
		if i > 0 {
			h.Write([]byte{0})
		}
		oaiwire.HashCompact(h, f)
	}
	var sum [sha256.Size]byte
	return prefix + hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// itemID derives the id of a native input item that has none, from its position, its
// kind and its JSON: the same item at the same position keeps its id while the
// conversation grows.
func itemID(index int, kind, raw string) string {
	return hashID("m", strconv.Itoa(index), kind, raw)
}

// partID is the id of the n-th part of message id.
func partID(messageID string, n int) string { return messageID + ".p" + strconv.Itoa(n) }
