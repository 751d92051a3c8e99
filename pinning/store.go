package pinning

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// Entry is what the store keeps about one tool name in one scope: its pin (Digest, empty
// while the name was never pinned) and, while the definition last seen differs, that
// definition (Pending) until `pins accept` makes it the pin or the original comes back.
// Entry is plain JSON so that a shared store keeps it as it is.
type Entry struct {
	Name        string    `json:"name"`
	Digest      string    `json:"digest,omitempty"`
	Description string    `json:"description,omitempty"` // the pinned description, for review
	Poison      []string  `json:"poison,omitempty"`      // findings when pinned, until accepted
	PinnedAt    time.Time `json:"pinnedAt,omitzero"`
	Pending     *Observed `json:"pending,omitempty"`
}

// Observed is a definition seen that is not the pin.
type Observed struct {
	Kind        string    `json:"kind"` // KindChanged, KindRenamed, KindConfusable or KindNew
	Digest      string    `json:"digest"`
	Description string    `json:"description,omitempty"`
	Poison      []string  `json:"poison,omitempty"`
	Like        string    `json:"like,omitempty"` // renamed/confusable: the pinned name it resembles
	Since       time.Time `json:"since"`
}

// Store keeps the pins; implementations are safe for concurrent use, and across
// processes when shared (state.RedisPins).
type Store interface {
	// Load returns scope's entries by name.
	Load(ctx context.Context, scope string) (map[string]Entry, error)
	// Add stores each entry whose name scope does not hold yet and leaves the others:
	// the first replica to see a tool pins it.
	Add(ctx context.Context, scope string, entries []Entry) error
	// Put stores entries, replacing those with the same names.
	Put(ctx context.Context, scope string, entries []Entry) error
	// Delete removes name from scope and reports whether it was there.
	Delete(ctx context.Context, scope, name string) (bool, error)
	// Scopes lists the scopes that hold entries.
	Scopes(ctx context.Context) ([]string, error)
}

// Memory is the Store of one process.
type Memory struct {
	mu sync.Mutex
	m  map[string]map[string]Entry
}

// NewMemory returns an empty in-memory Store.
func NewMemory() *Memory { return &Memory{m: map[string]map[string]Entry{}} }

var _ Store = (*Memory)(nil)

func (s *Memory) Load(_ context.Context, scope string) (map[string]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m[scope]), nil
}

func (s *Memory) Add(_ context.Context, scope string, entries []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		if _, ok := s.scope(scope)[e.Name]; !ok {
			s.m[scope][e.Name] = e
		}
	}
	return nil
}

func (s *Memory) Put(_ context.Context, scope string, entries []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		s.scope(scope)[e.Name] = e
	}
	return nil
}

func (s *Memory) Delete(_ context.Context, scope, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[scope][name]
	delete(s.m[scope], name)
	if len(s.m[scope]) == 0 {
		delete(s.m, scope)
	}
	return ok, nil
}

func (s *Memory) Scopes(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.m)), nil
}

func (s *Memory) scope(name string) map[string]Entry {
	m := s.m[name]
	if m == nil {
		m = map[string]Entry{}
		s.m[name] = m
	}
	return m
}
