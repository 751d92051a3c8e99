package state

import (
	"container/list"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
)

// Memory is the in-process Store: bounded in sessions (the least recently used session
// is evicted when full), in records and injections per session, and in time (a session's
// state expires TTL after its last use). A restart forgets everything, which the proxy's
// fail-safe settlement turns into repeated hook calls.
type Memory struct {
	mu          sync.Mutex
	maxSessions int
	ttl         time.Duration
	now         func() time.Time
	scopes      map[Scope]*list.Element // values are *memScope
	lru         *list.List              // most recently used first
	// The scopes holding a loadMemo, most recently loaded first; their memos hold at most
	// memoBytesLimit (counted.bytes), the least recently loaded giving theirs up first.
	memoLRU *list.List // values are *memScope
	spare   []int      // a positions list to build the next memo's in (the last replaced one)
	counted *memoCount // this store's memo figures, its share of LoadMemoStats
}

// memoCount is one store's share of the process's load memo figures, released when the
// store is garbage.
type memoCount struct{ bytes, entries atomic.Int64 }

var loadMemoStats memoCount

// LoadMemoStats reports the memory the memory stores' load memos hold (bytes) and how
// many scopes hold one (entries), for the metrics.
func LoadMemoStats() (bytes, entries int64) {
	return loadMemoStats.bytes.Load(), loadMemoStats.entries.Load()
}

// countMemo adds to the store's and the process's figures.
func (m *Memory) countMemo(bytes, entries int) {
	m.counted.bytes.Add(int64(bytes))
	m.counted.entries.Add(int64(entries))
	loadMemoStats.bytes.Add(int64(bytes))
	loadMemoStats.entries.Add(int64(entries))
}

type memScope struct {
	key     Scope
	recs    map[string]Record
	order   []string // record ids, oldest first; may hold ids replaced since (compacted)
	pending map[Deferral][]ahp.Message
	expires time.Time
	// gen counts the rewrites of order (compaction, eviction): a loadMemo is valid only
	// within one generation, where order only grows and its tail names what was recorded.
	gen    uint64
	memo   *loadMemo
	memoEl *list.Element // in Memory.memoLRU while memo is set
}

// loadMemo is what a scope's last Load found. An agent's next request repeats the last
// one's ids and adds a few: Load reuses what it found for the repeated ids, looks up only
// the new ids and those recorded since, and so costs what is new instead of one lookup
// in the scope's map per message of the history.
type loadMemo struct {
	// That Load's ids, copied into one buffer (idBytes[idEnds[i-1]:idEnds[i]] is the i-th):
	// the memo keeps no id the caller's memory holds.
	idBytes []byte
	idEnds  []int
	pos     []int    // the positions in ids that had a record, ascending
	recs    []Record // their records: the list that Load returned (read-only, Snapshot.Records)
	order   int      // len(order) then
	gen     uint64
	bytes   int // what it holds, as counted in Memory.counted
}

// size is what m's lists hold.
func (mm *loadMemo) size() int {
	return cap(mm.idBytes) + 8*cap(mm.idEnds) + 8*cap(mm.pos) + int(unsafe.Sizeof(Record{}))*cap(mm.recs)
}

// maxMemoChanges bounds the ids recorded since the memo that a Load checks one by one
// against the repeated ids; beyond it, Load looks every id up.
const maxMemoChanges = 16

// memoBytesLimit bounds the memory of the load memos of all scopes: enough for the
// sessions active at once on one proxy, not one per session held.
const memoBytesLimit = 32 << 20

var _ Store = (*Memory)(nil)

// NewMemory returns an in-memory store; zero arguments take the defaults of
// state.memory.maxSessions and state.memory.ttl (config). The TTL is measured from a
// conversation's last request: a conversation resumed after it expired is settled again
// (its hooks run again), never forwarded unexamined; beyond maxSessions the least recently
// used session goes.
func NewMemory(maxSessions int, ttl time.Duration) *Memory {
	if maxSessions <= 0 {
		maxSessions = config.DefaultStateMaxSessions
	}
	if ttl <= 0 {
		ttl = config.DefaultStateTTL
	}
	m := &Memory{maxSessions: maxSessions, ttl: ttl, now: time.Now,
		scopes: map[Scope]*list.Element{}, lru: list.New(), memoLRU: list.New(), counted: &memoCount{}}
	runtime.AddCleanup(m, func(c *memoCount) {
		loadMemoStats.bytes.Add(-c.bytes.Load())
		loadMemoStats.entries.Add(-c.entries.Load())
	}, m.counted)
	return m
}

