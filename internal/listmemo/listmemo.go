// Package listmemo remembers work done over a conversation's canonical message list, so
// that the next request of the conversation does it again only for what changed. A coding
// agent re-sends its whole conversation on every request: request N+1's list is request
// N's with the newest turn added (and, with Anthropic's moving cache breakpoint, the last
// message of N re-encoded). Work that is a function of each message on its own (a scan of
// its texts, the fingerprint of a settlement unit) is then the work of request N over the
// messages both share, plus the work over the rest.
//
// A user remembers a list it worked on (Keep) with what it found (a value of its own
// type), and for a new list finds the remembered one sharing the longest run of leading
// messages (Find). Exactness does not rest on any hash: the shared run is compared message
// by message, field by field (equal strings that share their memory, as the messages a
// resumed decode hands out do, compare by address and length without reading the text).
// A user may reuse for the shared run only what depends on nothing but those messages.
//
// The memo keeps the list it is given, not a copy: the lists handed around a request are
// read-only, the list and its parts (mapping.Request.Items; an edit goes to a copy), so
// nothing changes what a remembered one says, and the next request of the conversation,
// whose decode shares the same parts, compares each message by the address of its parts.
// Under go test a kept list also keeps a deep copy, and a list found written in place
// panics.
//
// Memory is bounded per memo (two generations as internal/twogen keeps them: what is in
// use survives, what is not ages out) and reported for the metrics by Stats. A list keeps
// the memory of its texts alive; it is counted whole, although most of it is usually the
// decoded body that the request decode memo keeps anyway.
package listmemo

