package capture

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func testLine(i int, text string) *Line {
	ev, _ := json.Marshal(&ahp.Event{ID: fmt.Sprintf("e%d", i), Type: ahp.EventToolBefore, Source: "urn:t", Time: "2026-01-01T00:00:00Z",
		Tool: &ahp.Tool{Name: "Bash", Input: json.RawMessage(fmt.Sprintf(`{"command":%q}`, text))}})
	return &Line{Time: time.Now(), Boundary: ahp.EventToolBefore, EventID: fmt.Sprintf("e%d", i), Event: ev,
		Capabilities: json.RawMessage(`{"effects":[]}`), Live: Decision{Outcome: "forwarded", Effects: []string{}}}
}

// TestRotationUnderLoadRespectsMaxBytes: a line larger than the bound, then eight
// goroutines writing 4000 lines, into a writer bounded at 4 KiB per file. Every file
// stays within maxBytes except the one holding the oversized line, which holds it alone
// and whole; every line handed over is either on disk, intact, or counted as lost; and
// Write never blocks (a full queue drops).
func TestRotationUnderLoadRespectsMaxBytes(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 4096
	w, err := NewWriter(Options{Dir: dir, MaxBytes: maxBytes, QueueSize: 256, Redact: true})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3*maxBytes)
	w.Write(testLine(-1, "echo first"))
	w.Write(testLine(-2, big))
	for w.Written.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				n := g*1000 + i
				w.Write(testLine(n, fmt.Sprintf("echo line %d", n)))
			}
		}()
	}
	wg.Wait()
	w.Close()

	files, err := Files(dir)
	if err != nil || len(files) < 10 {
		t.Fatalf("want many rotated files, got %d (%v)", len(files), err)
	}
	oversized := 0
	for _, f := range files {
		fi, _ := os.Stat(f)
		if fi.Size() > maxBytes {
			b, _ := os.ReadFile(f)
			if strings.Count(string(b), "\n") != 1 || !strings.Contains(string(b), big) {
				t.Errorf("%s: %d bytes, over maxBytes, and not the oversized line alone", f, fi.Size())
			}
			oversized++
		}
	}
	read := 0
	if err := Read(dir, func(l *Line) error { read++; return nil }); err != nil {
		t.Fatal(err)
	}
	if uint64(read) != w.Written.Load() || w.Written.Load()+w.Failed() != 4002 {
		t.Fatalf("read %d lines, written %d, lost %d: want read = written and written + lost = 4002", read, w.Written.Load(), w.Failed())
	}
	if w.Written.Load() < 256 {
		t.Fatalf("only %d lines written", w.Written.Load())
	}
	if oversized != 1 {
		t.Fatalf("%d files over maxBytes, want exactly the oversized line's", oversized)
	}
	t.Logf("%d files, %d lines written, %d lost to a full queue", len(files), w.Written.Load(), w.Failed())
}

// TestRotationByAge: a file older than maxAge is closed before the next line.
func TestRotationByAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	w, err := NewWriter(Options{Dir: dir, MaxAge: time.Hour, now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		w.Write(testLine(i, "ls"))
		// Wait for the line to be written before moving the clock.
		for w.Written.Load() < uint64(i+1) {
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		now = now.Add(40 * time.Minute)
		mu.Unlock()
	}
	w.Close()
	files, _ := Files(dir)
	if len(files) != 3 {
		t.Fatalf("6 lines 40 minutes apart with maxAge 1h: want 3 files, got %d", len(files))
	}
}

// TestWriteFailureCountedAndLoggedOnce: when the directory stops being writable, every
// lost line is counted, one warning is logged, and Write still returns at once.
func TestWriteFailureCountedAndLoggedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "capture")
	core, logs := observer.New(zap.WarnLevel)
	var reasons []string
	var mu sync.Mutex
	w, err := NewWriter(Options{Dir: dir, MaxBytes: 1, Logger: zap.New(core),
		OnFailure: func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	// Control: the directory works.
	w.Write(testLine(0, "ls"))
	for w.Written.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	// MaxBytes 1 makes every line open a new file; a file where the directory was makes
	// that fail.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		w.Write(testLine(i, "ls"))
	}
	w.Close()
	if w.Failed() != 5 || len(reasons) != 5 || reasons[0] != "write" {
		t.Fatalf("lost %d, reasons %v: want 5 write failures", w.Failed(), reasons)
	}
	if n := logs.FilterMessageSnippet("capture: a line was lost").Len(); n != 1 {
		t.Fatalf("%d warnings, want exactly 1", n)
	}
}

// TestSampleBySession: sampling keeps or drops whole sessions, the same way every time, in
// about the configured fraction; sample 1 keeps everything.
func TestSampleBySession(t *testing.T) {
	half, err := NewWriter(Options{Dir: t.TempDir(), Sample: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	all, err := NewWriter(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	kept := 0
	for i := range 2000 {
		s := fmt.Sprintf("ses_%d", i)
		k := half.Sampled(s)
		if k != half.Sampled(s) {
			t.Fatalf("session %s sampled both ways", s)
		}
		if k {
			kept++
		}
		if !all.Sampled(s) {
			t.Fatalf("sample 1 dropped session %s", s)
		}
	}
	if kept < 850 || kept > 1150 {
		t.Fatalf("sample 0.5 kept %d of 2000 sessions", kept)
	}
}
