package state

import (
	"container/list"
	"context"
	"slices"
	"sync"
	"time"

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
}

type memScope struct {
	key     Scope
	recs    map[string]Record
	order   []string // record ids, oldest first; may hold ids replaced since (compacted)
	pending map[Deferral][]ahp.Message
	expires time.Time
}

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
	return &Memory{maxSessions: maxSessions, ttl: ttl, now: time.Now,
		scopes: map[Scope]*list.Element{}, lru: list.New()}
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
	snap.Records = make([]Record, 0, min(len(ids), len(sc.recs)))
	for _, id := range ids {
		if r, ok := sc.recs[id]; ok {
			snap.Records = append(snap.Records, r)
		}
	}
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
