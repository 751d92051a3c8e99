package proxy

import (
	"strconv"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestMemoryStoreTakeBoundAndTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewMemoryStore(2, time.Minute)
	s.now = func() time.Time { return now }
	m := func(id string) []ahp.Message { return []ahp.Message{textMessage(id, ahp.RoleUser, id)} }

	s.Put("a", m("a1"))
	s.Put("a", m("a2"))
	if got := s.Take("a"); len(got) != 2 || got[0].ID != "a1" || got[1].ID != "a2" {
		t.Fatalf("take a: %+v", got)
	}
	if got := s.Take("a"); got != nil {
		t.Fatalf("take removes: %+v", got)
	}

	s.Put("b", m("b"))
	s.Put("c", m("c"))
	s.Put("d", m("d")) // over the key bound: the oldest key goes
	if s.Take("b") != nil || s.Take("c") == nil || s.Take("d") == nil {
		t.Fatal("oldest key not evicted first")
	}

	s.Put("e", m("e"))
	now = now.Add(2 * time.Minute)
	if got := s.Take("e"); got != nil {
		t.Fatalf("expired entry delivered: %+v", got)
	}

	for i := 0; i < maxPendingPerKey+10; i++ {
		s.Put("f", m(strconv.Itoa(i)))
	}
	if got := s.Take("f"); len(got) != maxPendingPerKey || got[0].ID != "10" {
		t.Fatalf("per-key bound: %d messages, first %s", len(got), got[0].ID)
	}
	// Many put/take cycles keep the eviction list bounded.
	for i := 0; i < 1000; i++ {
		k := strconv.Itoa(i)
		s.Put(k, m(k))
		s.Take(k)
	}
	if len(s.order) > 2*s.maxKeys+1 {
		t.Fatalf("eviction order grew to %d", len(s.order))
	}
}
