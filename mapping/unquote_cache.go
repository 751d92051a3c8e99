package mapping

import (
	"strings"

	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/internal/twogen"
)

// knownLiterals remembers the values of long JSON string literals with escapes that earlier
// requests held, by the literals themselves. A coding agent re-sends its whole history on
// every request, and its tool results (file contents, command output) are full of \n, \t
// and \"; decoding each of them again is most of a request's decode, and the decoded copy
// most of what the decode allocates. A map lookup (a seeded hash and a byte comparison of
// the literal) costs a fraction of that and allocates nothing. A hit is exact — the stored
// literal equals the looked-up one byte for byte, and a value is a function of its literal
// only — so the decoded value is what decoding would give, whatever the input. A repeated
// text is also the same string, at the same address, on every request, which makes the
// later comparisons of it (the digest memo across requests) cheap.
//
// Bounded like the scanners' result caches: at most knownLiteralsBytes (literal, value
// and entry) in two generations, the older dropped when the newer is full; literals
// shorter than minKnownLiteral, or without an escape (those are substrings of the body
// already), are not kept.
var knownLiterals = newLiteralCache(knownLiteralsBytes)

const (
	knownLiteralsBytes = 32 << 20
	minKnownLiteral    = 256
	knownLiteralCost   = 64 // map entry and string headers, besides the literal and value
)

// literalCache maps literals to their values; keys are the map's own copies (a literal
// points into a request body, which it would otherwise keep alive).
type literalCache struct{ m *twogen.Map[string, string] }

func newLiteralCache(limit int64) literalCache {
	return literalCache{twogen.New(limit, literalCost, strings.Clone)}
}

func literalCost(k, v string) int64 { return int64(len(k)+len(v)) + knownLiteralCost }

// unquote returns the value of lit, a JSON string literal with an escape of at least
// minKnownLiteral bytes, from the cache or decoded and remembered.
func (c literalCache) unquote(lit string) string {
	if v, ok := c.m.Get(lit); ok {
		return v
	}
	if int64(len(lit)) > c.m.Limit()/8 {
		return jsontext.Unquote(lit)
	}
	// Decoded outside the lock; a value decoded meanwhile by another request wins, so
	// one copy is kept. The value is the same string on later requests: held, its digest
	// is found by its address (internal/heldtexts).
	v := c.m.Add(lit, string(jsontext.AppendUnquote(make([]byte, 0, len(lit)), lit)))
	heldtexts.Hold(v)
	return v
}

// KnownLiteralStats reports the memory (bytes) and literals held by the process-wide memo
// of decoded string literals across requests.
func KnownLiteralStats() (bytes, entries int64) {
	return knownLiterals.m.Stats()
}
