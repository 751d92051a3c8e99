package heldtexts

import (
	"crypto/sha256"
	"sync"
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
	// map's share (~130 bytes), and the notes of a scanner (a note and a clean result,
	// ~140 bytes) and of the settlement fingerprints (~250 bytes).
	entryCost = 640
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

// noteSlots is how many notes an entry keeps: one for each user alive at once (the
// scanners of a chain, the proxy's settlement fingerprints) without sharing a slot.
const noteSlots = 4

// note is what one user (named by its NoteKey) remembers about a text.
type note struct {
	id uint64
	v  any
}

// NoteKey names one user of notes: an id no other user gets (a note is read only by the
// key that set it, so a note from a configuration since replaced is never read), and the
// slot of an entry its notes go to, the one fewest live keys use.
type NoteKey struct {
	id   uint64
	slot uint8
}

var noteKeys struct {
	mu   sync.Mutex
	next uint64
	live [noteSlots]int
}

// NewNoteKey returns a key for a user of Note and SetNote; Release it when the user is
// gone, so that its slot goes to the next user.
func NewNoteKey() NoteKey {
	noteKeys.mu.Lock()
	defer noteKeys.mu.Unlock()
	noteKeys.next++
	k := NoteKey{id: noteKeys.next}
	for i := range noteKeys.live {
		if noteKeys.live[i] < noteKeys.live[k.slot] {
			k.slot = uint8(i)
		}
	}
	noteKeys.live[k.slot]++
	return k
}

// Release gives k's slot back; k's notes are never read again.
func (k NoteKey) Release() {
	noteKeys.mu.Lock()
	defer noteKeys.mu.Unlock()
	noteKeys.live[k.slot]--
}

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

// Note returns what the user k noted on the text with SetNote, or nil. A note is a
// function of the text and of what k stands for (a scanner's configuration), which must
// not change: the text itself cannot.
func (t Text) Note(k NoteKey) any {
	if n := t.e.notes[k.slot].Load(); n != nil && n.id == k.id {
		return n.v
	}
	return nil
}

// SetNote keeps v on the text for the user k, in place of any note in k's slot. A note
// lives as long as the held text; the memo counts notes as part of an entry's cost, so a
// note must be small.
func (t Text) SetNote(k NoteKey, v any) { t.e.notes[k.slot].Store(&note{id: k.id, v: v}) }

// Stats reports the memory (bytes) and texts the memo holds.
func Stats() (bytes, entries int64) {
	for _, sh := range held.shards {
		b, n := sh.Stats()
		bytes, entries = bytes+b, entries+n
	}
	return bytes, entries
}
