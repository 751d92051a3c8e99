package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookproxy/hookproxy/internal/redistest"
)

// backends runs f against a memory store and a real Redis.
func backends(t *testing.T, f func(t *testing.T, newStore func() Store)) {
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		f(t, func() Store { return m })
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, func() Store {
			opt, _ := redis.ParseURL(srv.URL())
			c := redis.NewClient(opt)
			t.Cleanup(func() { _ = c.Close() })
			return NewRedis(c, "t:", time.Second)
		})
	})
}

func newService(t *testing.T, st Store, timeout time.Duration) *Service {
	t.Helper()
	s, err := New(Options{Store: st, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var push = Ask{Route: "/openai", Session: "s1", Tool: "Bash", Input: json.RawMessage(`{"command":"git push"}`),
	Generation: "g1", AskedBy: []string{"tools"}, Reasons: []string{"git push needs approval"}}

// hold starts a hold in the background and returns the pending record and the outcome.
func hold(t *testing.T, s *Service, a Ask) (Record, <-chan Outcome) {
	t.Helper()
	out := make(chan Outcome, 1)
	go func() { out <- s.Hold(context.Background(), a, 0, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		recs, err := s.List(context.Background(), "pending")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Tool.Name == a.Tool && string(r.Tool.Input) == string(a.Input) {
				return r, out
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pending record appeared")
	return Record{}, nil
}

func outcome(t *testing.T, out <-chan Outcome) Outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("the hold did not end")
		return Outcome{}
	}
}

func TestApproveDenyExpire(t *testing.T) {
	backends(t, func(t *testing.T, newStore func() Store) {
		s := newService(t, newStore(), 30*time.Second)
		rec, out := hold(t, s, push)
		if rec.State != StatePending || rec.Digest != Digest("/openai", "s1", "Bash", push.Input, "g1") || rec.AskedBy[0] != "tools" {
			t.Fatalf("pending record: %+v", rec)
		}
		if _, err := s.Decide(context.Background(), rec.ID, DecisionApprove, "alice", "ok", ""); err != nil {
			t.Fatal(err)
		}
		o := outcome(t, out)
		if !o.Approved || o.By != "alice" || o.Decision != StateApproved {
			t.Fatalf("outcome %+v", o)
		}
		// Single use: a replayed decision is a conflict, and changes nothing.
		got, err := s.Decide(context.Background(), rec.ID, DecisionDeny, "bob", "", "")
		if !errors.Is(err, ErrSettled) || got.State != StateApproved || got.DecidedBy != "alice" {
			t.Fatalf("replay: %v %+v", err, got)
		}

		deny := push
		deny.Input = json.RawMessage(`{"command":"git push --force"}`)
		rec, out = hold(t, s, deny)
		if _, err := s.Decide(context.Background(), rec.ID, DecisionDeny, "bob", "not today", ""); err != nil {
			t.Fatal(err)
		}
		o = outcome(t, out)
		if o.Approved || o.Decision != StateDenied || o.Note("Bash") != "Tool call Bash was denied by bob: not today." {
			t.Fatalf("deny outcome %+v %q", o, o.Note("Bash"))
		}

		short := newService(t, newStore(), 300*time.Millisecond)
		exp := push
		exp.Input = json.RawMessage(`{"command":"git push origin"}`)
		rec, out = hold(t, short, exp)
		o = outcome(t, out)
		if o.Approved || o.Decision != StateExpired || o.Note("Bash") != "Tool call Bash was not run: approval timed out." {
			t.Fatalf("expire outcome %+v", o)
		}
		// A decision after the expiry is refused.
		if _, err := short.Decide(context.Background(), rec.ID, DecisionApprove, "alice", "", ""); !errors.Is(err, ErrSettled) {
			t.Fatalf("late approval: %v", err)
		}
		if _, err := s.Decide(context.Background(), "apr_unknown", DecisionApprove, "alice", "", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown: %v", err)
		}
	})
}

// An approval releases the one call it was asked for: another held call, with another
// input, stays held; and a decision naming the other call's digest is refused.
func TestDigestBinding(t *testing.T) {
	backends(t, func(t *testing.T, newStore func() Store) {
		s := newService(t, newStore(), 30*time.Second)
		a, outA := hold(t, s, push)
		other := push
		other.Input = json.RawMessage(`{"command":"git push --force origin main"}`)
		b, outB := hold(t, s, other)
		if a.Digest == b.Digest {
			t.Fatal("two inputs share a digest")
		}
		if _, err := s.Decide(context.Background(), b.ID, DecisionApprove, "alice", "", a.Digest); !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("approval with A's digest released B: %v", err)
		}
		if _, err := s.Decide(context.Background(), a.ID, DecisionApprove, "alice", "", a.Digest); err != nil {
			t.Fatal(err)
		}
		if o := outcome(t, outA); !o.Approved {
			t.Fatalf("A: %+v", o)
		}
		select {
		case o := <-outB:
			t.Fatalf("B was released by A's approval: %+v", o)
		case <-time.After(300 * time.Millisecond):
		}
		if r, _ := s.Get(context.Background(), b.ID); r.State != StatePending {
			t.Fatalf("B: %+v", r)
		}
		_, _ = s.Decide(context.Background(), b.ID, DecisionDeny, "alice", "", "")
		outcome(t, outB)
	})
}

// Two services on one Redis, as two replicas: the call held by A is approved on B, and A
// learns it through the change feed well before its 2 s re-read.
func TestDecisionOnAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	store := func() Store {
		opt, _ := redis.ParseURL(srv.URL())
		c := redis.NewClient(opt)
		t.Cleanup(func() { _ = c.Close() })
		return NewRedis(c, "t:", time.Second)
	}
	a, b := newService(t, store(), 30*time.Second), newService(t, store(), 30*time.Second)
	rec, out := hold(t, a, push)
	seen, err := b.Get(context.Background(), rec.ID)
	if err != nil || seen.State != StatePending {
		t.Fatalf("B does not see A's record: %v %+v", err, seen)
	}
	start := time.Now()
	if _, err := b.Decide(context.Background(), rec.ID, DecisionApprove, "bob", "", ""); err != nil {
		t.Fatal(err)
	}
	o := outcome(t, out)
	if !o.Approved || o.By != "bob" {
		t.Fatalf("outcome %+v", o)
	}
	if d := time.Since(start); d > recheckEvery {
		t.Fatalf("A learnt the decision after %v: the change feed did not deliver it", d)
	}
}

// Concurrent deciders: exactly one wins.
func TestOneDecisionWins(t *testing.T) {
	backends(t, func(t *testing.T, newStore func() Store) {
		s := newService(t, newStore(), 30*time.Second)
		rec, out := hold(t, s, push)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				d := DecisionApprove
				if i%2 == 1 {
					d = DecisionDeny
				}
				if _, err := s.Decide(context.Background(), rec.ID, d, "x", "", ""); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}(i)
		}
		wg.Wait()
		outcome(t, out)
		if wins != 1 {
			t.Fatalf("%d decisions won", wins)
		}
	})
}

