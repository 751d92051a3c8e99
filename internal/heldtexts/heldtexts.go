package heldtexts

import (
	"crypto/sha256"
	"sync/atomic"
	"unsafe"

	"github.com/hookproxy/hookproxy/internal/twogen"
)

const (
	// heldBytes bounds the memo: as much as the decoded literals it serves (32 MiB of
	// literal and value), so that it holds at least as many texts.
	heldBytes = 32 << 20
	// shards spreads the lock over concurrent requests: every text of every request
	// looks here first.
	shards = 8
	// entryCost is what an entry costs besides its text: key, entry, digest and the
	// map's share (~130 bytes), and the notes of up to a few scanners (a note and a clean
	// result, ~140 bytes each).
	entryCost = 512
)

// key is a text's address and length. An address as an integer: the entry, not the key,
// keeps the text alive, and the map's keys are then no work for the garbage collector.
type key struct {
	p uintptr
	n int
}

// entry is a held text and, once asked for, its digest (in the entry: one memory access
// fewer on the path every request takes), and the notes its users keep on it.
type entry struct {
	s     string // keeps the memory the key names allocated to this text
	state atomic.Uint32
	sum   [sha256.Size]byte // written once, under state summing, before state summed
	notes [noteSlots]atomic.Pointer[note]
}

// noteSlots is how many notes an entry keeps: one per scanner of a chain (secrets, pii,
// injection) without collisions in the usual configurations.
const noteSlots = 4

// note is what one user (named by an id it got from NoteID) remembers about a text.
type note struct {
	id uint64
	v  any
}

var noteIDs atomic.Uint64

// NoteID returns an id no other caller gets, for a user of Note and SetNote.
func NoteID() uint64 { return noteIDs.Add(1) }

// entry states: the digest is written by the one caller that moves the entry from unsummed
// to summing, and read only once the state is summed.
const (
	unsummed uint32 = iota
	summing
	summed
)

// memo is the memo's implementation; keep false makes one that does not hold its texts,
// which only a test builds (to show that holding them is what makes a hit exact).
type memo struct {
	shards [shards]*twogen.Map[key, *entry]
	keep   bool
}

func newMemo(limit int64, keep bool) *memo {
	m := &memo{keep: keep}
	for i := range m.shards {
		m.shards[i] = twogen.New[key, *entry](limit/shards, func(_ key, e *entry) int64 {
			return int64(len(e.s)) + entryCost
		}, nil)
	}
	return m
}

var held = newMemo(heldBytes, true)

func keyOf(s string) key { return key{uintptr(unsafe.Pointer(unsafe.StringData(s))), len(s)} }

func (m *memo) shard(k key) *twogen.Map[key, *entry] {
	// Strings are at least 8-byte aligned, and a long one starts on its own span.
	h := k.p>>4 ^ k.p>>12 ^ uintptr(k.n)
	return m.shards[h%shards]
}

// Hold registers s, a string that owns its memory and is kept beyond one request, so that
// Sum recognises it by its address. Empty strings are not held.
func Hold(s string) { held.hold(s) }

func (m *memo) hold(s string) {
	if len(s) == 0 {
		return
	}
	k := keyOf(s)
	sh := m.shard(k)
	if int64(len(s))+entryCost > sh.Limit()/8 {
		return
	}
	e := &entry{}
	if m.keep {
		e.s = s
	} else {
		e.s = string(make([]byte, len(s))) // counts the same, holds another allocation
	}
	sh.Add(k, e)
}

// Sum returns the SHA-256 of s if s is a held text (computed on the first request for it,
// then kept), and false for any other string.
func Sum(s string) ([sha256.Size]byte, bool) { return held.sum(s) }

func (m *memo) sum(s string) ([sha256.Size]byte, bool) {
	if len(s) == 0 {
		return [sha256.Size]byte{}, false
	}
	k := keyOf(s)
	e, ok := m.shard(k).Get(k)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	return e.digest(s), true
}

// digest is the SHA-256 of s, the entry's text (the looked-up string, which equals it).
func (e *entry) digest(s string) [sha256.Size]byte {
	if e.state.Load() == summed {
		return e.sum
	}
	d := sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
	if e.state.CompareAndSwap(unsummed, summing) {
		e.sum = d
		e.state.Store(summed)
	}
	return d
}

// Text is a held text, as Find returns it.
type Text struct {
	e *entry
}

// Find returns the held text s, or false if s is not one.
func Find(s string) (Text, bool) {
	if len(s) == 0 {
		return Text{}, false
	}
	k := keyOf(s)
	e, ok := held.shard(k).Get(k)
	return Text{e}, ok
}

// Sum is the text's SHA-256 (computed on the first request for it).
func (t Text) Sum() [sha256.Size]byte { return t.e.digest(t.e.s) }

// Note returns what the user id noted on the text with SetNote, or nil. A note is a
// function of the text and of what id stands for (a scanner's configuration), which must
// not change: the text itself cannot.
func (t Text) Note(id uint64) any {
	if n := t.e.notes[id%noteSlots].Load(); n != nil && n.id == id {
		return n.v
	}
	return nil
}

// SetNote keeps v on the text for the user id, in place of any note of a user that shares
// its slot. A note lives as long as the held text; the memo counts it as part of the
// entry's cost, so a note must be small.
func (t Text) SetNote(id uint64, v any) { t.e.notes[id%noteSlots].Store(&note{id: id, v: v}) }

// Stats reports the memory (bytes) and texts the memo holds.
func Stats() (bytes, entries int64) {
	for _, sh := range held.shards {
		b, n := sh.Stats()
		bytes, entries = bytes+b, entries+n
	}
	return bytes, entries
}
