package proxy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/listmemo"
	"github.com/hookproxy/hookproxy/state"
)

// resetFingerprintMemo empties the process's memo of fingerprints (benchmarks).
func resetFingerprintMemo() { fpMemo = listmemo.New[[]fpUnit](fpMemoBytes) }

// hashedUnits collects the units matchRecords fingerprints (rather than takes from the
// memo) while a test runs, one list per request.
type hashedUnits struct {
	mu  sync.Mutex
	cur []int // the starts hashed since the last take
}

func watchFingerprints(t *testing.T) *hashedUnits {
	h := &hashedUnits{}
	fingerprintHook = func(start, _ int) {
		h.mu.Lock()
		h.cur = append(h.cur, start)
		h.mu.Unlock()
	}
	t.Cleanup(func() { fingerprintHook = nil })
	return h
}

// take returns the starts hashed since the last take, in order.
func (h *hashedUnits) take() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.cur)
	h.cur = h.cur[:0]
	slices.Sort(out)
	return out
}

// A tool loop over several requests, each the history plus one more call and result: the
// settlement units of the history are fingerprinted once, at the request after they were
// settled, and taken from the memo after that; a result redacted at its tool.after stays
// redacted on every later request although its fingerprint is no longer computed; and a
// client that edits that old result (same call id, so the same message id, another text)
// gets its edit seen as new content: fingerprinted again, tool.after again, no rewrite.
func TestFingerprintsReusedAcrossRequests(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: redactToolOutput(t)}
			ch := newTestChain(t, pol, intercept(ahp.EventTurnStart, ahp.EventToolAfter, ahp.EventModelRequestBefore))
			px := startProxy(t, testConfig(up.URL), ch, Options{})
			hashed := watchFingerprints(t)

			// A prompt of this run only: no other test's list shares its start.
			prompt := c.user(fmt.Sprintf("deploy the app (%s %d)", t.Name(), time.Now().UnixNano()))
			callID := func(k int) string {
				if c.name == "anthropic" {
					return "toolu_" + strconv.Itoa(k)
				}
				return "call_" + strconv.Itoa(k)
			}
			output := func(k int) string {
				if k == 1 {
					return "aws_access_key_id = " + awsKey
				}
				return "step " + strconv.Itoa(k) + " done"
			}
			// history(n, edit) is the prompt and n calls with their results; edit, when
			// set, replaces the first result's output.
			history := func(n int, edit string) []string {
				h := []string{prompt}
				for k := 1; k <= n; k++ {
					out := output(k)
					if k == 1 && edit != "" {
						out = edit
					}
					h = append(h, c.call(callID(k), "step "+strconv.Itoa(k)), c.result(callID(k), out))
				}
				return h
			}
			// Enough requests that the remembered list is replaced once after the first.
			const requests = fpKeepAfter + 5
			kept := 0 // the last request whose list the memo holds (0: none)
			for n := 1; n <= requests; n++ {
				postOK(t, px.URL+c.path, c.body(history(n, "")...), nil)
				got := hashed.take()
				// Items: the prompt at 0, call k at 2k-1, its result at 2k. Request n has the
				// records of the prompt and results 1..n-1. The first request has no records;
				// the second fingerprints all it has (the memo knows no list of this
				// conversation yet) and is remembered; every later one only the results
				// settled since the remembered request, and is remembered in its turn once
				// that is fpKeepAfter of them.
				var want []int
				switch {
				case n == 2:
					want = []int{0, 2}
				case n > 2:
					for k := kept; k < n; k++ {
						want = append(want, 2*k)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("request %d fingerprinted the units at %v, want %v", n, got, want)
				}
				if n == 2 || len(got) >= fpKeepAfter {
					kept = n
				}
				body := upstreamBody(t, up, n-1)
				if strings.Contains(body, awsKey) || !strings.Contains(body, "aws_access_key_id = [REDACTED]") {
					t.Fatalf("request %d: the recorded rewrite of the first result does not hold: %s", n, body)
				}
			}
			if kept <= 2 || kept == requests {
				t.Fatalf("the remembered list was last replaced at request %d: the test does not show a second one", kept)
			}
			if n := toolAfterCalls(pol); n[callID(1)] != 1 || n[callID(requests)] != 1 {
				t.Fatalf("tool.after per call: %v, want one each", n)
			}

			// The control: the first result edited in the history (it sits inside the run the
			// memo holds a fingerprint for).
			postOK(t, px.URL+c.path, c.body(history(requests, "aws_access_key_id = (rotated)")...), nil)
			if got := hashed.take(); !slices.Contains(got, 2) {
				t.Fatalf("the edited result's fingerprint was taken from the memo (hashed %v)", got)
			}
			body := upstreamBody(t, up, requests)
			if !strings.Contains(body, "aws_access_key_id = (rotated)") || strings.Contains(body, "[REDACTED]") {
				t.Fatalf("the edited result was rewritten with the record of the original: %s", body)
			}
			if n := toolAfterCalls(pol); n[callID(1)] != 2 {
				t.Fatalf("tool.after for the edited result ran %d times in all, want 2 (settled again)", n[callID(1)])
			}
			// Back to the original history: its records still match, the rewrite holds.
			postOK(t, px.URL+c.path, c.body(history(requests, "")...), nil)
			if body := upstreamBody(t, up, requests+1); strings.Contains(body, awsKey) || !strings.Contains(body, "[REDACTED]") {
				t.Fatalf("the original history again: %s", body)
			}
		})
	}
}

