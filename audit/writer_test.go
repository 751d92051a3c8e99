package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
)

// Every test must leave no writer goroutine behind: Close owns the drain goroutine.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gateWriter is an io.Writer that blocks every Write until the gate opens (or it is
// closed), so tests can hold the drain goroutine and fill the queue deterministically.
type gateWriter struct {
	entered chan struct{} // one signal per Write call that started
	gate    chan struct{}
	closed  chan struct{}

	mu        sync.Mutex
	buf       bytes.Buffer
	closeOnce sync.Once
	openOnce  sync.Once
}

func newGate() *gateWriter {
	return &gateWriter{entered: make(chan struct{}, 1024), gate: make(chan struct{}), closed: make(chan struct{})}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	select {
	case <-g.gate:
	case <-g.closed:
		return 0, os.ErrClosed
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gateWriter) Close() error { g.closeOnce.Do(func() { close(g.closed) }); return nil }
func (g *gateWriter) open()        { g.openOnce.Do(func() { close(g.gate) }) }

func (g *gateWriter) lines(t *testing.T) []map[string]any {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	return parseLines(t, g.buf.Bytes())
}

// waitEntered waits until the drain goroutine is inside a Write.
func (g *gateWriter) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("drain goroutine never wrote")
	}
}

func parseLines(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line is not JSON: %v: %s", err, sc.Bytes())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func rec(i int) Record {
	return Record{EventID: Text(fmt.Sprintf("evt_%04d", i)), EventType: "tool.before", Enforcement: enforcement.Forwarded}
}

