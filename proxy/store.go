package proxy

import (
	"sync"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Store holds the little state hookproxy needs across requests: injected context whose
// delivery is deferred to a later model call (SPEC-DIGEST §5.2 inject deliverAt
// next_turn, and "now" injections accepted at tool.before, whose next model call is the
// next request). Keys are session-scoped and opaque to the store. Implementations must
// be safe for concurrent use; a shared implementation lets several replicas serve one
// session. The other piece of conversation state, settled rewrites, has its own
// interface (RewriteStore) so that existing Store implementations keep compiling;
// MemoryStore implements both.
type Store interface {
	// Put appends msgs to the messages pending under key.
	Put(key string, msgs []ahp.Message)
	// Take removes and returns the messages pending under key, oldest first.
	Take(key string) []ahp.Message
}

// Defaults of the in-memory store.
const (
	DefaultStoreKeys = 10000
	DefaultStoreTTL  = time.Hour
	// maxPendingPerKey bounds one key; the oldest messages are dropped beyond it.
	maxPendingPerKey = 256
)

// MemoryStore is the in-memory Store: bounded in keys (the oldest key is evicted when
// full) and in time (entries expire TTL after their last Put).
type MemoryStore struct {
	mu      sync.Mutex
	maxKeys int
	ttl     time.Duration
	now     func() time.Time
	entries map[string]*pending
	order   []string // keys in first-Put order, for eviction; may hold stale keys
	// rewrites is the rewrite memory (rewrites.go), kept here so that the one store a
	// deployment shares across reloads carries it too.
	rewrites *MemoryRewriteStore
}

type pending struct {
	msgs    []ahp.Message
	expires time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an in-memory store; zero arguments take the defaults.
func NewMemoryStore(maxKeys int, ttl time.Duration) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = DefaultStoreKeys
	}
	if ttl <= 0 {
		ttl = DefaultStoreTTL
	}
	return &MemoryStore{maxKeys: maxKeys, ttl: ttl, now: time.Now, entries: map[string]*pending{},
		rewrites: NewMemoryRewriteStore(maxKeys, 0)}
}

// Put implements Store.
func (s *MemoryStore) Put(key string, msgs []ahp.Message) {
	if len(msgs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, ok := s.entries[key]
	if ok && now.After(e.expires) {
		e.msgs = nil
	}
	if !ok {
		if len(s.order) >= 2*s.maxKeys {
			s.compact(now)
		}
		s.evict(now)
		e = &pending{}
		s.entries[key] = e
		s.order = append(s.order, key)
	}
	e.msgs = append(e.msgs, msgs...)
	if n := len(e.msgs); n > maxPendingPerKey {
		e.msgs = append([]ahp.Message(nil), e.msgs[n-maxPendingPerKey:]...)
	}
	e.expires = now.Add(s.ttl)
}

// Take implements Store.
func (s *MemoryStore) Take(key string) []ahp.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return nil
	}
	delete(s.entries, key)
	if s.now().After(e.expires) {
		return nil
	}
	return e.msgs
}

// evict makes room for one more key: expired entries first, then the oldest keys.
func (s *MemoryStore) evict(now time.Time) {
	if len(s.entries) < s.maxKeys {
		return
	}
	s.compact(now)
	for len(s.entries) >= s.maxKeys && len(s.order) > 0 {
		delete(s.entries, s.order[0])
		s.order = s.order[1:]
	}
}

// compact drops expired entries and order slots of keys that were taken or repeated.
func (s *MemoryStore) compact(now time.Time) {
	seen := make(map[string]bool, len(s.entries))
	live := s.order[:0]
	for _, k := range s.order {
		e, ok := s.entries[k]
		if !ok || seen[k] {
			continue
		}
		if now.After(e.expires) {
			delete(s.entries, k)
			continue
		}
		seen[k] = true
		live = append(live, k)
	}
	s.order = live
}
