package transport

import (
	"context"
	"crypto/sha256"
	"sync"
	"unsafe"
)

// TextDigests is one request's memo of the SHA-256 of the texts its canonical content
// holds, so that each text is hashed once per request however many parts of the request
// need its digest: the proxy's settlement records (fingerprints of known history) and the
// built-in scanners' result cache (policies) both key on it. In-process policies receive
// structural copies of the request's messages that share the texts' bytes, so a text is
// recognised by its bytes' address and length; the memo keeps every text it saw, so that
// memory is not reused for another text while the memo lives. A text it has not seen (a
// rewrite, a joined message) is hashed and remembered. Safe for concurrent use.
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
	k := textKey{unsafe.StringData(s), len(s)}
	t.mu.Lock()
	d, ok := t.m[k]
	t.mu.Unlock()
	if ok {
		return d.sum
	}
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[textKey]textDigest, 64)
	}
	t.m[k] = textDigest{s: s, sum: sum}
	t.mu.Unlock()
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
