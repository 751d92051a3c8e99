package proxy

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Rewrite memory. A modify(output) accepted at tool.after, or a modify(prompt) accepted at
// turn.start, changes what the model sees in one request only: the agent keeps the
// original content in its own history and re-sends it with every later request of the
// conversation, where it is old history that no tool.after or turn.start covers (one
// tool.after per resolved call, SPEC-DIGEST §3.2). Without memory, a tool result a policy
// redacted would reach the model unredacted on the very next request of the tool loop.
//
// So every such rewrite that was enforced is remembered per session (the same tenant and
// session scope as deferred injections), and re-applied to every later request of that
// session before any boundary is built. This is state across requests in the sense of
// DESIGN §2: it lives behind a small interface, in memory by default, and must be shared
// when several replicas serve one session.

// Rewrite is one settled content edit that keeps holding for the rest of a conversation:
// the Count consecutive canonical messages that start with the message whose id is ID,
// and whose canonical JSON hashes to Fingerprint, are replaced by Items. The id alone is
// not enough: a client that changed the message sent new content, which is decided anew.
// Rewrite is plain JSON so that a shared store can keep it as it is.
type Rewrite struct {
	ID          string        `json:"id"`          // canonical id of the first original message
	Count       int           `json:"count"`       // original messages replaced (1 for a tool result)
	Fingerprint string        `json:"fingerprint"` // sha256 (hex) of the originals' canonical JSON
	Items       []ahp.Message `json:"items"`       // the effective messages the model saw instead
	Event       string        `json:"event"`       // the boundary that settled it: tool.after or turn.start
}

// RewriteStore remembers the settled rewrites of each conversation. Scopes are opaque,
// session- and tenant-scoped keys. It is the piece of hookproxy state that must be shared
// when several replicas serve one session: a replica that does not know a rewrite
// forwards the client's original content (a model.request.before policy is the defence
// in depth). Implementations must be safe for concurrent use.
type RewriteStore interface {
	// Remember records rws under scope. A rewrite replaces any earlier one with the same
	// ID: the latest settled decision about a message wins.
	Remember(scope string, rws []Rewrite)
	// Recall returns the rewrites remembered under scope (nil when none). It counts as a
	// use: a store with a time bound measures it from the last use, so an active
	// conversation keeps its rewrites however long it runs.
	Recall(scope string) []Rewrite
}

// Defaults of the in-memory rewrite store.
const (
	DefaultRewriteScopes = DefaultStoreKeys
	// DefaultRewriteTTL is measured from a session's last request. A conversation resumed
	// after it expired re-sends the original content as old history, which only a
	// model.request.before policy still sees: the memory is bounded, not a guarantee.
	DefaultRewriteTTL = 24 * time.Hour
	// maxRewritesPerScope bounds one session; the oldest rewrite is dropped beyond it.
	maxRewritesPerScope = 1024
)

// MemoryRewriteStore is the in-memory RewriteStore: bounded in scopes (the least recently
// used scope is evicted when full), in rewrites per scope, and in time (a scope expires
// TTL after its last Remember or Recall).
type MemoryRewriteStore struct {
	mu          sync.Mutex
	maxScopes   int
	maxPerScope int
	ttl         time.Duration
	now         func() time.Time
	scopes      map[string]*list.Element // values are *rewriteScope
	lru         *list.List               // most recently used first
}

type rewriteScope struct {
	key     string
	rws     []Rewrite // oldest first, at most one per ID
	expires time.Time
}

var (
	_ RewriteStore = (*MemoryRewriteStore)(nil)
	_ RewriteStore = (*MemoryStore)(nil)
)

// NewMemoryRewriteStore returns an in-memory rewrite store; zero arguments take the
// defaults.
func NewMemoryRewriteStore(maxScopes int, ttl time.Duration) *MemoryRewriteStore {
	if maxScopes <= 0 {
		maxScopes = DefaultRewriteScopes
	}
	if ttl <= 0 {
		ttl = DefaultRewriteTTL
	}
	return &MemoryRewriteStore{maxScopes: maxScopes, maxPerScope: maxRewritesPerScope, ttl: ttl,
		now: time.Now, scopes: map[string]*list.Element{}, lru: list.New()}
}

// Remember implements RewriteStore.
func (s *MemoryRewriteStore) Remember(scope string, rws []Rewrite) {
	if len(rws) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var sc *rewriteScope
	if el, ok := s.scopes[scope]; ok {
		sc = el.Value.(*rewriteScope)
		if now.After(sc.expires) {
			sc.rws = nil
		}
		s.lru.MoveToFront(el)
	} else {
		s.makeRoom(now)
		sc = &rewriteScope{key: scope}
		s.scopes[scope] = s.lru.PushFront(sc)
	}
	for _, rw := range rws {
		sc.rws = slices.DeleteFunc(sc.rws, func(old Rewrite) bool { return old.ID == rw.ID })
		rw.Items = cloneMessages(rw.Items) // the caller keeps its slices
		sc.rws = append(sc.rws, rw)
	}
	if n := len(sc.rws); n > s.maxPerScope {
		sc.rws = append([]Rewrite(nil), sc.rws[n-s.maxPerScope:]...)
	}
	sc.expires = now.Add(s.ttl)
}

// Recall implements RewriteStore. The returned slice is the caller's; the messages in it
// are shared and must not be modified in place.
func (s *MemoryRewriteStore) Recall(scope string) []Rewrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.scopes[scope]
	if !ok {
		return nil
	}
	sc := el.Value.(*rewriteScope)
	now := s.now()
	if now.After(sc.expires) {
		s.lru.Remove(el)
		delete(s.scopes, scope)
		return nil
	}
	sc.expires = now.Add(s.ttl)
	s.lru.MoveToFront(el)
	return slices.Clone(sc.rws)
}

