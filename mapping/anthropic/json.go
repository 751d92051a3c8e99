package anthropic

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// maxDepth bounds JSON nesting. gjson recurses, and no legitimate Messages body comes near
// this depth.
const maxDepth = 512

// strictJSON is the one-pass check of checkJSON.
var strictJSON = jsontext.CheckOptions{
	MaxDepth:          maxDepth,
	RejectInvalidUTF8: true,
	EscapedKey: func(name string) error {
		if isPlainKey(name) {
			return fmt.Errorf("object key %q is written with escapes", name)
		}
		return nil
	},
}

// checkJSON rejects bodies that gjson would read differently from the upstream: invalid
// UTF-8 (canonical text would silently gain U+FFFD), excessive nesting, invalid JSON,
// duplicate object keys (gjson reads the first, many servers the last: a policy would vet
// one value while the model saw another), and escaped spellings of plain ASCII keys
// ("te\u0078t"), which gjson paths and sjson patches would not match. One pass
// (jsontext.CheckOptions.Check), which reports the first fault it meets.
func checkJSON(body string) error {
	err := strictJSON.CheckString(body)
	if err == nil {
		return nil
	}
	var ce *jsontext.CheckError
	errors.As(err, &ce)
	switch ce.Kind {
	case jsontext.ErrInvalidUTF8:
		return fmt.Errorf("body is not valid UTF-8")
	case jsontext.ErrDepth:
		return fmt.Errorf("JSON nesting deeper than %d", maxDepth)
	case jsontext.ErrKey:
		return ce.Err
	case jsontext.ErrDuplicateKey:
		return fmt.Errorf("duplicate object key %q", ce.Key)
	}
	return fmt.Errorf("body is not valid JSON: %s at byte %d", ce.Msg, ce.Offset)
}

// isPlainKey reports whether a key uses only the characters of Anthropic field names, so an
// escaped spelling of it can only be an attempt to hide it.
func isPlainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ---- canonical values ----

// slab hands out short lists from a few large arrays: a decode keeps many small lists
// (the parts of each message, the native blocks of each item), and one allocation per
// list would be several per message. A list it returns is capped at its length, so an
// append to it reallocates rather than reach into the next list; the elements are never
// handed out twice.
type slab[T any] struct {
	buf []T
	// ahead, when set, is how many elements the rest of the decode is expected to take:
	// the size of the next array. It is asked only when an array is full.
	ahead func() int
	alloc int // elements allocated, to count what the lists keep alive
}

// take returns a list of n zero elements.
func (s *slab[T]) take(n int) []T {
	if cap(s.buf)-len(s.buf) < n {
		want := 0
		if s.ahead != nil {
			want = s.ahead()
		}
		s.buf = make([]T, 0, max(want, n, 8))
		s.alloc += cap(s.buf)
	}
	start := len(s.buf)
	s.buf = s.buf[:start+n]
	return s.buf[start : start+n : start+n]
}

// keep returns a copy of l held in the slab (take), nil when l is empty.
func (s *slab[T]) keep(l []T) []T {
	if len(l) == 0 {
		return nil
	}
	c := s.take(len(l))
	copy(c, l)
	return c
}

// grow returns a copy of l with room for want elements (at least one more than it has).
func grow[T any](l []T, want int) []T {
	c := make([]T, len(l), max(want, len(l)+1))
	copy(c, l)
	return c
}

// ---- synthesized ids ----

// idHash hashes position and canonical content into a short stable id component. Content,
// not raw JSON, is hashed so that moving a cache_control breakpoint or turning string
// content into a block array (both routine between turns) keeps every id. A request decode
// reuses one idHash for all its messages (reset).
type idHash struct {
	h   hash.Hash
	buf []byte // framing scratch, so hashing strings does not copy them one by one
	out [sha256.Size]byte
}

func newIDHash() *idHash { return &idHash{h: sha256.New(), buf: make([]byte, 0, 512)} }

// reset starts a new id.
func (h *idHash) reset() {
	h.h.Reset()
	h.buf = h.buf[:0]
}

func (h *idHash) str(s string) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(s)))
	// A long string goes through the scratch buffer in pieces: io.WriteString would copy
	// it whole into a new slice (the hash has no WriteString).
	for len(h.buf)+len(s) > cap(h.buf) {
		n := copy(h.buf[len(h.buf):cap(h.buf)], s)
		h.buf = h.buf[:len(h.buf)+n]
		s = s[n:]
		h.flush()
	}
	h.buf = append(h.buf, s...)
}

func (h *idHash) int(i int) { h.buf = binary.AppendVarint(h.buf, int64(i)) }

func (h *idHash) flush() {
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
}

func (h *idHash) part(p *ahp.Part, fingerprint string) {
	h.str(p.Kind)
	h.str(p.Category)
	h.str(p.MediaType)
	h.str(p.TextOf())
	h.str(p.SHA256)
	h.str(fingerprint)
}

// appendSum appends the id component (16 hex digits) to dst.
func (h *idHash) appendSum(dst []byte) []byte {
	h.flush()
	sum := h.h.Sum(h.out[:0])
	return hex.AppendEncode(dst, sum[:8])
}

func (h *idHash) sum() string { return string(h.appendSum(nil)) }

func partID(msgID string, n int) string { return msgID + ".p" + strconv.Itoa(n) }

// appendPartID appends the id of the n-th part of message msgID (partID) to dst.
func appendPartID(dst []byte, msgID string, n int) []byte {
	return strconv.AppendInt(append(append(dst, msgID...), ".p"...), int64(n), 10)
}
