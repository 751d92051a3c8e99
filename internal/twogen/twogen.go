// Package twogen is a bounded map in two generations, for the process-wide memos that
// remember what earlier requests carried (decoded string literals, text digests): new
// entries go to the newer generation; when it holds half the limit, the older one is
// dropped and the newer becomes the older. An entry found in the older generation moves to
// the newer one, so what every request re-sends stays. Memory is counted by a cost the
// caller gives, and reported (Stats) for the metrics.
package twogen

import (
	"sync"
	"sync/atomic"
)

// Map is safe for concurrent use; every operation takes one lock.
type Map[K comparable, V any] struct {
	mu                  sync.Mutex
	cur, prev           map[K]V
	curBytes, prevBytes int64
	limit               int64
	cost                func(K, V) int64
	own                 func(K) K
	held, entries       atomic.Int64
}

// New makes a map holding at most about limit bytes as cost counts them. own returns the
// map's own copy of a key before it is stored (a key that points into a request body must
// not keep the body alive); nil stores keys as given.
func New[K comparable, V any](limit int64, cost func(K, V) int64, own func(K) K) *Map[K, V] {
	if own == nil {
		own = func(k K) K { return k }
	}
	return &Map[K, V]{limit: limit, cost: cost, own: own, cur: map[K]V{}}
}

// Limit is the bound New was given.
func (m *Map[K, V]) Limit() int64 { return m.limit }

// Get returns the value stored under k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	if ok {
		// In use again: into the newer generation.
		n := m.cost(k, v)
		delete(m.prev, k)
		m.prevBytes -= n
		m.held.Add(-n)
		m.entries.Add(-1)
		m.insert(m.own(k), v)
	}
	return v, ok
}

// Add stores v under k unless a value is there already (another request stored it
// meanwhile), and returns the value the map holds.
func (m *Map[K, V]) Add(k K, v V) V {
	k = m.own(k) // outside the lock: a copy may be long
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.cur[k]; ok {
		return w
	}
	m.insert(k, v)
	return v
}

func (m *Map[K, V]) insert(k K, v V) {
	n := m.cost(k, v)
	m.cur[k] = v
	m.curBytes += n
	m.held.Add(n)
	m.entries.Add(1)
	if m.curBytes >= m.limit/2 {
		m.held.Add(-m.prevBytes)
		m.entries.Add(-int64(len(m.prev)))
		m.prev, m.prevBytes = m.cur, m.curBytes
		m.cur, m.curBytes = make(map[K]V, len(m.prev)), 0
	}
}

// Stats reports the bytes (as cost counts them) and entries held.
func (m *Map[K, V]) Stats() (bytes, entries int64) {
	return m.held.Load(), m.entries.Load()
}
