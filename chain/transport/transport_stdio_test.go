package transport

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/hookproxy/hookproxy/chain/registration"
)

const stdioTestDeadline = 5 * time.Second

func intercept(t *testing.T, tr Transport, id string, d time.Duration) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return tr.Intercept(ctx, id, testParams(id))
}

func TestStdioPersistentManyCallsOneProcess(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "echo"), Options{})
	st := tr.(*stdioTransport)
	if st.proc != nil {
		t.Fatal("New started the process; it starts lazily")
	}
	if err := tr.(Readier).Ready(); err != nil {
		t.Fatalf("Ready() = %v", err)
	}
	pid := st.proc.pid
	for i := 1; i <= 25; i++ {
		id := fmt.Sprintf("evt_%d", i)
		frame, err := intercept(t, tr, id, stdioTestDeadline)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		ext := replyExt(t, frame, id)
		if got := extInt(t, ext, "test.pid"); got != pid {
			t.Fatalf("call %d answered by pid %d, want the one process %d", i, got, pid)
		}
		if n := extInt(t, ext, "test.n"); n != i {
			t.Fatalf("backend saw %d requests, want %d", n, i)
		}
	}
	if err := tr.(Readier).Ready(); err != nil || st.proc.pid != pid {
		t.Fatalf("Ready() = %v and replaced a running process", err)
	}

	// Notifications go down the same pipe, in order, without waiting for anything.
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), stdioTestDeadline)
		err := tr.Observe(ctx, testObserveParams(fmt.Sprintf("obs_%d", i)))
		cancel()
		if err != nil {
			t.Fatalf("Observe: %v", err)
		}
	}
	frame, err := intercept(t, tr, "evt_after_observe", stdioTestDeadline)
	if err != nil {
		t.Fatal(err)
	}
	if n := extInt(t, replyExt(t, frame, "evt_after_observe"), "test.observed"); n != 3 {
		t.Fatalf("backend saw %d notifications, want 3", n)
	}
}

func TestStdioPersistentConcurrentCallsAreSerialized(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "echo"), Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("evt_c%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), stdioTestDeadline)
			defer cancel()
			frame, err := tr.Intercept(ctx, id, testParams(id))
			if err == nil && !replyIDMatches(frame, id) {
				err = fmt.Errorf("call %s got a reply for another id", id)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestStdioPersistentStaleFramesDropped(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "stale-first"), Options{})
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("evt_live_%d", i)
		frame, err := intercept(t, tr, id, stdioTestDeadline)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if ext := replyExt(t, frame, id); ext["test.stale"] != nil {
			t.Fatalf("a stale frame was taken as the live reply: %s", frame)
		}
	}
}

func TestStdioPersistentCrashFailsInFlightAndRecovers(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "crash-after", "2"), Options{})
	var firstPid int
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("evt_%d", i)
		frame, err := intercept(t, tr, id, stdioTestDeadline)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		firstPid = extInt(t, replyExt(t, frame, id), "test.pid")
	}
	_, err := intercept(t, tr, "evt_3", stdioTestDeadline)
	wantKind(t, err, KindProcess)
	if !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("error %q does not report the exit status", err)
	}
	st := tr.(*stdioTransport)
	st.mu.Lock()
	crashed := st.proc
	st.mu.Unlock()
	if crashed.alive() {
		t.Error("the crashed process is still considered running")
	}

	frame, err := intercept(t, tr, "evt_4", stdioTestDeadline)
	if err != nil {
		t.Fatalf("call after crash: %v", err)
	}
	ext := replyExt(t, frame, "evt_4")
	if pid := extInt(t, ext, "test.pid"); pid == firstPid {
		t.Fatalf("call after crash answered by the crashed pid %d", pid)
	}
	if n := extInt(t, ext, "test.n"); n != 1 {
		t.Fatalf("restarted process saw %d requests, want 1", n)
	}
}

func TestStdioPersistentTimeoutKillsAndNextCallWorks(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "slow"), Options{})
	st := tr.(*stdioTransport)
	// Start the process first: what is timed is the call's deadline, not the fork and exec
	// of the backend, which on a loaded machine (or under -race) can take longer than the
	// bound on its own.
	if err := tr.(Readier).Ready(); err != nil {
		t.Fatalf("Ready() = %v", err)
	}

	start := time.Now()
	_, err := intercept(t, tr, "evt_slow_1", 100*time.Millisecond)
	wantKind(t, err, KindTimeout)
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("timed-out call returned after %v", el)
	}
	st.mu.Lock()
	old := st.proc
	st.mu.Unlock()
	select {
	case <-old.exited:
	case <-time.After(stdioTestDeadline):
		t.Fatal("the abandoned process was not killed")
	}

	// Wait past the moment the abandoned reply would have arrived: it must never answer
	// the next call.
	time.Sleep(350 * time.Millisecond)
	frame, err := intercept(t, tr, "evt_fast_2", stdioTestDeadline)
	if err != nil {
		t.Fatalf("call after timeout: %v", err)
	}
	ext := replyExt(t, frame, "evt_fast_2")
	if pid := extInt(t, ext, "test.pid"); pid == old.pid {
		t.Fatal("call after timeout was answered by the abandoned process")
	}
}

