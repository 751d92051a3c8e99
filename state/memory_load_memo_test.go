package state

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// lookupEach is Load without the memo: each id looked up in the scope's map.
func lookupEach(m *Memory, scope Scope, ids []string) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.scopes[scope]
	if !ok {
		return nil
	}
	sc := el.Value.(*memScope)
	var out []Record
	for _, id := range ids {
		if r, ok := sc.recs[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

// TestLoadMemoAgreesWithLookingEachIdUp: conversations that grow as an agent's do, with
// records written before and among the repeated ids, re-recorded, evicted and compacted,
// with ids repeated within a list, lists cut short and changed in the middle: every Load
// returns what looking each id up returns.
func TestLoadMemoAgreesWithLookingEachIdUp(t *testing.T) {
	ctx := context.Background()
	extended := 0 // Loads that extended the previous list in place
	defer func() {
		if extended == 0 {
			t.Error("no Load extended the previous list in place: the test does not show that path")
		}
	}()
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 99))
		m := NewMemory(0, 0)
		scope := Scope{Tenant: "t", Session: fmt.Sprint("s", seed)}
		var ids []string
		var prev, prevCopy []Record // the last Load's list, and a copy of it
		next := 0
		newID := func() string { next++; return fmt.Sprintf("msg_%d_%04d", seed, next) }
		for step := range 1500 {
			switch r := rng.IntN(20); {
			case r < 12: // the next turn: a few new messages
				for range 1 + rng.IntN(3) {
					ids = append(ids, newID())
				}
			case r < 14 && len(ids) > 2: // a message in the middle replaced
				ids = append([]string(nil), ids...)
				ids[rng.IntN(len(ids))] = newID()
			case r < 15 && len(ids) > 2: // cut short (an edit of an earlier prompt)
				ids = append([]string(nil), ids[:rng.IntN(len(ids))]...)
			case r < 16 && len(ids) > 0: // an id repeated (a link id after the items)
				ids = append(ids, ids[rng.IntN(len(ids))])
			}
			// Records: for some of the newest ids, some older ones, and ids not listed.
			var recs []Record
			for range rng.IntN(4) {
				id := newID()
				if len(ids) > 0 && rng.IntN(3) > 0 {
					id = ids[rng.IntN(len(ids))]
					if rng.IntN(2) == 0 {
						id = ids[len(ids)-1-rng.IntN(min(len(ids), 3))]
					}
				}
				recs = append(recs, Record{ID: id, Count: 1, Fingerprint: fmt.Sprint(step, rng.Int())})
			}
			if seed%2 == 1 && step%100 == 0 {
				// A burst beyond the memo's change bound, and (seeds 3 and 5) beyond the
				// scope's record bound: evictions and compactions.
				for range 20 + int(seed/3)*MaxRecordsPerScope {
					recs = append(recs, Record{ID: newID(), Count: 1})
				}
			}
			if err := m.Record(ctx, scope, recs); err != nil {
				t.Fatal(err)
			}
			arg := slices.Clone(ids)
			snap, err := m.Load(ctx, scope, arg)
			if err != nil {
				t.Fatal(err)
			}
			clear(arg) // the caller reuses its list (proxy's idLists): Load kept nothing of it
			if want := lookupEach(m, scope, ids); !reflect.DeepEqual(snap.Records, want) && len(snap.Records)+len(want) > 0 {
				t.Fatalf("seed %d step %d: Load gave %d records, looking each id up %d", seed, step, len(snap.Records), len(want))
			}
			// A list handed out earlier is not changed by a later Load, which may extend
			// the same memory past its length.
			if !reflect.DeepEqual(prev, prevCopy) {
				t.Fatalf("seed %d step %d: the list the previous Load returned changed", seed, step)
			}
			if len(prev) > 0 && len(snap.Records) > len(prev) && &snap.Records[0] == &prev[0] {
				extended++
			}
			prev, prevCopy = snap.Records, slices.Clone(snap.Records)
		}
	}
}

// TestLoadMemosAreBounded: the memos of many sessions hold at most memoBytesLimit, the
// least recently loaded giving theirs up, and a session that lost its memo loads right.
func TestLoadMemosAreBounded(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(0, 0)
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = fmt.Sprintf("msg_%064d", i)
	}
	recs := []Record{{ID: ids[0], Count: 1}, {ID: ids[2999], Count: 1}}
	sessions := 0
	for ; m.memoLRU.Len() == sessions; sessions++ {
		scope := Scope{Session: fmt.Sprint(sessions)}
		if err := m.Record(ctx, scope, recs); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Load(ctx, scope, ids); err != nil {
			t.Fatal(err)
		}
		if sessions > 10000 {
			t.Fatal("no memo was ever given up")
		}
	}
	sum := 0
	for el := m.memoLRU.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*memScope).memo.size()
	}
	if m.counted.bytes.Load() != int64(sum) || sum > memoBytesLimit {
		t.Fatalf("memos hold %d bytes, counted %d, limit %d", sum, m.counted.bytes.Load(), memoBytesLimit)
	}
	// The metrics' figures hold this store's share (other stores of the package's tests
	// may hold theirs).
	if b, e := LoadMemoStats(); b < int64(sum) || e < int64(m.memoLRU.Len()) ||
		m.counted.bytes.Load() != int64(sum) || m.counted.entries.Load() != int64(m.memoLRU.Len()) {
		t.Fatalf("LoadMemoStats %d bytes %d entries; this store counted %d / %d, holds %d / %d",
			b, e, m.counted.bytes.Load(), m.counted.entries.Load(), sum, m.memoLRU.Len())
	}
	if _, ok := m.scopes[Scope{Session: "0"}]; !ok || m.scopes[Scope{Session: "0"}].Value.(*memScope).memo != nil {
		t.Fatal("the least recently loaded session should have given its memo up, and kept its records")
	}
	snap, err := m.Load(ctx, Scope{Session: "0"}, ids)
	if err != nil || len(snap.Records) != 2 {
		t.Fatalf("after its memo went: %d records, %v", len(snap.Records), err)
	}
}
