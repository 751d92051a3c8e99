package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/redistest"
)

func msg(id, text string) ahp.Message {
	return ahp.Message{ID: id, Role: ahp.RoleUser, Parts: []ahp.Part{ahp.TextPart(id+".0", text)}}
}

func text(m ahp.Message) string {
	if len(m.Parts) == 0 || m.Parts[0].Text == nil {
		return ""
	}
	return *m.Parts[0].Text
}

// stores runs f against the memory store and a Redis store on a real redis-server.
func stores(t *testing.T, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemory(0, 0)) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		s, err := NewRedis(RedisOptions{URL: srv.URL(), KeyPrefix: "test:", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f(t, s)
	})
}

func TestStoreContract(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		a, b := Scope{Tenant: "t1", Session: "s"}, Scope{Tenant: "t2", Session: "s"}
		recs := []Record{
			{ID: "m1", Count: 1, Fingerprint: "f1", Unchanged: true, Event: ahp.EventToolAfter},
			{ID: "m2", Count: 1, Fingerprint: "f2", Items: []ahp.Message{msg("m2", "[REDACTED]")}, Event: ahp.EventToolAfter},
		}
		if err := s.Record(ctx, a, recs); err != nil {
			t.Fatal(err)
		}
		// The latest decision about a message wins.
		if err := s.Record(ctx, a, []Record{{ID: "m1", Count: 1, Fingerprint: "f1b", Unchanged: true, Event: ahp.EventToolAfter}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Defer(ctx, a, NextTurn, []ahp.Message{msg("i1", "one"), msg("i2", "two")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Defer(ctx, a, NextCall, []ahp.Message{msg("c1", "call")}); err != nil {
			t.Fatal(err)
		}

		// Another tenant with the same session id sees nothing.
		if snap, err := s.Load(ctx, b, []string{"m1", "m2"}, NextCall, NextTurn); err != nil || len(snap.Records)+len(snap.NextCall)+len(snap.NextTurn) != 0 {
			t.Fatalf("tenant b sees %+v (%v)", snap, err)
		}
		// Without taking next_turn, it stays pending.
		snap, err := s.Load(ctx, a, []string{"m0", "m1", "m2"}, NextCall) // m0 has no record
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Record{}
		for _, r := range snap.Records {
			got[r.ID] = r
		}
		if len(got) != 2 || got["m1"].Fingerprint != "f1b" || !got["m1"].Unchanged ||
			len(got["m2"].Items) != 1 || text(got["m2"].Items[0]) != "[REDACTED]" || got["m2"].Unchanged {
			t.Fatalf("records %+v", snap.Records)
		}
		if len(snap.NextCall) != 1 || text(snap.NextCall[0]) != "call" || snap.NextTurn != nil {
			t.Fatalf("first load took %+v / %+v", snap.NextCall, snap.NextTurn)
		}
		snap, err = s.Load(ctx, a, nil, NextCall, NextTurn)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.NextCall) != 0 || len(snap.NextTurn) != 2 || text(snap.NextTurn[0]) != "one" || text(snap.NextTurn[1]) != "two" {
			t.Fatalf("second load took %+v / %+v", snap.NextCall, snap.NextTurn)
		}
		// Only the records of the ids asked for come back.
		if one, err := s.Load(ctx, a, []string{"m2"}); err != nil || len(one.Records) != 1 || one.Records[0].ID != "m2" {
			t.Fatalf("load of m2 alone: %+v (%v)", one.Records, err)
		}
		// Taken means gone; the records stay.
		snap, err = s.Load(ctx, a, []string{"m2", "m1"}, NextCall, NextTurn)
		if err != nil || len(snap.NextTurn)+len(snap.NextCall) != 0 || len(snap.Records) != 2 {
			t.Fatalf("third load %+v (%v)", snap, err)
		}
		// Records come in the order of ids, one per position (an id listed twice, twice):
		// the proxy pairs them with its messages by walking both.
		for _, ids := range [][]string{{"m2", "m0", "m1"}, {"m1", "m2", "m1", "m9", "m2"}} {
			snap, err := s.Load(ctx, a, ids)
			var got, want []string
			for _, r := range snap.Records {
				got = append(got, r.ID)
			}
			for _, id := range ids {
				if id == "m1" || id == "m2" {
					want = append(want, id)
				}
			}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("load of %v: records of %v, want %v (%v)", ids, got, want, err)
			}
		}
	})
}