// Load implements Store.
func (m *Memory) Load(_ context.Context, scope Scope, ids []string, take ...Deferral) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.use(scope, false)
	if sc == nil {
		return Snapshot{}, nil
	}
	var snap Snapshot
	snap.Records = m.load(sc, ids)
	for _, k := range take {
		msgs := sc.pending[k]
		delete(sc.pending, k)
		snap.put(k, msgs)
	}
	return snap, nil
}

// Record implements Store.
func (m *Memory) Record(_ context.Context, scope Scope, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.use(scope, true)
	for _, r := range recs {
		r.Items = cloneMessages(r.Items) // the caller keeps its slices
		sc.recs[r.ID] = r
		sc.order = append(sc.order, r.ID)
	}
	if len(sc.order) > 2*MaxRecordsPerScope || len(sc.recs) > MaxRecordsPerScope {
		sc.compact() // order now holds each live id once, oldest first
	}
	for len(sc.recs) > MaxRecordsPerScope { // the oldest go
		delete(sc.recs, sc.order[0])
		sc.order = sc.order[1:]
		sc.gen++
	}
	return nil
}

// Defer implements Store.
func (m *Memory) Defer(_ context.Context, scope Scope, kind Deferral, msgs []ahp.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.use(scope, true)
	q := append(sc.pending[kind], msgs...)
	if n := len(q); n > MaxPendingPerKind {
		q = append([]ahp.Message(nil), q[n-MaxPendingPerKind:]...)
	}
	sc.pending[kind] = q
	return nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

// compact keeps, in order, the last occurrence of each recorded id.
func (sc *memScope) compact() {
	seen := make(map[string]bool, len(sc.recs))
	kept := make([]string, 0, len(sc.recs))
	for i := len(sc.order) - 1; i >= 0; i-- {
		id := sc.order[i]
		if _, live := sc.recs[id]; live && !seen[id] {
			seen[id] = true
			kept = append(kept, id)
		}
	}
	slices.Reverse(kept)
	sc.order = kept
	sc.gen++
}

// load returns the records of ids, in the order of ids (one per position whose id has a
// record), as a lookup of each id would: through the memo of the last Load where it
// applies (loadMemo).
func (m *Memory) load(sc *memScope, ids []string) []Record {
	var out []Record
	pos := m.spare[:0]
	k := 0 // ids[:k] repeat the memo's
	mm := sc.memo
	if mm != nil && mm.gen == sc.gen && len(sc.order)-mm.order <= maxMemoChanges {
		for start := 0; k < len(ids) && k < len(mm.idEnds); k++ {
			if string(mm.idBytes[start:mm.idEnds[k]]) != ids[k] {
				break
			}
			start = mm.idEnds[k]
		}
	}
	if k > 0 {
		// The repeated positions whose id was recorded since: looked up again.
		var since []int
		for _, id := range sc.order[mm.order:] {
			for p, v := range ids[:k] {
				if v == id {
					since = append(since, p)
				}
			}
		}
		slices.Sort(since)
		since = slices.Compact(since)
		i := 0
		if n := len(mm.pos); (n == 0 || mm.pos[n-1] < k) && (len(since) == 0 || n == 0 || since[0] > mm.pos[n-1]) {
			// This load keeps every record the memo's found, in order, and adds records
			// only after them (an agent's next request: its new messages and those
			// recorded since come last). The memo's list is extended in place: the
			// callers it was handed to see only up to its length (capped), and loads of
			// the scope are serialized by the store's lock.
			out, pos, i = mm.recs, append(pos, mm.pos...), n
		} else {
			out = make([]Record, 0, min(len(ids), len(sc.recs)))
		}
		for _, p := range since {
			for ; i < len(mm.pos) && mm.pos[i] < p; i++ {
				out, pos = append(out, mm.recs[i]), append(pos, mm.pos[i])
			}
			if i < len(mm.pos) && mm.pos[i] == p {
				i++
			}
			if r, ok := sc.recs[ids[p]]; ok {
				out, pos = append(out, r), append(pos, p)
			}
		}
		for ; i < len(mm.pos) && mm.pos[i] < k; i++ {
			out, pos = append(out, mm.recs[i]), append(pos, mm.pos[i])
		}
	}
	if out == nil {
		out = make([]Record, 0, min(len(ids), len(sc.recs)))
	}
	for p := k; p < len(ids); p++ {
		if r, ok := sc.recs[ids[p]]; ok {
			out, pos = append(out, r), append(pos, p)
		}
	}
	if mm == nil {
		mm = &loadMemo{}
		sc.memo, sc.memoEl = mm, m.memoLRU.PushFront(sc)
		m.countMemo(0, 1)
	} else {
		m.memoLRU.MoveToFront(sc.memoEl)
	}
	mm.idBytes, mm.idEnds = mm.idBytes[:0], mm.idEnds[:0]
	for _, id := range ids {
		mm.idBytes = append(mm.idBytes, id...)
		mm.idEnds = append(mm.idEnds, len(mm.idBytes))
	}
	mm.pos, m.spare = pos, mm.pos
	mm.recs = out // shared with the caller, which reads it only (Snapshot.Records)
	mm.order, mm.gen = len(sc.order), sc.gen
	n := mm.size()
	m.countMemo(n-mm.bytes, 0)
	mm.bytes = n
	for m.counted.bytes.Load() > memoBytesLimit {
		m.dropMemo(m.memoLRU.Back().Value.(*memScope))
	}
	return out[:len(out):len(out)]
}

// dropMemo lets sc's load memo go.
func (m *Memory) dropMemo(sc *memScope) {
	if sc.memo == nil {
		return
	}
	m.countMemo(-sc.memo.bytes, -1)
	m.memoLRU.Remove(sc.memoEl)
	sc.memo, sc.memoEl = nil, nil
}

// Sessions reports how many sessions the store holds (for tests and metrics).
func (m *Memory) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.scopes)
}

