package proxy

import (
	"runtime"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/testsupport"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
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
	for _, u := range settlementUnits(first, -1) {
		fps[u.start] = fingerprint(nil, first.Items[u.start:u.end])
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		req, err := codec.DecodeRequest(append([]byte(nil), body...))
		if err != nil {
			b.Fatal(err)
		}
		units := settlementUnits(req, -1)
		td := transport.NewTextDigests()
		b.StartTimer()
		cpu0 := testsupport.ThreadCPU()
		for _, u := range units {
			if !fingerprintIs(td, req.Items[u.start:u.end], fps[u.start]) {
				b.Fatal("a unit's fingerprint changed")
			}
		}
		cpu += testsupport.ThreadCPU() - cpu0
	}
	// The fingerprints' own CPU, steadier than ns/op on a shared machine.
	b.ReportMetric(float64(cpu)/float64(b.N), "thread-cpu-ns/op")
}