// matchRecords gives the same outcome with the memo as without it, over random histories
// re-sent with edits (texts, ids, roles, parts changed in place; messages inserted,
// dropped, re-sent from other memory) and records of units of earlier versions, some with
// rewrites. The memo must be used (a third of the fingerprints or more taken from it; a
// list is remembered only once it is worth it), and an edit inside a remembered unit must
// show (the outcomes would differ otherwise: its stale record would match).
func TestMatchRecordsMemoAgreesWithoutMemo(t *testing.T) {
	memo := listmemo.New[[]fpUnit](1 << 20)
	var computed int
	fingerprintHook = func(int, int) { computed++ }
	t.Cleanup(func() { fingerprintHook = nil })
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	texts := []string{"ls", "total 0", "aws_access_key_id = " + awsKey, "ok", "", "deploy it", "step done"}
	roles := []string{ahp.RoleUser, ahp.RoleAssistant, ahp.RoleTool}
	newMessage := func(id string) ahp.Message {
		m := textMessage(id, roles[rng.IntN(len(roles))], texts[rng.IntN(len(texts))])
		if rng.IntN(4) == 0 {
			m.Parts = append(m.Parts, ahp.TextPart(id+".1", texts[rng.IntN(len(texts))]))
		}
		return m
	}
	deadline := time.Now().Add(3 * time.Second)
	var sessions, requests, withMemo, without int
	for sessions < 3000 && time.Now().Before(deadline) {
		sessions++
		// The first two messages start every session's list alike: the memo files lists
		// by them, so sessions meet in its buckets.
		list := []ahp.Message{textMessage("sys", ahp.RoleSystem, "you are an agent"), textMessage("u0", ahp.RoleUser, "go")}
		var recs []state.Record
		next := 1
		for r := 0; r < 16; r++ {
			requests++
			// The next request: a new list (the memo keeps the old one as it was), the same
			// strings, with edits.
			list = ahp.CloneMessages(list)
			for range 1 + rng.IntN(3) {
				list = append(list, newMessage("m"+strconv.Itoa(next)))
				next++
			}
			for range rng.IntN(3) {
				if len(list) == 0 {
					break // deletions can empty a list: nothing left to edit
				}
				k := rng.IntN(len(list))
				m := &list[k]
				switch rng.IntN(7) {
				case 0:
					m.Parts[0].Text = &texts[rng.IntN(len(texts))]
				case 1:
					s := strings.Clone(*m.Parts[0].Text) // the same text from other memory
					m.Parts[0].Text = &s
				case 2:
					m.ID = "m" + strconv.Itoa(rng.IntN(next))
				case 3:
					m.Role = roles[rng.IntN(len(roles))]
				case 4:
					m.Parts[0].Category = ahp.CategoryToolResult
				case 5:
					list = slices.Delete(list, k, k+1)
				case 6:
					list = slices.Insert(list, k, newMessage("m"+strconv.Itoa(rng.IntN(next))))
				}
			}
			td := transport.NewTextDigests()
			// What a store loads for the list's ids: their records in the list's order.
			loaded := loadedFor(list, recs)
			c0 := computed
			got := matchRecords(memo, td, list, loaded)
			withMemo += computed - c0
			c0 = computed
			want := matchRecords(nil, td, list, loaded)
			without += computed - c0
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("session %d request %d: with the memo %+v\nwithout %+v", sessions, r, got, want)
			}
			// Records in another order pair by id, where the list's ids are its own.
			if uniqueIDs(list) {
				if other := matchRecords(nil, td, list, recs); !reflect.DeepEqual(other, want) {
					t.Fatalf("session %d request %d: records out of order %+v\nin order %+v", sessions, r, other, want)
				}
			}
			if eager := matchRecordsEagerly(list, recs); !reflect.DeepEqual(got, eager) {
				t.Fatalf("session %d request %d: %d rewrites, %d matched, index %v, known %v, %d items\n"+
					"the eager matching: %d rewrites, %d matched, index %v, known %v, %d items", sessions, r,
					got.applied, got.matched, got.index, got.known, len(got.items),
					eager.applied, eager.matched, eager.index, eager.known, len(eager.items))
			}
			// Records of a few units of this list: settled unchanged or rewritten.
			for range rng.IntN(8) * min(len(list), 1) {
				start := rng.IntN(len(list))
				count := 1 + rng.IntN(min(3, len(list)-start))
				rec := state.Record{ID: list[start].ID, Count: count, Fingerprint: fingerprint(nil, list[start:start+count])}
				if rng.IntN(2) == 0 {
					rec.Unchanged = true
				} else {
					rec.Items = []ahp.Message{textMessage("rw"+strconv.Itoa(r), ahp.RoleTool, "[REDACTED]")}
				}
				recs = slices.DeleteFunc(recs, func(o state.Record) bool { return o.ID == rec.ID })
				recs = append(recs, rec)
			}
		}
	}
	t.Logf("%d sessions, %d requests: %d fingerprints computed with the memo, %d without", sessions, requests, withMemo, without)
	if without == 0 || withMemo*3 > without*2 {
		t.Fatalf("the memo saved too little: %d fingerprints with it, %d without", withMemo, without)
	}
}