// use returns scope's state, renewed and moved to the front; create makes it when absent
// or expired. Called with mu held.
func (m *Memory) use(scope Scope, create bool) *memScope {
	now := m.now()
	if el, ok := m.scopes[scope]; ok {
		sc := el.Value.(*memScope)
		if now.After(sc.expires) {
			m.lru.Remove(el)
			delete(m.scopes, scope)
			m.dropMemo(sc)
		} else {
			sc.expires = now.Add(m.ttl)
			m.lru.MoveToFront(el)
			return sc
		}
	}
	if !create {
		return nil
	}
	m.makeRoom(now)
	sc := &memScope{key: scope, recs: map[string]Record{}, pending: map[Deferral][]ahp.Message{}, expires: now.Add(m.ttl)}
	m.scopes[scope] = m.lru.PushFront(sc)
	return sc
}

// makeRoom makes room for one more session: expired sessions first, then the least
// recently used. Every use renews the time bound, so the back of the list expires first.
func (m *Memory) makeRoom(now time.Time) {
	for el := m.lru.Back(); el != nil; el = m.lru.Back() {
		sc := el.Value.(*memScope)
		if len(m.scopes) < m.maxSessions && !now.After(sc.expires) {
			return
		}
		m.lru.Remove(el)
		delete(m.scopes, sc.key)
		m.dropMemo(sc)
	}
}

// cloneMessages copies messages and their part lists.
func cloneMessages(in []ahp.Message) []ahp.Message {
	if in == nil {
		return nil
	}
	out := make([]ahp.Message, len(in))
	for i, m := range in {
		out[i] = m
		out[i].Parts = slices.Clone(m.Parts)
	}
	return out
}