import (
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// perKey is how many lists are kept for one start of a conversation (the same leading
// messages: another session of the same task, or a branch of one).
const perKey = 4

// Memo is a bounded memo of lists and the values found for them; safe for concurrent use.
type Memo[V any] struct {
	mu                  sync.Mutex
	cur, prev           map[uint64][]*Entry[V]
	curBytes, prevBytes int64
	limit               int64
	held                *atomic.Int64 // this memo's accounted bytes and entries, released
	entries             *atomic.Int64 // when the memo is collected
}

// Entry is a remembered list and its value; neither is written after Keep.
type Entry[V any] struct {
	key   uint64
	items []ahp.Message
	Value V
	cost  int64
	// sums[i] is what items[:i] holds (messageCost): the next list of the conversation
	// takes the sums of the run it shares instead of walking those messages' parts again.
	sums []int64
	// check is a deep copy of items, under go test only (checkShared).
	check []ahp.Message
}

// checkShared is set under go test: kept lists keep a deep copy to be checked against.
var checkShared = testing.Testing()

var stats struct{ bytes, entries atomic.Int64 }

// Stats reports the bytes (as counted) and lists held by every live memo.
func Stats() (bytes, entries int64) { return stats.bytes.Load(), stats.entries.Load() }

// Held reports the bytes (as counted) and lists this memo holds.
func (m *Memo[V]) Held() (bytes, entries int64) { return m.held.Load(), m.entries.Load() }

// New returns an empty memo holding at most about limit bytes. Its share of Stats is
// released when it is garbage (a configuration reload drops a policy and its memo).
func New[V any](limit int64) *Memo[V] {
	m := &Memo[V]{limit: limit, cur: map[uint64][]*Entry[V]{}, held: new(atomic.Int64), entries: new(atomic.Int64)}
	type counts struct{ bytes, entries *atomic.Int64 }
	runtime.AddCleanup(m, func(c counts) {
		stats.bytes.Add(-c.bytes.Load())
		stats.entries.Add(-c.entries.Load())
	}, counts{m.held, m.entries})
	return m
}

// Find returns the remembered list, filed under salt, that shares the longest run of
// leading messages with items, and that run's length; nil and 0 when none shares one.
// key is what Keep files items under.
func (m *Memo[V]) Find(salt uint64, items []ahp.Message) (key uint64, e *Entry[V], shared int) {
	key = keyOf(salt, items)
	m.mu.Lock()
	a, b := m.cur[key], m.prev[key]
	cands := make([]*Entry[V], 0, len(a)+len(b))
	cands = append(append(cands, a...), b...)
	m.mu.Unlock()
	for _, c := range cands {
		if c.check != nil && !slices.EqualFunc(c.items, c.check, func(a, b ahp.Message) bool { return contentEqual(&a, &b) }) {
			panic("listmemo: a kept list was written in place; kept lists and their parts are shared and must be replaced in a copy, not written (mapping.Request.Items)")
		}
		if n := CommonPrefix(items, c.items); n > shared {
			e, shared = c, n
		}
	}
	if e != nil && slices.Contains(b, e) {
		m.renew(e)
	}
	return key, e, shared
}

// Keep remembers items with v under key, old and shared as Find returned them for items
// (which the caller has not changed since). It keeps items itself, not a copy: the lists
// handed around a request are read-only, the list and its parts (mapping.Request.Items,
// the chain's events), and neither the caller nor anyone else writes items afterwards
// (under go test a kept list found changed panics). old (nil for none) is dropped: a
// conversation keeps one list, its latest. extra is what v keeps alive besides the list.
func (m *Memo[V]) Keep(key uint64, items []ahp.Message, shared int, v V, extra int64, old *Entry[V]) {
	// items' parts, not old's, even where they are equal: the conversation's next request
	// shares the memory of this one's (a resumed decode), and compares by address.
	if old == nil {
		shared = 0
	}
	own := items[:len(items):len(items)]
	sums := make([]int64, 1, len(own)+1)
	if shared > 0 {
		sums = append(sums[:0], old.sums[:shared+1]...) // equal messages hold as much
	}
	for i := len(sums) - 1; i < len(own); i++ {
		sums = append(sums, sums[i]+messageCost(&own[i]))
	}
	cost := extra + int64(cap(own))*int64(unsafe.Sizeof(ahp.Message{})) + int64(cap(sums))*8 + 64 + sums[len(own)]
	e := &Entry[V]{key: key, items: own, Value: v, cost: cost, sums: sums}
	if checkShared {
		e.check = ahp.CloneMessages(own)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old != nil {
		m.drop(m.cur, &m.curBytes, old)
		m.drop(m.prev, &m.prevBytes, old)
	}
	if e.cost <= m.limit/8 {
		m.insert(e)
	}
}

// renew moves e, found in the older generation, to the newer one.
func (m *Memo[V]) renew(e *Entry[V]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drop(m.prev, &m.prevBytes, e) {
		m.insert(e)
	}
}

func (m *Memo[V]) insert(e *Entry[V]) {
	if m.curBytes+e.cost > m.limit/2 {
		// The newer generation is full: it becomes the older, the older is dropped.
		m.account(-m.prevBytes, -int64(count(m.prev)))
		m.prev, m.prevBytes = m.cur, m.curBytes
		m.cur, m.curBytes = make(map[uint64][]*Entry[V], len(m.prev)), 0
	}
	l := append([]*Entry[V]{e}, m.cur[e.key]...)
	for len(l) > perKey {
		last := l[len(l)-1]
		l = l[:len(l)-1]
		m.curBytes -= last.cost
		m.account(-last.cost, -1)
	}
	m.cur[e.key] = l
	m.curBytes += e.cost
	m.account(e.cost, 1)
}

// drop removes e from generation g (holding *bytes); false when it is not there.
func (m *Memo[V]) drop(g map[uint64][]*Entry[V], bytes *int64, e *Entry[V]) bool {
	l := g[e.key]
	i := slices.Index(l, e)
	if i < 0 {
		return false
	}
	l = slices.Delete(slices.Clone(l), i, i+1) // Find may be reading the old list
	if len(l) == 0 {
		delete(g, e.key)
	} else {
		g[e.key] = l
	}
	*bytes -= e.cost
	m.account(-e.cost, -1)
	return true
}

func (m *Memo[V]) account(bytes, entries int64) {
	m.held.Add(bytes)
	m.entries.Add(entries)
	stats.bytes.Add(bytes)
	stats.entries.Add(entries)
}

func count[V any](g map[uint64][]*Entry[V]) int {
	n := 0
	for _, l := range g {
		n += len(l)
	}
	return n
}

// seed is the process's own: a client cannot aim its lists at one bucket.
var seed = maphash.MakeSeed()

// keyOf files a list by salt (what the user's value depends on besides the messages) and
// its start: the first two messages' ids, roles and texts (their length and ends, of the
// first 16 parts). It only finds candidates, which Find compares.
func keyOf(salt uint64, items []ahp.Message) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	put(salt)
	for i := range min(len(items), 2) {
		m := &items[i]
		h.WriteString(m.ID)
		h.WriteString(m.Role)
		put(uint64(len(m.Parts)))
		for k := range min(len(m.Parts), 16) { // a key, not a comparison: a few parts do
			if t := m.Parts[k].Text; t != nil {
				s := *t
				put(uint64(len(s)))
				h.WriteString(s[:min(len(s), 64)])
				h.WriteString(s[max(len(s)-64, 0):])
			}
		}
	}
	return h.Sum64()
}

// CommonPrefix is the number of leading messages a and b share, equal field by field
// (parts that are the same memory are equal without reading them).
func CommonPrefix(a, b []ahp.Message) int {
	n := min(len(a), len(b))
	for i := range n {
		if !messageEqual(&a[i], &b[i]) {
			return i
		}
	}
	return n
}

func messageEqual(a, b *ahp.Message) bool {
	if !headerEqual(a, b) {
		return false
	}
	if len(a.Parts) > 0 && &a.Parts[0] == &b.Parts[0] {
		return true // the same parts (never written in place)
	}
	return partsEqual(a, b)
}

// contentEqual is messageEqual reading every part, even shared ones.
func contentEqual(a, b *ahp.Message) bool { return headerEqual(a, b) && partsEqual(a, b) }

func headerEqual(a, b *ahp.Message) bool {
	if a.ID != b.ID || a.Role != b.Role || a.Synthesized != b.Synthesized || len(a.Parts) != len(b.Parts) ||
		(a.Parts == nil) != (b.Parts == nil) {
		return false
	}
	return a.BarePart == b.BarePart || a.BarePart != nil && b.BarePart != nil && bareEqual(a.BarePart, b.BarePart)
}

func partsEqual(a, b *ahp.Message) bool {
	for i := range a.Parts {
		p, q := &a.Parts[i], &b.Parts[i]
		if p.ID != q.ID || p.Synthesized != q.Synthesized || p.Kind != q.Kind || p.MediaType != q.MediaType ||
			p.Selection != q.Selection || p.Category != q.Category || p.SHA256 != q.SHA256 ||
			!ptrEqual(p.Text, q.Text) || !ptrEqual(p.Body, q.Body) || !ptrEqual(p.Gap, q.Gap) || !ptrEqual(p.Size, q.Size) {
			return false
		}
	}
	return true
}

func bareEqual(a, b *ahp.BarePart) bool {
	return a.Kind == b.Kind && a.MediaType == b.MediaType && a.Selection == b.Selection && a.Category == b.Category &&
		a.SHA256 == b.SHA256 && ptrEqual(a.Text, b.Text) && ptrEqual(a.Body, b.Body) && ptrEqual(a.Gap, b.Gap) &&
		ptrEqual(a.Size, b.Size)
}

func ptrEqual[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// messageCost is what keeping a message holds besides its slot in the list: its parts and
// their texts.
func messageCost(m *ahp.Message) int64 {
	n := int64(len(m.Parts)) * int64(unsafe.Sizeof(ahp.Part{}))
	for k := range m.Parts {
		if t := m.Parts[k].Text; t != nil {
			n += int64(len(*t)) + 16
		}
	}
	if bp := m.BarePart; bp != nil {
		n += int64(unsafe.Sizeof(ahp.BarePart{}))
		if bp.Text != nil {
			n += int64(len(*bp.Text)) + 16
		}
	}
	return n
}