// makeRoom makes room for one more scope: expired scopes first, then the least recently
// used. Every use renews the time bound, so the back of the list expires first.
func (s *MemoryRewriteStore) makeRoom(now time.Time) {
	for el := s.lru.Back(); el != nil; el = s.lru.Back() {
		sc := el.Value.(*rewriteScope)
		if len(s.scopes) < s.maxScopes && !now.After(sc.expires) {
			return
		}
		s.lru.Remove(el)
		delete(s.scopes, sc.key)
	}
}

// Remember implements RewriteStore: a MemoryStore carries the rewrite memory too, so the
// single store a deployment keeps across configuration reloads holds both kinds of
// conversation state.
func (s *MemoryStore) Remember(scope string, rws []Rewrite) { s.rewrites.Remember(scope, rws) }

// Recall implements RewriteStore.
func (s *MemoryStore) Recall(scope string) []Rewrite { return s.rewrites.Recall(scope) }

// rewriteKind scopes rewrite memory like the deferred-injection kinds (exchange.storeKey).
const rewriteKind = "rewrites"

// rewriteState is one request's view of the rewrite memory.
type rewriteState struct {
	scope   string
	applied int // remembered rewrites re-applied to this request's list
	// index maps an index of req.Items to the index in the effective list of the first
	// message standing for it (len(req.Items)+1 entries); nil while nothing was re-applied,
	// when both lists line up.
	index   []int
	settled []bool    // req.Items index → replaced by a remembered rewrite
	pending []Rewrite // accepted at this request; remembered once enforced
}

// at maps an index of req.Items to the effective list.
func (rs *rewriteState) at(i int) int {
	if rs.index == nil || i < 0 || i >= len(rs.index) {
		return i
	}
	return rs.index[i]
}

// isSettled reports whether the message at req.Items index i was replaced by a
// remembered rewrite: its boundary was decided at an earlier request and is not emitted
// again.
func (rs *rewriteState) isSettled(i int) bool {
	return rs.settled != nil && i >= 0 && i < len(rs.settled) && rs.settled[i]
}

// settledFrom reports whether every message from req.Items index i on was replaced by a
// remembered rewrite (a prompt whose turn.start was settled before: a retried request).
func (rs *rewriteState) settledFrom(i, n int) bool {
	if i >= n {
		return false
	}
	for ; i < n; i++ {
		if !rs.isSettled(i) {
			return false
		}
	}
	return true
}

// recallRewrites re-applies the session's remembered rewrites to the effective list,
// before any boundary is built, so that the upstream and every policy see the settled
// content again. Only runs whose ids and fingerprints both match are replaced.
func (x *exchange) recallRewrites() {
	x.rw.scope = x.storeKey(rewriteKind)
	remembered := x.s.rewrites.Recall(x.rw.scope)
	if len(remembered) == 0 {
		return
	}
	byID := make(map[string]*Rewrite, len(remembered))
	for i := range remembered {
		byID[remembered[i].ID] = &remembered[i]
	}
	orig := x.req.Items
	items := make([]ahp.Message, 0, len(orig))
	index := make([]int, len(orig)+1)
	settled := make([]bool, len(orig))
	applied := 0
	for i := 0; i < len(orig); {
		// Ids are cheap to compare; only a candidate is hashed.
		if rw := byID[orig[i].ID]; rw != nil && rw.Count > 0 && rw.Count <= len(orig)-i &&
			rw.Fingerprint != "" && fingerprint(orig[i:i+rw.Count]) == rw.Fingerprint {
			for k := i; k < i+rw.Count; k++ {
				index[k], settled[k] = len(items), true
			}
			items = append(items, cloneMessages(rw.Items)...)
			i += rw.Count
			applied++
			continue
		}
		index[i] = len(items)
		items = append(items, orig[i])
		i++
	}
	index[len(orig)] = len(items)
	if applied == 0 {
		return
	}
	x.items, x.changed = items, true
	x.rw.index, x.rw.settled, x.rw.applied = index, settled, applied
	x.s.logAt(x.ctx, zapcore.DebugLevel, "re-applied remembered rewrites", zap.Int("rewrites", applied))
}

// noteRewrite records that the count messages of req.Items from start on were replaced
// by effective at this request. It is remembered only once the request is enforced.
func (x *exchange) noteRewrite(start, count int, effective []ahp.Message, event string) {
	if count <= 0 || start < 0 || start+count > len(x.req.Items) {
		return
	}
	orig := x.req.Items[start : start+count]
	fp := fingerprint(orig)
	if fp == "" || fp == fingerprint(effective) {
		return // nothing to hold: the model sees the client's content anyway
	}
	x.rw.pending = append(x.rw.pending, Rewrite{ID: orig[0].ID, Count: count, Fingerprint: fp,
		Items: cloneMessages(effective), Event: event})
}

// commitRewrites remembers this request's rewrites unless the request was refused or
// abandoned: then the model saw nothing, the client's content stays new (a tool result
// after the last assistant message, a trailing prompt) and its boundary runs again on
// the next attempt. A flow stop or a supplied result does count: the agent gets an answer
// and moves on, and the content becomes history that no boundary would look at again.
func (x *exchange) commitRewrites(kind outcomeKind) {
	if len(x.rw.pending) == 0 || kind == outcomeRefused || kind == outcomeInterrupted {
		return
	}
	x.s.rewrites.Remember(x.rw.scope, x.rw.pending)
}

// fingerprint is the sha256 (hex) of msgs' canonical JSON, or "" if they do not encode.
func fingerprint(msgs []ahp.Message) string {
	b, err := json.Marshal(msgs)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