// TestStoreTakeOnce: many concurrent loads (for Redis over separate clients, as two
// replicas would) take each deferred injection exactly once.
func TestStoreTakeOnce(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		scope := Scope{Tenant: "t", Session: "race"}
		other := s
		if r, ok := s.(*Redis); ok {
			o, err := NewRedis(RedisOptions{URL: "redis://" + r.c.Options().Addr + "/0", KeyPrefix: "test:", Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			other = o
		}
		const rounds, loaders = 20, 8
		for round := range rounds {
			if err := s.Defer(ctx, scope, NextTurn, []ahp.Message{msg(fmt.Sprint("r", round), "x")}); err != nil {
				t.Fatal(err)
			}
			var taken atomic.Int64
			var wg sync.WaitGroup
			for i := range loaders {
				st := s
				if i%2 == 1 {
					st = other
				}
				wg.Go(func() {
					snap, err := st.Load(ctx, scope, nil, NextTurn)
					if err != nil {
						t.Error(err)
					}
					taken.Add(int64(len(snap.NextTurn)))
				})
			}
			wg.Wait()
			if n := taken.Load(); n != 1 {
				t.Fatalf("round %d: the injection was taken %d times", round, n)
			}
		}
	})
}

func TestStoreBounds(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		scope := Scope{Tenant: "t", Session: "bounds"}
		var many []ahp.Message
		for i := range MaxPendingPerKind + 10 {
			many = append(many, msg(fmt.Sprint("i", i), fmt.Sprint(i)))
		}
		if err := s.Defer(ctx, scope, NextTurn, many); err != nil {
			t.Fatal(err)
		}
		snap, err := s.Load(ctx, scope, nil, NextTurn)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.NextTurn) != MaxPendingPerKind || text(snap.NextTurn[0]) != "10" {
			t.Fatalf("kept %d injections, first %q: the oldest go beyond the bound", len(snap.NextTurn), text(snap.NextTurn[0]))
		}
		var recs []Record
		var ids []string
		for i := range MaxRecordsPerScope + 5 {
			recs = append(recs, Record{ID: fmt.Sprint("m", i), Count: 1, Fingerprint: "f", Unchanged: true})
			ids = append(ids, fmt.Sprint("m", i))
		}
		if err := s.Record(ctx, scope, recs); err != nil {
			t.Fatal(err)
		}
		last := Record{ID: "latest", Count: 1, Fingerprint: "f", Unchanged: true}
		if err := s.Record(ctx, scope, []Record{last}); err != nil {
			t.Fatal(err)
		}
		snap, err = s.Load(ctx, scope, append(ids, "latest"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range snap.Records {
			found = found || r.ID == "latest"
		}
		if len(snap.Records) != MaxRecordsPerScope || !found {
			t.Fatalf("kept %d records (latest kept: %v), want %d with the latest", len(snap.Records), found, MaxRecordsPerScope)
		}
	})
}

func TestMemoryEvictsLeastRecentlyUsedAndExpires(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(2, time.Minute)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	rec := []Record{{ID: "x", Count: 1, Fingerprint: "f", Unchanged: true}}
	a, b, c := Scope{Session: "a"}, Scope{Session: "b"}, Scope{Session: "c"}
	_ = m.Record(ctx, a, rec)
	_ = m.Record(ctx, b, rec)
	_, _ = m.Load(ctx, a, []string{"x"}) // a is used: b is now the least recently used
	_ = m.Record(ctx, c, rec)
	if snap, _ := m.Load(ctx, b, []string{"x"}); len(snap.Records) != 0 {
		t.Fatal("b should have been evicted")
	}
	if snap, _ := m.Load(ctx, a, []string{"x"}); len(snap.Records) != 1 {
		t.Fatal("a was used last and should be kept")
	}
	now = now.Add(2 * time.Minute)
	if snap, _ := m.Load(ctx, a, []string{"x"}); len(snap.Records) != 0 {
		t.Fatal("a should have expired")
	}
	if m.Sessions() > 2 {
		t.Fatalf("%d sessions held, bound 2", m.Sessions())
	}
}

