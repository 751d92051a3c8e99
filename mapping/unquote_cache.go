package mapping

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hookproxy/hookproxy/internal/jsontext"
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
var knownLiterals = &literalCache{limit: knownLiteralsBytes, cur: map[string]string{}}

const (
	knownLiteralsBytes = 32 << 20
	minKnownLiteral    = 256
	knownLiteralCost   = 64 // map entry and string headers, besides the literal and value
)

type literalCache struct {
	mu                  sync.Mutex
	cur, prev           map[string]string
	curBytes, prevBytes int64
	limit               int64
	held, entries       atomic.Int64
}

// unquote returns the value of lit, a JSON string literal with an escape of at least
// minKnownLiteral bytes, from the cache or decoded and remembered.
func (c *literalCache) unquote(lit string) string {
	c.mu.Lock()
	v, ok := c.cur[lit]
	if !ok {
		if v, ok = c.prev[lit]; ok {
			// In use again: into the newer generation, under its own copy of the literal
			// (lit points into a request body).
			n := c.cost(lit, v)
			delete(c.prev, lit)
			c.prevBytes -= n
			c.held.Add(-n)
			c.entries.Add(-1)
			c.insert(strings.Clone(lit), v)
		}
	}
	c.mu.Unlock()
	if ok {
		return v
	}
	if int64(len(lit)) > c.limit/8 {
		return jsontext.Unquote(lit)
	}
	// Decoded outside the lock; the literal is copied so that the cache does not keep the
	// request body it points into alive.
	v = string(jsontext.AppendUnquote(make([]byte, 0, len(lit)), lit))
	k := strings.Clone(lit)
	c.mu.Lock()
	if w, ok := c.cur[k]; ok {
		v = w // decoded meanwhile by another request: one copy is kept
	} else {
		c.insert(k, v)
	}
	c.mu.Unlock()
	return v
}

func (c *literalCache) cost(k, v string) int64 {
	return int64(len(k)+len(v)) + knownLiteralCost
}

func (c *literalCache) insert(k, v string) {
	n := c.cost(k, v)
	c.cur[k] = v
	c.curBytes += n
	c.held.Add(n)
	c.entries.Add(1)
	if c.curBytes >= c.limit/2 {
		c.held.Add(-c.prevBytes)
		c.entries.Add(-int64(len(c.prev)))
		c.prev, c.prevBytes = c.cur, c.curBytes
		c.cur, c.curBytes = make(map[string]string, len(c.prev)), 0
	}
}

// KnownLiteralStats reports the memory (bytes) and literals held by the process-wide memo
// of decoded string literals across requests.
func KnownLiteralStats() (bytes, entries int64) {
	return knownLiterals.held.Load(), knownLiterals.entries.Load()
}
