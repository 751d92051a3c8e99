package testsupport

import (
	"runtime"
	"testing"
	"time"
)

// BenchThreadCPU runs b.N iterations of a benchmark whose every iteration is prepared
// untimed (prepare returns the work to time), on one locked OS thread, and reports the
// work's own CPU as thread-cpu-ns/op: steadier than ns/op on a shared machine (garbage
// collection the work causes on other threads is not included). bytes is what an
// iteration processes (b.SetBytes).
func BenchThreadCPU(b *testing.B, bytes int64, prepare func() (run func())) {
	b.SetBytes(bytes)
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		run := prepare()
		b.StartTimer()
		cpu0 := ThreadCPU()
		run()
		cpu += ThreadCPU() - cpu0
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "thread-cpu-ns/op")
}