// TestRedisKeysAndTTL: keys carry the prefix and a hash, never the raw session id or
// tenant, and every key has the TTL.
func TestRedisKeysAndTTL(t *testing.T) {
	srv := redistest.Start(t)
	s, err := NewRedis(RedisOptions{URL: srv.URL(), KeyPrefix: "hp-test:", TTL: time.Hour, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	scope := Scope{Tenant: "tenant-hash-abc", Session: "visible-session-id"}
	_ = s.Record(ctx, scope, []Record{{ID: "m", Count: 1, Fingerprint: "f", Unchanged: true}})
	_ = s.Defer(ctx, scope, NextTurn, []ahp.Message{msg("i", "x")})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	keys, err := raw.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("keys %q", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "hp-test:{") || strings.Contains(k, "visible-session-id") || strings.Contains(k, "tenant-hash-abc") {
			t.Errorf("key %q", k)
		}
		ttl, err := raw.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("key %q ttl %v (%v)", k, ttl, err)
		}
	}
	// A value over the bound is refused with ErrTooLarge and not kept.
	big := Record{ID: "big", Count: 1, Fingerprint: "f", Items: []ahp.Message{msg("big", strings.Repeat("x", MaxValueBytes))}}
	if err := s.Record(ctx, scope, []Record{big}); err != ErrTooLarge {
		t.Fatalf("record over the bound: %v", err)
	}
	if n, _ := raw.HLen(ctx, keys[0]).Result(); n > 1 {
		t.Fatalf("the oversized record was kept")
	}
}

func TestRedisRefusesPasswordInURL(t *testing.T) {
	_, err := NewRedis(RedisOptions{URL: "redis://:hunter2@127.0.0.1:6379/0"})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "passwordEnv") {
		t.Fatalf("err %v", err)
	}
}

// TestRedisDownIsAnError: with no server, every operation fails within the timeout
// instead of hanging or pretending to succeed.
func TestRedisDownIsAnError(t *testing.T) {
	srv := redistest.Start(t)
	s, err := NewRedis(RedisOptions{URL: srv.URL(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Stop()
	ctx := context.Background()
	if _, err := s.Load(ctx, Scope{Session: "x"}, []string{"m"}, NextCall); err == nil {
		t.Fatal("load succeeded with Redis down")
	}
	if err := s.Record(ctx, Scope{Session: "x"}, []Record{{ID: "m", Count: 1}}); err == nil {
		t.Fatal("record succeeded with Redis down")
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := s.Load(ctx, Scope{Session: "x"}, []string{"m"}, NextCall); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no recovery after Redis came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMemoryRecordBoundDropsOldest: past the per-session bound the oldest records go, and
// re-recording one message does not grow the bookkeeping.
func TestMemoryRecordBoundDropsOldest(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(0, 0)
	scope := Scope{Session: "s"}
	var ids []string
	for i := range MaxRecordsPerScope + 2 {
		id := fmt.Sprint("m", i)
		ids = append(ids, id)
		if err := m.Record(ctx, scope, []Record{{ID: id, Count: 1, Fingerprint: "f", Unchanged: true}}); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := m.Load(ctx, scope, ids)
	got := map[string]bool{}
	for _, r := range snap.Records {
		got[r.ID] = true
	}
	if got["m0"] || got["m1"] || !got["m2"] || !got[ids[len(ids)-1]] || len(got) != MaxRecordsPerScope {
		t.Fatalf("kept %d records; m0 %v m1 %v m2 %v last %v", len(got), got["m0"], got["m1"], got["m2"], got[ids[len(ids)-1]])
	}
	for range 3 * MaxRecordsPerScope {
		_ = m.Record(ctx, scope, []Record{{ID: "m2", Count: 1, Fingerprint: "g", Unchanged: true}})
	}
	m.mu.Lock()
	n := len(m.scopes[scope].Value.(*memScope).order)
	m.mu.Unlock()
	if n > 2*MaxRecordsPerScope+1 {
		t.Fatalf("bookkeeping grew to %d entries", n)
	}
}