func TestStdioPersistentCancellation(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "sleep-forever"), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := tr.Intercept(ctx, "evt_c", testParams("evt_c"))
	wantKind(t, err, KindCancelled)
}

func TestStdioMalformedAndOversizedReplies(t *testing.T) {
	for _, tc := range []struct {
		desc, lifecycle, mode string
		args                  []string
		want                  Kind
	}{
		{"persistent garbage line", registration.LifecyclePersistent, "garbage", nil, KindMalformed},
		{"per_event garbage line", registration.LifecyclePerEvent, "garbage", nil, KindMalformed},
		{"persistent oversized line", registration.LifecyclePersistent, "huge", []string{"4096"}, KindOversized},
		{"per_event oversized line", registration.LifecyclePerEvent, "huge", []string{"4096"}, KindOversized},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tr := mustNew(t, stdioBackend(tc.lifecycle, tc.mode, tc.args...), Options{MaxReplyBytes: 1024})
			_, err := intercept(t, tr, "evt_bad", stdioTestDeadline)
			wantKind(t, err, tc.want)
		})
	}
}

func TestStdioPersistentRecoversAfterMalformedReply(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "garbage"), Options{})
	_, err := intercept(t, tr, "evt_bad_1", stdioTestDeadline)
	wantKind(t, err, KindMalformed)
	for i := 2; i < 4; i++ {
		id := fmt.Sprintf("evt_ok_%d", i)
		frame, err := intercept(t, tr, id, stdioTestDeadline)
		if err != nil {
			t.Fatalf("call after a malformed reply: %v", err)
		}
		replyExt(t, frame, id)
	}
}

func TestStdioPerEvent(t *testing.T) {
	for _, tc := range []struct {
		desc, mode string
		want       Kind // "" for success
	}{
		{"one line, exit 0", "echo", ""},
		{"non-zero exit after a reply", "exit-nonzero", KindProcess},
		{"exit without a reply", "no-reply", KindProcess},
		{"two lines", "multi-line", KindMalformed},
		{"reply without newline", "unterminated", KindMalformed},
		{"never answers", "sleep-forever", KindTimeout},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tr := mustNew(t, stdioBackend(registration.LifecyclePerEvent, tc.mode), Options{})
			deadline := stdioTestDeadline
			if tc.want == KindTimeout {
				deadline = 500 * time.Millisecond
			}
			start := time.Now()
			frame, err := intercept(t, tr, "evt_pe", deadline)
			if el := time.Since(start); el > 5*deadline+time.Second {
				t.Fatalf("call took %v", el)
			}
			if tc.want != "" {
				wantKind(t, err, tc.want)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				replyExt(t, frame, "evt_pe")
			}
			// Every per_event process is reaped before Intercept returns.
			st := tr.(*stdioTransport)
			st.mu.Lock()
			defer st.mu.Unlock()
			for p := range st.live {
				select {
				case <-p.exited:
				default:
					t.Fatalf("per_event process %d not reaped when the call returned", p.pid)
				}
			}
		})
	}
}

func TestStdioPerEventOneProcessPerMessage(t *testing.T) {
	tr := mustNew(t, stdioBackend(registration.LifecyclePerEvent, "echo"), Options{})
	pids := map[int]bool{}
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("evt_%d", i)
		frame, err := intercept(t, tr, id, stdioTestDeadline)
		if err != nil {
			t.Fatal(err)
		}
		pids[extInt(t, replyExt(t, frame, id), "test.pid")] = true
	}
	if len(pids) != 3 {
		t.Fatalf("3 messages were answered by %d processes, want 3", len(pids))
	}
}

