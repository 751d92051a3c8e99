package approvals

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Store keeps the records. Settle is the one transition out of pending, atomic across
// every replica that shares the store: of two deciders, exactly one wins, and a decision
// arriving after ExpiresAt expires the record instead.
type Store interface {
	// Create stores a new pending record.
	Create(ctx context.Context, r Record) error
	// Get returns one record, or ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// List returns the records kept, newest first.
	List(ctx context.Context) ([]Record, error)
	// Settle moves a pending record to state (approved, denied or expired) and returns
	// it. ErrSettled (with the record as it is) when it was not pending, or when now is
	// past its expiry (it is then expired, and returned so).
	Settle(ctx context.Context, id, state, by, reason string, now time.Time) (Record, error)
	// Watch delivers every record change (creation and settlement, from any replica
	// sharing the store) until ctx ends. Delivery is best effort: a waiter re-reads.
	Watch(ctx context.Context) (<-chan Record, error)
	Close() error
}

// Retention of decided records (listing, replayed decisions answered 409 not 404).
const (
	keepDecided    = 24 * time.Hour
	maxMemoryKept  = 10000
	watchQueueSize = 256
)

// Memory is the Store of one process.
type Memory struct {
	mu       sync.Mutex
	recs     map[string]*Record
	watchers map[chan Record]struct{}
}

// NewMemory returns an empty in-process store.
func NewMemory() *Memory {
	return &Memory{recs: map[string]*Record{}, watchers: map[chan Record]struct{}{}}
}

var _ Store = (*Memory)(nil)

func (m *Memory) Create(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(r.CreatedAt)
	c := r
	m.recs[r.ID] = &c
	m.publish(c)
	return nil
}

func (m *Memory) Get(_ context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	return *r, nil
}

func (m *Memory) List(_ context.Context) ([]Record, error) {
	m.mu.Lock()
	out := make([]Record, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, *r)
	}
	m.mu.Unlock()
	sortNewestFirst(out)
	return out, nil
}

func (m *Memory) Settle(_ context.Context, id, state, by, reason string, now time.Time) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	if r.State != StatePending {
		return *r, ErrSettled
	}
	late := state != StateExpired && !now.Before(r.ExpiresAt)
	if late {
		state, by, reason = StateExpired, "", TimedOutReason
	}
	at := now.UTC()
	r.State, r.DecidedBy, r.Reason, r.DecidedAt = state, by, reason, &at
	m.publish(*r)
	if late {
		return *r, ErrSettled
	}
	return *r, nil
}

func (m *Memory) Watch(ctx context.Context) (<-chan Record, error) {
	ch := make(chan Record, watchQueueSize)
	m.mu.Lock()
	m.watchers[ch] = struct{}{}
	m.mu.Unlock()
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		delete(m.watchers, ch)
		close(ch)
		m.mu.Unlock()
	}()
	return ch, nil
}

func (m *Memory) Close() error { return nil }

// publish hands r to every watcher without blocking the store (m.mu held).
func (m *Memory) publish(r Record) {
	for ch := range m.watchers {
		select {
		case ch <- r:
		default:
		}
	}
}

// prune drops decided records past their retention, and the oldest decided ones beyond
// the bound (m.mu held). Pending records are never dropped: a call is waiting on each.
func (m *Memory) prune(now time.Time) {
	for id, r := range m.recs {
		if r.DecidedAt != nil && now.Sub(*r.DecidedAt) > keepDecided {
			delete(m.recs, id)
		}
	}
	if len(m.recs) < maxMemoryKept {
		return
	}
	var decided []*Record
	for _, r := range m.recs {
		if r.DecidedAt != nil {
			decided = append(decided, r)
		}
	}
	sort.Slice(decided, func(i, j int) bool { return decided[i].DecidedAt.Before(*decided[j].DecidedAt) })
	for _, r := range decided {
		if len(m.recs) < maxMemoryKept {
			break
		}
		delete(m.recs, r.ID)
	}
}

func sortNewestFirst(rs []Record) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].CreatedAt.After(rs[j].CreatedAt) })
}