// loadedFor is what a store's Load returns for list's ids when it holds recs (one record
// per id): in the list's order, one per message whose id has a record.
func loadedFor(list []ahp.Message, recs []state.Record) []state.Record {
	var out []state.Record
	for _, m := range list {
		if k := slices.IndexFunc(recs, func(r state.Record) bool { return r.ID == m.ID }); k >= 0 {
			out = append(out, recs[k])
		}
	}
	return out
}

// uniqueIDs reports whether no two messages of list share an id.
func uniqueIDs(list []ahp.Message) bool {
	seen := map[string]bool{}
	for _, m := range list {
		if seen[m.ID] {
			return false
		}
		seen[m.ID] = true
	}
	return true
}

// matchRecordsEagerly is matchRecords as it was before the memo: every candidate unit
// fingerprinted, the effective list and the index map always made. It returns them as
// matchRecords does: nil when no rewrite applies, known nil when no record matched.
func matchRecordsEagerly(orig []ahp.Message, recs []state.Record) recordMatch {
	byID := make(map[string]*state.Record, len(recs))
	for i := range recs {
		byID[recs[i].ID] = &recs[i]
	}
	items := make([]ahp.Message, 0, len(orig))
	index := make([]int, len(orig)+1)
	known := make([]bool, len(orig))
	applied, matched := 0, 0
	for i := 0; i < len(orig); {
		if rec := byID[orig[i].ID]; rec != nil && rec.Count > 0 && rec.Count <= len(orig)-i &&
			fingerprintIs(nil, orig[i:i+rec.Count], rec.Fingerprint) {
			matched++
			if rec.Unchanged {
				for k := i; k < i+rec.Count; k++ {
					index[k], known[k] = len(items), true
					items = append(items, orig[k])
				}
			} else {
				for k := i; k < i+rec.Count; k++ {
					index[k], known[k] = len(items), true
				}
				items = append(items, cloneMessages(rec.Items)...)
				applied++
			}
			i += rec.Count
			continue
		}
		index[i] = len(items)
		items = append(items, orig[i])
		i++
	}
	index[len(orig)] = len(items)
	m := recordMatch{applied: applied, matched: matched}
	if matched > 0 {
		m.known = known
	}
	if applied > 0 {
		m.items, m.index = items, index
	}
	return m
}