func TestStdioStderrFloodDoesNotBlock(t *testing.T) {
	for _, lifecycle := range []string{registration.LifecyclePersistent, registration.LifecyclePerEvent} {
		t.Run(lifecycle, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			tr := mustNew(t, stdioBackend(lifecycle, "stderr-spam"), Options{Logger: zap.New(core)})
			for i := 0; i < 2; i++ {
				id := fmt.Sprintf("evt_%d", i)
				if _, err := intercept(t, tr, id, stdioTestDeadline); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			tr.Close() // every stderr line drained and logged
			lines := logs.FilterMessage("backend stderr").All()
			if len(lines) < 800 {
				t.Fatalf("logged %d stderr lines, want at least 800", len(lines))
			}
			truncated := 0
			for _, e := range lines {
				if l := len(e.ContextMap()["line"].(string)); l > stderrLineMax {
					t.Fatalf("logged a %d-byte stderr line, cap is %d", l, stderrLineMax)
				}
				if e.ContextMap()["truncated"] == true {
					truncated++
				}
			}
			if truncated == 0 {
				t.Fatal("the 100 KiB stderr line was not reported as truncated")
			}
		})
	}
}

func TestStdioMinimalEnvironment(t *testing.T) {
	t.Setenv("HOOKPROXY_TEST_SECRET", "do-not-leak")
	tr := mustNew(t, stdioBackend(registration.LifecyclePersistent, "env"), Options{})
	frame, err := intercept(t, tr, "evt_env", stdioTestDeadline)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := json.Unmarshal(replyExt(t, frame, "evt_env")["test.env"], &names); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n != "PATH" && n != "HOME" {
			t.Fatalf("backend environment holds %s; want only PATH and HOME (got %v)", n, names)
		}
	}
}

func TestStdioPerEventObserveUsesCwdAndIsReaped(t *testing.T) {
	dir := t.TempDir()
	b := stdioBackend(registration.LifecyclePerEvent, "record", "observed.jsonl")
	b.Transport.Cwd = dir
	tr := mustNew(t, b, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), stdioTestDeadline)
	err := tr.Observe(ctx, testObserveParams("obs_1"))
	cancel() // the notification process keeps its deadline, not this cancellation
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "observed.jsonl")
	var got []byte
	for end := time.Now().Add(stdioTestDeadline); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if got, _ = os.ReadFile(path); len(got) > 0 {
			break
		}
	}
	var note struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Event struct {
				ID string `json:"id"`
			} `json:"event"`
		} `json:"params"`
	}
	if err := json.Unmarshal(got, &note); err != nil {
		t.Fatalf("recorded notification %q: %v", got, err)
	}
	if note.Method != "hooks/observe" || note.ID != nil || note.Params.Event.ID != "obs_1" {
		t.Fatalf("recorded notification = %s", got)
	}
	st := tr.(*stdioTransport)
	for end := time.Now().Add(stdioTestDeadline); ; time.Sleep(10 * time.Millisecond) {
		st.mu.Lock()
		n := len(st.live)
		st.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the notification process was not reaped")
		}
	}
}

func TestStdioCloseStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t)

	persistent, err := New(stdioBackend(registration.LifecyclePersistent, "sleep-forever"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	perEvent, err := New(stdioBackend(registration.LifecyclePerEvent, "sleep-forever"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A persistent process that ignores stdin EOF, and lingering notification processes
	// whose deadline is far away: their deliveries wait for them to exit (no detached
	// observer delivery), so they are still in flight when Close comes.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := persistent.Observe(ctx, testObserveParams("obs_p")); err != nil {
		t.Fatal(err)
	}
	observing := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { observing <- perEvent.Observe(ctx, testObserveParams(fmt.Sprintf("obs_%d", i))) }()
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := perEvent.Intercept(ctx, "evt_inflight", testParams("evt_inflight"))
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	if err := persistent.Close(); err != nil {
		t.Fatal(err)
	}
	if err := perEvent.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Close took %v", el)
	}
	wantKind(t, <-inFlight, KindProcess)
	for i := 0; i < 3; i++ {
		select {
		case <-observing: // the killed process is reaped: the delivery has ended
		case <-time.After(3 * time.Second):
			t.Fatal("a notification delivery outlived Close")
		}
	}

	if _, err := persistent.Intercept(ctx, "evt_after", testParams("evt_after")); err == nil {
		t.Fatal("Intercept after Close succeeded")
	}
	if persistent.(Readier).Ready() == nil {
		t.Fatal("Ready() = nil after Close")
	}
}

func TestStdioBackendLeavingAHelperBehind(t *testing.T) {
	for _, lifecycle := range []string{registration.LifecyclePersistent, registration.LifecyclePerEvent} {
		t.Run(lifecycle, func(t *testing.T) {
			tr := mustNew(t, stdioBackend(lifecycle, "orphan"), Options{})
			for i := 0; i < 2; i++ {
				start := time.Now()
				_, err := intercept(t, tr, fmt.Sprintf("evt_%d", i), stdioTestDeadline)
				wantKind(t, err, KindProcess) // not a timeout: the helper must not hold the call
				if !strings.Contains(err.Error(), "exit status 4") {
					t.Errorf("error %q does not report the exit status", err)
				}
				if el := time.Since(start); el > stdioTestDeadline/2 {
					t.Fatalf("call took %v", el)
				}
			}
			start := time.Now()
			tr.Close()
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("Close took %v", el)
			}
		})
	}
}