func closeWriter(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestFileRecordsAreJSONLinesInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := NewWriter(config.Audit{Path: path}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := range n {
		if err := w.Write(context.Background(), rec(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	closeWriter(t, w)

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := parseLines(t, data)
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l["eventId"] != fmt.Sprintf("evt_%04d", i) {
			t.Fatalf("line %d has eventId %v: order not preserved", i, l["eventId"])
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("audit file mode %v, want 0600", perm)
	}

	// Append-only: a second writer adds after the existing lines.
	w, err = NewWriter(config.Audit{Path: path}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(context.Background(), rec(n)); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	data, _ = os.ReadFile(path)
	if lines := parseLines(t, data); len(lines) != n+1 || lines[n]["eventId"] != fmt.Sprintf("evt_%04d", n) {
		t.Fatalf("reopen did not append: %d lines", len(lines))
	}
}

func TestRecordFields(t *testing.T) {
	g := newGate()
	g.open()
	w := newWriter(mustNormalize(t, config.Audit{}), zap.NewNop(), g, true)
	explicit := Record{
		Time:    time.Date(2026, 9, 15, 12, 0, 4, 0, time.FixedZone("x", 3600)),
		EventID: "evt_1", EventType: "tool.before", Route: "/anthropic",
		SessionID: "sess_9b1e", TurnID: "turn_1", CallID: "toolu_01A2B3C4", Model: "claude-sonnet-4-5", Tool: "Bash",
		Interceptors: []Interceptor{
			{BackendID: "com.example.guard", Subscription: 0, LatencyMs: 12.5, Outcome: chain.OutcomeAccepted,
				Effects: []EffectType{"modify", "deny"}, FailurePolicy: "fail-closed"},
			{BackendID: "com.example.audit", Subscription: 2, Outcome: chain.OutcomeObserved},
		},
		Permission: "deny", Flow: "none",
		Denial:      &Denial{Reason: "force push is not allowed", Code: "git.force_push", BackendID: "com.example.guard"},
		Enforcement: enforcement.Refused,
	}
	synthetic := Record{
		EventID: "evt_2", EventType: "model.request.before", Route: "/openai",
		Interceptors: []Interceptor{{BackendID: "com.example.dlp", Subscription: 1, LatencyMs: 250, Outcome: chain.OutcomeFailed,
			FailureKind: "timeout", FailurePolicy: "fail-closed"}},
		Permission:  "deny",
		Denial:      &Denial{Reason: "Required policy backend unavailable.", Code: "hookproxy.fail_closed", BackendID: "com.example.dlp", Synthetic: true},
		Enforcement: enforcement.Refused,
	}
	for _, r := range []Record{explicit, synthetic} {
		if err := w.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	closeWriter(t, w)
	lines := g.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	l := lines[0]
	for k, want := range map[string]any{
		"time": "2026-09-15T11:00:04Z", "eventId": "evt_1", "eventType": "tool.before", "route": "/anthropic",
		"sessionId": "sess_9b1e", "turnId": "turn_1", "callId": "toolu_01A2B3C4", "model": "claude-sonnet-4-5",
		"tool": "Bash", "permission": "deny", "flow": "none", "enforcement": "refused",
	} {
		if l[k] != want {
			t.Errorf("%s = %v, want %v", k, l[k], want)
		}
	}
	ics := l["interceptors"].([]any)
	first := ics[0].(map[string]any)
	for k, want := range map[string]any{
		"backendId": "com.example.guard", "subscription": 0.0, "latencyMs": 12.5, "outcome": "accepted", "failurePolicy": "fail-closed",
	} {
		if first[k] != want {
			t.Errorf("interceptors[0].%s = %v, want %v", k, first[k], want)
		}
	}
	if fmt.Sprint(first["effects"]) != "[modify deny]" {
		t.Errorf("effects %v", first["effects"])
	}
	if second := ics[1].(map[string]any); fmt.Sprint(second["effects"]) != "[]" || second["outcome"] != "observed" {
		t.Errorf("interceptors[1] = %v; effects must be an array even when empty", second)
	}
	// AHP-FAIL-001: explicit and synthetic denials are distinguishable.
	d0 := l["denial"].(map[string]any)
	d1 := lines[1]["denial"].(map[string]any)
	if d0["synthetic"] != false || d0["code"] != "git.force_push" || d0["reason"] != "force push is not allowed" || d0["backendId"] != "com.example.guard" {
		t.Errorf("explicit denial %v", d0)
	}
	if d1["synthetic"] != true || d1["code"] != "hookproxy.fail_closed" || d1["backendId"] != "com.example.dlp" {
		t.Errorf("synthetic denial %v", d1)
	}
	if f := lines[1]["interceptors"].([]any)[0].(map[string]any); f["failureKind"] != "timeout" || f["outcome"] != "failed" {
		t.Errorf("failed interceptor %v", f)
	}
	if _, ok := lines[1]["time"].(string); !ok {
		t.Error("zero Time was not stamped")
	}
}

func mustNormalize(t *testing.T, cfg config.Audit) config.Audit {
	t.Helper()
	cfg, err := normalize(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

func droppedLogged(logs *observer.ObservedLogs) uint64 {
	var n uint64
	for _, e := range logs.FilterMessage("audit records dropped").All() {
		n += uint64(e.ContextMap()["dropped"].(uint64))
	}
	return n
}

func TestDropModeCountsDrops(t *testing.T) {
	g := newGate()
	logger, logs := observed()
	w := newWriter(mustNormalize(t, config.Audit{OnFull: config.AuditOnDrop, QueueSize: 2}), logger, g, true)

	if err := w.Write(context.Background(), rec(0)); err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t) // the drain goroutine holds record 0 and is blocked
	for i := 1; i <= 2; i++ {
		if err := w.Write(context.Background(), rec(i)); err != nil {
			t.Fatalf("write %d into a free queue: %v", i, err)
		}
	}
	if d := w.QueueDepth(); d != 2 {
		t.Fatalf("queue depth %d, want 2", d)
	}
	for i := 3; i <= 5; i++ {
		start := time.Now()
		err := w.Write(context.Background(), rec(i))
		if !errors.Is(err, ErrQueueFull) {
			t.Fatalf("write %d to a full queue: %v, want ErrQueueFull", i, err)
		}
		if time.Since(start) > 500*time.Millisecond {
			t.Fatal("drop mode waited")
		}
	}
	if got := w.Dropped(); got != 3 {
		t.Fatalf("Dropped() = %d, want 3", got)
	}
	if logs.FilterMessage("audit records dropped").Len() == 0 {
		t.Fatal("drops were not logged")
	}

	g.open()
	closeWriter(t, w)
	lines := g.lines(t)
	if len(lines) != 3 || lines[0]["eventId"] != "evt_0000" || lines[2]["eventId"] != "evt_0002" {
		t.Fatalf("written %v", lines)
	}
	// Rate-limited logging still accounts for every drop by Close.
	if n := droppedLogged(logs); n != 3 {
		t.Fatalf("logs report %d drops, want 3", n)
	}
}

// fullQueueWriter starts a wait-mode writer of one queue slot whose output is blocked,
// and fills the queue: the next Write waits until the gate opens or the wait ends.
func fullQueueWriter(t *testing.T, cfg config.Audit) (*Writer, *gateWriter) {
	t.Helper()
	g := newGate()
	cfg.QueueSize = 1
	w := newWriter(mustNormalize(t, cfg), zap.NewNop(), g, true)
	t.Cleanup(func() { g.open(); closeWriter(t, w) })
	if err := w.Write(context.Background(), rec(0)); err != nil {
		t.Fatal(err)
	}
	g.waitEntered(t)
	if err := w.Write(context.Background(), rec(1)); err != nil { // fills the queue
		t.Fatal(err)
	}
	return w, g
}

// TestWaitModeDefaultIsTheDocumented100ms: a writer built without a waitTimeout (code
// that does not go through config.Load) waits the documented audit.waitTimeout default
// (docs/configuration.md: 100ms), not a second default of its own: a full queue costs a request 100ms.
func TestWaitModeDefaultIsTheDocumented100ms(t *testing.T) {
	w, _ := fullQueueWriter(t, config.Audit{})
	start := time.Now()
	err := w.Write(context.Background(), rec(2))
	waited := time.Since(start)
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err %v, want ErrQueueFull", err)
	}
	if waited < 100*time.Millisecond || waited >= 900*time.Millisecond {
		t.Fatalf("dropped after %v, want the documented 100ms wait", waited)
	}
}

func TestWaitModeWaitsThenDrops(t *testing.T) {
	w, g := fullQueueWriter(t, config.Audit{WaitTimeout: 150 * time.Millisecond})

	start := time.Now()
	err := w.Write(context.Background(), rec(2))
	waited := time.Since(start)
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err %v, want ErrQueueFull", err)
	}
	if waited < 150*time.Millisecond {
		t.Fatalf("dropped after %v, before WaitTimeout", waited)
	}
	if w.Dropped() != 1 {
		t.Fatalf("Dropped() = %d, want 1", w.Dropped())
	}

	// The caller's context ends the wait early.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := w.Write(ctx, rec(3)); !errors.Is(err, ErrQueueFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if time.Since(start) > 140*time.Millisecond {
		t.Fatal("wait ignored the caller's context")
	}
	if w.Dropped() != 2 {
		t.Fatalf("Dropped() = %d, want 2", w.Dropped())
	}

	// Room that appears during the wait is used: no drop.
	done := make(chan error, 1)
	go func() { done <- w.Write(context.Background(), rec(4)) }()
	time.Sleep(30 * time.Millisecond)
	g.open()
	if err := <-done; err != nil {
		t.Fatalf("write during wait: %v", err)
	}
	if w.Dropped() != 2 {
		t.Fatalf("Dropped() = %d, want 2", w.Dropped())
	}
}

func TestCloseFlushesQueued(t *testing.T) {
	g := newGate()
	w := newWriter(mustNormalize(t, config.Audit{QueueSize: 100}), zap.NewNop(), g, true)
	for i := range 50 {
		if err := w.Write(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	g.waitEntered(t)
	// Release the writer only after Close has started: Close must wait for the queue.
	go func() { time.Sleep(50 * time.Millisecond); g.open() }()
	closeWriter(t, w)
	if lines := g.lines(t); len(lines) != 50 || lines[49]["eventId"] != "evt_0049" {
		t.Fatalf("%d lines after Close, want 50", len(lines))
	}
	if err := w.Write(context.Background(), rec(50)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
	if w.Dropped() != 1 {
		t.Fatalf("write after close not counted: %d", w.Dropped())
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseDeadlineCountsLossAndStops(t *testing.T) {
	g := newGate() // never opened: the output is stuck
	logger, logs := observed()
	w := newWriter(mustNormalize(t, config.Audit{QueueSize: 10}), logger, g, true)
	for i := range 5 {
		if err := w.Write(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	g.waitEntered(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := w.Close(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close on a stuck output: %v", err)
	}
	// The batch in flight (record 0, or more) failed on close and the rest was discarded:
	// all five are accounted for, and the drain goroutine is gone (goleak checks at exit).
	if w.Dropped() != 5 {
		t.Fatalf("Dropped() = %d, want 5", w.Dropped())
	}
	if n := droppedLogged(logs); n != 5 {
		t.Fatalf("logs report %d drops, want 5", n)
	}
}

func TestConcurrentWritersNothingSilent(t *testing.T) {
	g := newGate()
	g.open()
	w := newWriter(mustNormalize(t, config.Audit{QueueSize: 8, OnFull: config.AuditOnDrop}), zap.NewNop(), g, true)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				_ = w.Write(context.Background(), rec(i*each+j))
			}
		}()
	}
	// Close races with the writers on purpose.
	time.Sleep(time.Millisecond)
	closeWriter(t, w)
	wg.Wait()
	written := uint64(len(g.lines(t)))
	if written+w.Dropped() != writers*each {
		t.Fatalf("written %d + dropped %d != %d attempted", written, w.Dropped(), writers*each)
	}
}

func TestDisabledAndNilWriters(t *testing.T) {
	w, err := NewWriter(config.Audit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.Enabled() {
		t.Fatal("empty path must disable the audit log")
	}
	if err := w.Write(context.Background(), rec(0)); err != nil {
		t.Fatal(err)
	}
	if w.Dropped() != 0 || w.QueueDepth() != 0 {
		t.Fatal("disabled writer counts")
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nilW *Writer
	if err := nilW.Write(context.Background(), rec(0)); err != nil || nilW.Dropped() != 0 || nilW.Close(context.Background()) != nil {
		t.Fatal("nil writer is not a no-op")
	}
}

func TestStdout(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = pw
	w, err := NewWriter(config.Audit{Path: "-"}, nil)
	os.Stdout = old
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(context.Background(), rec(7)); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	pw.Close() // the writer must not have closed stdout itself; closing here ends the read
	out := new(bytes.Buffer)
	if _, err := out.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if lines := parseLines(t, out.Bytes()); len(lines) != 1 || lines[0]["eventId"] != "evt_0007" {
		t.Fatalf("stdout got %q", out.String())
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		desc string
		cfg  config.Audit
	}{
		{"unknown onFull", config.Audit{Path: "-", OnFull: "block"}},
		{"negative queue", config.Audit{Path: "-", QueueSize: -1}},
		{"negative wait", config.Audit{Path: "-", WaitTimeout: -time.Second}},
		{"missing directory", config.Audit{Path: filepath.Join(t.TempDir(), "no", "such", "dir", "audit.jsonl")}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if w, err := NewWriter(tc.cfg, nil); err == nil {
				_ = w.Close(context.Background())
				t.Fatal("accepted")
			}
		})
	}
}

func TestContentOnlyWhenConfigured(t *testing.T) {
	for _, include := range []bool{false, true} {
		g := newGate()
		g.open()
		w := newWriter(mustNormalize(t, config.Audit{IncludeContent: include}), zap.NewNop(), g, true)
		r := rec(0)
		r.Content = &Content{ToolInput: json.RawMessage(`{"command":"ls"}`)}
		if err := w.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		_, has := g.lines(t)[0]["content"]
		if has != include {
			t.Fatalf("IncludeContent=%v: content present %v", include, has)
		}
	}
}

func TestLineIsOneLine(t *testing.T) {
	// Newlines in any field are escaped by JSON; one record stays one line.
	g := newGate()
	g.open()
	w := newWriter(mustNormalize(t, config.Audit{}), zap.NewNop(), g, true)
	r := rec(0)
	r.Route = "/a\n{\"forged\":true}"
	if err := w.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	g.mu.Lock()
	n := strings.Count(g.buf.String(), "\n")
	g.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d newlines for one record", n)
	}
}
