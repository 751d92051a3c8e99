package proxy

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/testsupport"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
	"github.com/hookproxy/hookproxy/state"
)

// BenchmarkFingerprintAgentHistory is what re-applying settlement records costs an agent
// request of ~300 KB (testsupport.AgentHistory) whose history was settled before: the
// fingerprint of every settlement unit (each tool result, each run of user messages), as
// applyRecords computes them to match the records. Every iteration is a new request: a new
// copy of the body decoded by the real codec (not timed) and a digest memo of its own.
func BenchmarkFingerprintAgentHistory(b *testing.B) {
	body := testsupport.AgentHistory(300 << 10)
	codec := anthropic.NewMessages()
	// The records of the history, as an earlier request settled it.
	first, err := codec.DecodeRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	fps := map[int]string{}
	for u := range settlementUnits(first, -1) {
		fps[u.start] = fingerprint(nil, first.Items[u.start:u.end])
	}
	testsupport.BenchThreadCPU(b, int64(len(body)), func() func() {
		req, err := codec.DecodeRequest(append([]byte(nil), body...))
		if err != nil {
			b.Fatal(err)
		}
		units := slices.Collect(settlementUnits(req, -1))
		td := transport.NewTextDigests()
		return func() {
			for _, u := range units {
				if !fingerprintIs(td, req.Items[u.start:u.end], fps[u.start]) {
					b.Fatal("a unit's fingerprint changed")
				}
			}
		}
	})
}

// requestWith is a lifecycle of req at the request side's start, with a digest memo of
// its own.
func requestWith(req *mapping.Request) *lifecycle {
	x := &lifecycle{ctx: transport.WithTextDigests(context.Background(), transport.NewTextDigests())}
	x.req = req
	return x
}

// agentHistoryTurns160 is the size of a testsupport.AgentHistory of 160 turns (~380 KB,
// as the session benchmark's turn 160).
const agentHistoryTurns160 = 372 << 10

// BenchmarkApplyRecordsAgentHistory is what matching the settlement records costs an
// agent request of 160 turns whose history was settled before (every tool result and run
// of user messages has its record): "first" with no earlier request of the conversation
// seen by this process, "repeated" after the request before it (the same history without
// its newest turn), "repeated-cold" so with the CPU caches emptied first, as the proxy
// finds them between two requests of a conversation (its other requests ran in between). Each iteration decodes a new copy of the body with the real codec (not
// timed; a repeated body resumes the earlier decode, as the proxy's do).
func BenchmarkApplyRecordsAgentHistory(b *testing.B) {
	body := testsupport.AgentHistory(agentHistoryTurns160)
	// The request before: without the newest call and its result.
	cut := bytes.LastIndex(body, []byte(`,{"role":"assistant"`))
	last := bytes.LastIndex(body, []byte(`,{"role":"user","content":[{"type":"text"`))
	prevBody := append(append([]byte(nil), body[:cut]...), body[last:]...)
	codec := anthropic.NewMessages()
	decode := func(body []byte) *mapping.Request {
		req, err := codec.DecodeRequest(append([]byte(nil), body...))
		if err != nil {
			b.Fatal(err)
		}
		return req
	}
	first := decode(body)
	var recs []state.Record
	for u := range settlementUnits(first, -1) {
		msgs := first.Items[u.start:u.end]
		recs = append(recs, state.Record{ID: msgs[0].ID, Count: len(msgs), Fingerprint: fingerprint(nil, msgs), Unchanged: true})
	}
	b.Logf("%d items, %d records", len(first.Items), len(recs))
	for _, mode := range []string{"first", "repeated", "repeated-cold"} {
		b.Run(mode, func(b *testing.B) {
			testsupport.BenchThreadCPU(b, int64(len(body)), func() func() {
				if mode == "first" {
					resetFingerprintMemo()
				} else {
					requestWith(decode(prevBody)).applyRecords(recs)
				}
				x := requestWith(decode(body))
				if mode == "repeated-cold" {
					evictCaches()
				}
				return func() {
					x.applyRecords(recs)
					if x.rw.known == nil || !x.rw.known[len(x.rw.known)-1] {
						b.Fatal("the records did not match")
					}
				}
			})
		})
	}
}

// evictBuf is larger than any CPU cache this runs on.
var evictBuf = make([]byte, 64<<20)

// evictCaches writes a line of evictBuf every 64 bytes, pushing everything else out of
// the CPU caches.
func evictCaches() {
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}
