package transport

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"unsafe"

	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/internal/twogen"
)

// TextDigests is one request's memo of the SHA-256 of the texts its canonical content
// holds, so that each text is hashed once per request however many parts of the request
// need its digest: the proxy's settlement records (fingerprints of known history) and the
// built-in scanners' result cache (policies) both key on it. In-process policies receive
// structural copies of the request's messages that share the texts' bytes, so a text is
// recognised by its bytes' address and length; the memo keeps every text it saw, so that
// memory is not reused for another text while the memo lives. A text the process keeps
// across requests is recognised by its address across requests (internal/heldtexts). A
// text neither has seen (a
// rewrite, a joined message, this request's copy of history) is looked up among the texts of
// earlier requests (knownTexts), else hashed, and remembered. Safe for concurrent use.
type TextDigests struct {
	mu sync.Mutex
	m  map[textKey]textDigest
}

type textKey struct {
	p *byte
	n int
}

type textDigest struct {
	s   string // keeps the bytes the key points at alive
	sum [sha256.Size]byte
}

// NewTextDigests returns an empty memo.
func NewTextDigests() *TextDigests { return &TextDigests{} }

// Sum returns the SHA-256 of s. A nil memo hashes every time.
func (t *TextDigests) Sum(s string) [sha256.Size]byte {
	if t == nil || len(s) == 0 {
		return sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
	}
	// A text the process keeps across requests (a decoded literal of an earlier request)
	// is recognised by its address: no lock of this memo, no comparison of its bytes.
	if d, ok := heldtexts.Sum(s); ok {
		return d
	}
	return t.SumUnheld(s)
}

// SumUnheld is Sum of a text the caller already found not held (heldtexts.Find), which is
// not looked up there again.
func (t *TextDigests) SumUnheld(s string) [sha256.Size]byte {
	if t == nil || len(s) == 0 {
		return sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
	}
	k := textKey{unsafe.StringData(s), len(s)}
	t.mu.Lock()
	d, ok := t.m[k]
	t.mu.Unlock()
	if ok {
		return d.sum
	}
	sum, ok := knownTexts.get(s)
	if !ok {
		sum = sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
		knownTexts.put(s, sum)
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[textKey]textDigest, 64)
	}
	t.m[k] = textDigest{s: s, sum: sum}
	t.mu.Unlock()
	return sum
}

// SumBytes returns the SHA-256 of b, looked up among the texts of earlier requests
// (knownTexts) before it is hashed: a request's params (an agent's tool definitions) are
// the same bytes on every request of a session. Unlike Sum it does not remember b's
// address (b is a byte slice, which its owner may write later).
func SumBytes(b []byte) [sha256.Size]byte {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	// Params a decoder keeps for the requests that resume it are held (internal/heldtexts):
	// found by address, without hashing or comparing their bytes.
	if d, ok := heldtexts.Sum(s); ok {
		return d
	}
	sum, ok := knownTexts.get(s)
	if !ok {
		sum = sha256.Sum256(b)
		knownTexts.put(s, sum)
	}
	return sum
}

type textDigestsKey struct{}

// WithTextDigests returns ctx carrying t, for the proxy's records and the in-process
// policies of one request.
func WithTextDigests(ctx context.Context, t *TextDigests) context.Context {
	return context.WithValue(ctx, textDigestsKey{}, t)
}

// TextDigestsFrom returns the memo ctx carries, or nil (which hashes every time).
func TextDigestsFrom(ctx context.Context) *TextDigests {
	t, _ := ctx.Value(textDigestsKey{}).(*TextDigests)
	return t
}

// knownTexts remembers the digests of texts seen by earlier requests, by the texts
// themselves: a coding agent re-sends its history with every request, each time in a new
// body, and a map lookup (a seeded hash and a byte comparison of the whole text) costs a
// fraction of SHA-256. A hit is exact — the stored text equals the looked-up one byte for
// byte — so no crafted input can borrow another text's digest. Bounded like the scanners'
// caches: at most knownTextsBytes in two generations, the older dropped when the newer is
// full; texts shorter than minKnownText are hashed every time.
var knownTexts = newTextCache(knownTextsBytes)

const (
	knownTextsBytes = 32 << 20
	minKnownText    = 64
	knownTextCost   = 96 // map entry and digest, besides the text
)

// textCache maps texts to their digests; keys are the map's own copies (a text points
// into a request body, which it would otherwise keep alive).
type textCache struct {
	m *twogen.Map[string, [sha256.Size]byte]
}

func newTextCache(limit int64) textCache {
	return textCache{twogen.New(limit, func(s string, _ [sha256.Size]byte) int64 {
		return int64(len(s)) + knownTextCost
	}, strings.Clone)}
}

func (c textCache) get(s string) ([sha256.Size]byte, bool) {
	if len(s) < minKnownText {
		return [sha256.Size]byte{}, false
	}
	return c.m.Get(s)
}

func (c textCache) put(s string, d [sha256.Size]byte) {
	if len(s) < minKnownText || int64(len(s)) > c.m.Limit()/8 {
		return
	}
	c.m.Add(s, d)
}

// KnownTextStats reports the memory (bytes) and texts held by the process-wide memo of
// text digests across requests.
func KnownTextStats() (bytes, entries int64) {
	return knownTexts.m.Stats()
}