// A store that fails while a call is held refuses the call.
func TestStoreFailureRefuses(t *testing.T) {
	srv := redistest.Start(t)
	opt, _ := redis.ParseURL(srv.URL())
	c := redis.NewClient(opt)
	defer c.Close()
	s := newService(t, NewRedis(c, "t:", 200*time.Millisecond), 30*time.Second)
	srv.Stop()
	o := s.Hold(context.Background(), push, 0, nil)
	if o.Approved || o.Decision != DecisionFailed || o.Err == nil {
		t.Fatalf("outcome with Redis down: %+v", o)
	}
}

func TestCanonicalDigest(t *testing.T) {
	d1 := Digest("/r", "s", "Bash", json.RawMessage(`{"b":1,"a":[1, 2]}`), "g")
	d2 := Digest("/r", "s", "Bash", json.RawMessage(`{ "a":[1,2], "b":1 }`), "g")
	if d1 != d2 {
		t.Fatal("member order or spacing changes the digest")
	}
	for _, other := range []string{
		Digest("/r", "s", "Bash", json.RawMessage(`{"b":2,"a":[1,2]}`), "g"),
		Digest("/r", "s2", "Bash", json.RawMessage(`{"b":1,"a":[1,2]}`), "g"),
		Digest("/r", "s", "Bash", json.RawMessage(`{"b":1,"a":[1,2]}`), "g2"),
		Digest("/q", "s", "Bash", json.RawMessage(`{"b":1,"a":[1,2]}`), "g"),
		Digest("/r", "s", "bash", json.RawMessage(`{"b":1,"a":[1,2]}`), "g"),
	} {
		if other == d1 {
			t.Fatal("a different call shares the digest")
		}
	}
}
