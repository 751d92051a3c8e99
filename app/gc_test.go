package app

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC: without GOGC the process runs at DefaultGCPercent; a GOGC the operator set
// is left as the runtime read it.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	debug.SetGCPercent(100)
	tuneGC() // GOGC set (to the runtime's default spelling): untouched
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, GC percent %d, want it untouched (100)", got)
	}
	t.Setenv("GOGC", "x") // registers the restore of the variable
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	tuneGC()
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Fatalf("without GOGC, GC percent %d, want %d", got, DefaultGCPercent)
	}
}