func TestStdioLaunchFailure(t *testing.T) {
	for _, lifecycle := range []string{registration.LifecyclePersistent, registration.LifecyclePerEvent} {
		t.Run(lifecycle, func(t *testing.T) {
			b := stdioBackend(lifecycle, "echo")
			b.Transport.Command = filepath.Join(t.TempDir(), "does-not-exist")
			tr := mustNew(t, b, Options{})
			_, err := intercept(t, tr, "evt_1", stdioTestDeadline)
			wantKind(t, err, KindProcess)
			if lifecycle == registration.LifecyclePersistent && tr.(Readier).Ready() == nil {
				t.Fatal("Ready() = nil for a backend that cannot start")
			}
		})
	}
}

func TestStdioReadLine(t *testing.T) {
	for _, tc := range []struct {
		desc, in string
		max      int64
		want     []string
		tooLong  bool
	}{
		{"lines within the limit", "ab\ncd\n", 2, []string{"ab", "cd"}, false},
		{"line over the limit", "abc\n", 2, nil, true},
		{"line longer than the read buffer", strings.Repeat("x", 40) + "\n", 40, []string{strings.Repeat("x", 40)}, false},
		{"line over the limit across buffer fills", strings.Repeat("x", 41) + "\n", 40, nil, true},
		{"empty line", "\n", 2, []string{""}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			br := bufioReader(tc.in)
			for _, w := range tc.want {
				got, err := readLine(br, tc.max)
				if err != nil || string(got) != w {
					t.Fatalf("readLine = %q, %v; want %q", got, err, w)
				}
			}
			if tc.tooLong {
				if _, err := readLine(br, tc.max); err != errLineTooLong {
					t.Fatalf("err = %v, want errLineTooLong", err)
				}
			}
		})
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 16) }

// TestStdioPerEventObserveOwnsItsProcess: a per_event notification's delivery ends when
// its process has exited, so no observer work outlives the hook call (seed, Observers); a
// process that lingers past the delivery's deadline is killed, reaped and reported.
func TestStdioPerEventObserveOwnsItsProcess(t *testing.T) {
	defer goleak.VerifyNone(t)
	tr := mustNew(t, stdioBackend(registration.LifecyclePerEvent, "sleep-forever"), Options{})
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := tr.Observe(ctx, testObserveParams("obs_linger"))
	wantKind(t, err, KindTimeout)
	if el := time.Since(start); el < 250*time.Millisecond || el > 3*time.Second {
		t.Errorf("Observe returned after %v, want at its deadline", el)
	}
}

// TestStdioLifetimeMarksOnlyWhatItKilled: whether a per_event observer timed out is decided
// by who ended its process, not by which of its exit and its context a select sees first
// (both fire at the deadline): a process the lifetime timer killed is marked expired, and a
// process that exited on its own stays unmarked even when the timer fires right after.
// observePerEvent reports a marked process as a timeout on either branch.
func TestStdioLifetimeMarksOnlyWhatItKilled(t *testing.T) {
	defer goleak.VerifyNone(t)
	spawn := func(mode string) *stdioProc {
		tr := mustNew(t, stdioBackend(registration.LifecyclePerEvent, mode), Options{}).(*stdioTransport)
		tr.mu.Lock()
		p, err := tr.spawnLocked(false, nil)
		tr.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		p.stdin.Close()
		return p
	}
	lingering := spawn("sleep-forever")
	lingering.limitLifetime(10 * time.Millisecond)
	<-lingering.exited
	if !lingering.expiredByLifetime() {
		t.Error("a process the lifetime timer killed is not marked expired")
	}
	prompt := spawn("echo") // reads to EOF and exits
	prompt.limitLifetime(time.Hour)
	<-prompt.exited
	prompt.expire() // the timer firing just after the exit
	if prompt.expiredByLifetime() {
		t.Error("a process that exited on its own is marked expired")
	}
}
