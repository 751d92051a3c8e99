package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// stdio binding (AHP-STDIO-001): one UTF-8 JSON-RPC object per line on the backend's stdin
// and stdout; stderr is diagnostics only.
const (
	// stdioMaxPerEvent caps concurrent per_event processes of one backend (the Go SDK's
	// cap), so a burst of events cannot fork without bound.
	stdioMaxPerEvent = 64
	// stdioExitGrace is how long, after a process exited, its output may still be drained
	// before our pipe ends are closed (a descendant may hold them open forever).
	stdioExitGrace = 200 * time.Millisecond
	// stdioCloseGrace is how long Close lets a persistent backend exit after stdin EOF
	// before it is killed.
	stdioCloseGrace = 300 * time.Millisecond
	// stdioObserveLifetime bounds a per_event notification process when the caller's
	// context has no deadline (the Go SDK reaps a lingering one after 30 s).
	stdioObserveLifetime = 30 * time.Second
	// stdioExitDetailWait is how long a failed call waits for the exit status that
	// explains it.
	stdioExitDetailWait = 100 * time.Millisecond
	// stderrLineMax bounds one logged stderr line; the rest of the line is discarded.
	stderrLineMax   = 2048
	stdioReadBuffer = 64 << 10
)

var errLineTooLong = errors.New("line exceeds the limit")

// stdioTransport runs a backend as a child process.
//
// persistent: one process, started on first use and restarted on the next use after it
// died or was abandoned; at most one intercept in flight; replies routed by JSON-RPC id.
// per_event: one process per message, reaped before Intercept returns.
type stdioTransport struct {
	command    string
	args       []string
	cwd        string
	persistent bool
	maxLine    int64
	log        *zap.Logger

	callSlot chan struct{} // persistent: the single outstanding intercept
	slots    chan struct{} // per_event: live process cap

	mu     sync.Mutex
	closed bool
	proc   *stdioProc              // persistent process, nil until first use
	live   map[*stdioProc]struct{} // every process not yet reaped
	wg     sync.WaitGroup          // every goroutine started for this transport
}

var (
	_ Transport = (*stdioTransport)(nil)
	_ Readier   = (*stdioTransport)(nil)
)

func newStdio(b registration.Backend, opts Options, log *zap.Logger) (*stdioTransport, error) {
	tr := b.Transport
	if tr.Command == "" {
		return nil, fmt.Errorf("backend %s: stdio transport has no command", b.ID)
	}
	t := &stdioTransport{
		command:  tr.Command,
		args:     append([]string(nil), tr.Args...),
		cwd:      tr.Cwd,
		maxLine:  opts.MaxReplyBytes,
		log:      log,
		callSlot: make(chan struct{}, 1),
		slots:    make(chan struct{}, stdioMaxPerEvent),
		live:     make(map[*stdioProc]struct{}),
	}
	switch tr.Lifecycle {
	case registration.LifecyclePersistent:
		t.persistent = true
	case registration.LifecyclePerEvent:
	default:
		return nil, fmt.Errorf("backend %s: stdio lifecycle must be %q or %q", b.ID, registration.LifecyclePersistent, registration.LifecyclePerEvent)
	}
	return t, nil
}

// Intercept sends hooks/intercept and returns the reply line (without its newline).
func (t *stdioTransport) Intercept(ctx context.Context, id string, params *ahp.InterceptParams) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, ctxFailure(ctx, "before sending")
	}
	frame, err := interceptFrame(id, params)
	if err != nil {
		return nil, err
	}
	line, err := stdioLine(frame)
	if err != nil {
		return nil, err
	}
	if t.persistent {
		return t.interceptPersistent(ctx, id, line)
	}
	return t.interceptPerEvent(ctx, id, line)
}

// Observe writes the hooks/observe notification and never waits for a reply: the binding
// has none (AHP spec, base/transports/stdio.md "Persistent lifecycle").
func (t *stdioTransport) Observe(ctx context.Context, params *ahp.ObserveParams) error {
	if ctx.Err() != nil {
		return ctxFailure(ctx, "before sending")
	}
	frame, err := observeFrame(params)
	if err != nil {
		return err
	}
	line, err := stdioLine(frame)
	if err != nil {
		return err
	}
	if t.persistent {
		p, err := t.current()
		if err != nil {
			return err
		}
		return p.write(ctx, line)
	}
	return t.observePerEvent(ctx, line)
}

// Ready reports whether the persistent process is running, starting it when it is not
// (never started, crashed or abandoned), and returns the launch failure if that fails.
// Starting here rather than only at the next delivery keeps readiness from deadlocking: a
// proxy held out of rotation until its backend runs would otherwise never receive the
// event that starts it. A per_event backend has nothing to keep running and is ready
// until closed.
func (t *stdioTransport) Ready() error {
	if !t.persistent {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			return errors.New("stdio transport closed")
		}
		return nil
	}
	_, err := t.current()
	return err
}

// Close stops every process: the persistent one gets stdin EOF and a short grace to exit,
// everything else is killed. It returns once every process is reaped and every goroutine
// of this transport has ended.
func (t *stdioTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.wg.Wait()
		return nil
	}
	t.closed = true
	persistent := t.proc
	t.proc = nil
	var others []*stdioProc
	for p := range t.live {
		if p != persistent {
			others = append(others, p)
		}
	}
	t.mu.Unlock()

	for _, p := range others {
		p.kill()
	}
	if persistent != nil {
		persistent.shutdown(stdioCloseGrace)
	}
	t.wg.Wait()
	return nil
}

// stdioLine frames one message as a single line. encoding/json never emits a raw line
// break, but a frame with one would split into two messages, so it is refused.
func stdioLine(frame []byte) ([]byte, error) {
	if bytes.ContainsAny(frame, "\r\n") {
		return nil, fail(KindMalformed, "request frame contains a line break")
	}
	line := make([]byte, len(frame)+1)
	copy(line, frame)
	line[len(frame)] = '\n'
	return line, nil
}

// ---- persistent ----

func (t *stdioTransport) interceptPersistent(ctx context.Context, id string, line []byte) ([]byte, error) {
	// AHP-STDIO-001: at most one outstanding intercept per persistent backend. Waiting
	// for the slot counts against this call's deadline (AHP-FAIL-002).
	select {
	case t.callSlot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxFailure(ctx, "waiting for the backend's previous call")
	}
	defer func() { <-t.callSlot }()

	p, err := t.current()
	if err != nil {
		return nil, err
	}
	pc, err := p.register(id)
	if err != nil {
		return nil, err
	}
	defer p.unregister(pc)
	if err := p.write(ctx, line); err != nil {
		return nil, err
	}
	select {
	case r := <-pc.reply:
		if r.err != nil {
			if KindOf(r.err) == KindProcess {
				r.err = fail(KindProcess, "backend process ended before replying (%s)", p.exitDetail(ctx))
			}
			// The stream can no longer be trusted; the next call starts a fresh process.
			p.kill()
			return nil, r.err
		}
		return r.frame, nil
	case <-ctx.Done():
		// AHP-FAIL-002: abandon the exchange. Killing the process guarantees that the late
		// reply is never taken as the answer to a later call.
		p.kill()
		return nil, ctxFailure(ctx, "waiting for the reply")
	}
}

// current returns the running persistent process, starting one when there is none or the
// previous one died or was abandoned.
func (t *stdioTransport) current() (*stdioProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fail(KindProcess, "stdio transport closed")
	}
	if t.proc != nil && t.proc.alive() {
		return t.proc, nil
	}
	if old := t.proc; old != nil {
		t.proc = nil
		old.kill() // reaped by its own goroutine
	}
	p, err := t.spawnLocked(true, nil)
	if err != nil {
		return nil, err
	}
	t.wg.Add(1)
	go t.readReplies(p)
	t.proc = p
	t.log.Debug("started persistent backend process", zap.Int("pid", p.pid))
	return p, nil
}

// readReplies routes every stdout line of a persistent process to the call waiting for
// its id. It ends when stdout closes (exit, crash, kill).
func (t *stdioTransport) readReplies(p *stdioProc) {
	defer t.wg.Done()
	defer p.doneReading()
	br := bufio.NewReaderSize(p.stdout, stdioReadBuffer)
	for {
		line, err := readLine(br, t.maxLine)
		switch {
		case err == nil:
			p.route(line, t.log)
		case errors.Is(err, errLineTooLong):
			// Never truncate: the call fails, the rest of the line is
			// skipped so the reader stays on a frame boundary until the process is replaced.
			if !p.deliver(callResult{err: fail(KindOversized, "reply line exceeds the %d-byte limit", t.maxLine)}) {
				t.log.Debug("dropped an oversized stdout line while no call was in flight")
			}
			if discardLine(br) != nil {
				p.outputClosed()
				return
			}
		default:
			p.outputClosed()
			return
		}
	}
}

// ---- per_event ----

func (t *stdioTransport) interceptPerEvent(ctx context.Context, id string, line []byte) ([]byte, error) {
	if err := t.acquireSlot(ctx); err != nil {
		return nil, err
	}
	defer t.releaseSlot()
	t.mu.Lock()
	p, err := t.spawnLocked(true, nil)
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// AHP-FAIL-002: the process is killed at the deadline, which ends every read and
	// write below.
	stop := context.AfterFunc(ctx, p.kill)
	reply, xerr := p.exchangeOnce(line, t.maxLine)
	p.doneReading()
	if xerr != nil {
		p.kill()
	}
	<-p.exited // no process outlives its call
	if !stop() {
		return nil, ctxFailure(ctx, "waiting for the reply")
	}
	if k := KindOf(xerr); xerr != nil && (k == KindMalformed || k == KindOversized) {
		return nil, xerr // we killed it; its exit status says nothing
	}
	if exitErr := p.exitError(); exitErr != nil {
		return nil, fail(KindProcess, "backend process failed (%s)", describeExit(exitErr))
	}
	if xerr != nil {
		return nil, xerr
	}
	if err := checkReplyFrame(reply); err != nil {
		return nil, err
	}
	if !replyIDMatches(reply, id) {
		return nil, fail(KindMalformed, "reply id does not match the request id")
	}
	return reply, nil
}

// observePerEvent starts a process for the notification, writes it, closes stdin and
// waits for the process to exit: the hook call owns the delivery, and a per_event process
// still running after the call returned would be a detached observer delivery (seed,
// Observers: "implementations MUST NOT leave detached observer deliveries running after
// that completion"). The wait is bounded by ctx (the chain's observe timeout) or
// stdioObserveLifetime when ctx has none; when ctx ends first the process is killed and
// reaped, and the delivery fails as a timeout or cancellation. Close kills it sooner.
func (t *stdioTransport) observePerEvent(ctx context.Context, line []byte) error {
	if err := t.acquireSlot(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	p, err := t.spawnLocked(false, t.releaseSlot) // the slot is held until the process is reaped
	t.mu.Unlock()
	if err != nil {
		t.releaseSlot()
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(stdioObserveLifetime)
	}
	p.limitLifetime(time.Until(deadline))
	stop := context.AfterFunc(ctx, p.kill) // only while writing
	_, werr := p.stdin.Write(line)
	cerr := p.stdin.Close()
	if !stop() {
		return ctxFailure(ctx, "writing the notification")
	}
	if werr != nil || cerr != nil {
		p.kill()
		return fail(KindProcess, "writing the notification to the backend process: %v", errors.Join(werr, cerr))
	}
	select {
	case <-p.exited:
		// The lifetime timer and ctx fire at the same instant; whichever wins the select,
		// a process the timer killed is a timeout, never a success. expired is set under
		// p.mu before the kill and only while the process is unreaped, so it is final once
		// exited is closed.
		if p.expiredByLifetime() {
			return fail(KindTimeout, "deadline exceeded waiting for the notification process to exit")
		}
		return nil
	case <-ctx.Done():
		p.kill()
		<-p.exited // bounded cleanup: reap what this call owns
		return ctxFailure(ctx, "waiting for the notification process to exit")
	}
}

func (t *stdioTransport) acquireSlot(ctx context.Context) error {
	select {
	case t.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctxFailure(ctx, "waiting for a free backend process slot")
	}
}

func (t *stdioTransport) releaseSlot() { <-t.slots }

// ---- processes ----

// stdioProc is one backend process and our ends of its pipes.
type stdioProc struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File
	stdout *os.File // nil when stdout goes to the null device
	stderr *os.File

	writeMu sync.Mutex // one frame at a time on stdin

	mu       sync.Mutex
	pending  *pendingCall // persistent: the call waiting for its reply
	killed   bool
	outEOF   bool // stdout ended: no reply can come any more
	reaped   bool
	exitErr  error
	lifetime *time.Timer // per_event observe: kill at the deadline
	expired  bool        // the lifetime timer killed the process while it still ran

	exited      chan struct{} // closed once the process is reaped
	stdoutDone  chan struct{} // closed once nobody reads stdout any more
	stderrDone  chan struct{} // closed once stderr is drained
	readingOnce sync.Once
	closeOnce   sync.Once
}

type pendingCall struct {
	id    string
	reply chan callResult // buffered: the reader never blocks on a departed caller
}

type callResult struct {
	frame []byte
	err   error
}

// spawnLocked starts the backend: argv without a shell, optional cwd, minimal
// environment (AHP-STDIO-001). readStdout=false sends stdout to the null device (for
// notifications, which get no reply). onExit runs once the process is reaped. t.mu held.
func (t *stdioTransport) spawnLocked(readStdout bool, onExit func()) (*stdioProc, error) {
	if t.closed {
		return nil, fail(KindProcess, "stdio transport closed")
	}
	cmd := exec.Command(t.command, t.args...)
	cmd.Dir = t.cwd
	cmd.Env = minimalEnv()
	setProcessGroup(cmd)

	var opened []*os.File
	closeOpened := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			opened = append(opened, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fail(KindProcess, "creating pipes: %v", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeOpened()
		return nil, fail(KindProcess, "creating pipes: %v", err)
	}
	cmd.Stdin = inR
	cmd.Stderr = errW
	childEnds := []*os.File{inR, errW}
	var outR *os.File
	if readStdout {
		r, w, err := pipe()
		if err != nil {
			closeOpened()
			return nil, fail(KindProcess, "creating pipes: %v", err)
		}
		outR = r
		cmd.Stdout = w // set only when non-nil: a typed nil would not mean the null device
		childEnds = append(childEnds, w)
	}
	if err := cmd.Start(); err != nil {
		closeOpened()
		return nil, fail(KindProcess, "starting backend process: %v", err)
	}
	// The child holds its own copies; keeping ours open would hide EOF.
	for _, f := range childEnds {
		f.Close()
	}

	p := &stdioProc{
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		exited:     make(chan struct{}),
		stdoutDone: make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	if !readStdout {
		p.doneReading()
	}
	t.live[p] = struct{}{}
	t.wg.Add(2)
	go t.drainStderr(p)
	go t.reap(p, onExit)
	return p, nil
}

// minimalEnv is the whole environment of a backend: PATH and HOME, nothing else, so no
// proxy credential or client secret leaks into a child (AHP-STDIO-001). A non-nil empty
// slice matters: a nil Env would inherit everything.
func minimalEnv() []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// reap waits for the process, lets its output drain briefly, then closes our pipe ends so
// that no reader waits on a descendant that inherited them.
func (t *stdioTransport) reap(p *stdioProc, onExit func()) {
	defer t.wg.Done()
	err := p.cmd.Wait()
	p.mu.Lock()
	p.reaped = true
	p.exitErr = err
	if p.lifetime != nil {
		p.lifetime.Stop()
	}
	p.mu.Unlock()
	close(p.exited)
	// Helpers the backend left behind die with it: they would hold its pipes open, and
	// nothing would ever reap them. The group outlives its leader only while it has
	// members, so the id cannot name anyone else yet.
	killOrphans(p.pid)

	expired := make(chan struct{})
	grace := time.AfterFunc(stdioExitGrace, func() { close(expired) })
	for _, ch := range []chan struct{}{p.stdoutDone, p.stderrDone} {
		select {
		case <-ch:
		case <-expired:
		}
	}
	grace.Stop()
	p.closePipes()

	t.mu.Lock()
	delete(t.live, p)
	t.mu.Unlock()
	if onExit != nil {
		onExit()
	}
	t.log.Debug("backend process exited", zap.Int("pid", p.pid), zap.String("status", describeExit(err)))
}

// drainStderr logs stderr at debug level, line by line with a bounded length, and keeps
// reading no matter how much arrives so the backend never blocks on a full pipe.
func (t *stdioTransport) drainStderr(p *stdioProc) {
	defer t.wg.Done()
	defer close(p.stderrDone)
	br := bufio.NewReaderSize(p.stderr, 4<<10)
	for {
		line, truncated, err := readLogLine(br, stderrLineMax)
		if len(line) > 0 || truncated {
			if ce := t.log.Check(zap.DebugLevel, "backend stderr"); ce != nil {
				ce.Write(zap.Int("pid", p.pid), zap.String("line", strings.ToValidUTF8(string(line), "\uFFFD")), zap.Bool("truncated", truncated))
			}
		}
		if err != nil {
			return
		}
	}
}

// write sends one line. A write blocked on a backend that stopped reading ends with ctx:
// the process is killed, since a partial frame leaves the stream unusable anyway.
func (p *stdioProc) write(ctx context.Context, line []byte) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	stop := context.AfterFunc(ctx, p.kill)
	_, err := p.stdin.Write(line)
	if !stop() {
		return ctxFailure(ctx, "writing to the backend process")
	}
	if err != nil {
		p.kill()
		return fail(KindProcess, "writing to the backend process: %v", err)
	}
	return nil
}

// exchangeOnce is the per_event exchange: one line in, stdin closed, at most one line out.
func (p *stdioProc) exchangeOnce(line []byte, maxLine int64) ([]byte, error) {
	_, werr := p.stdin.Write(line)
	cerr := p.stdin.Close() // EOF: one message per process
	if werr != nil || cerr != nil {
		return nil, fail(KindProcess, "writing to the backend process: %v", errors.Join(werr, cerr))
	}
	br := bufio.NewReaderSize(p.stdout, stdioReadBuffer)
	reply, err := readLine(br, maxLine)
	switch {
	case errors.Is(err, errLineTooLong):
		return nil, fail(KindOversized, "reply line exceeds the %d-byte limit", maxLine)
	case errors.Is(err, io.EOF) && len(reply) == 0:
		return nil, fail(KindProcess, "backend process exited without a reply")
	case errors.Is(err, io.EOF):
		return nil, fail(KindMalformed, "reply line is not newline-terminated")
	case err != nil:
		return nil, fail(KindProcess, "reading the reply: %v", err)
	}
	if _, err := br.ReadByte(); err == nil {
		return nil, fail(KindMalformed, "backend wrote more than one line")
	}
	return reply, nil
}

// register installs the call waiting for id; it fails at once when no reply can come.
func (p *stdioProc) register(id string) (*pendingCall, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed || p.outEOF || p.reaped {
		return nil, fail(KindProcess, "backend process is not running")
	}
	pc := &pendingCall{id: id, reply: make(chan callResult, 1)}
	p.pending = pc
	return pc, nil
}

func (p *stdioProc) unregister(pc *pendingCall) {
	p.mu.Lock()
	if p.pending == pc {
		p.pending = nil
	}
	p.mu.Unlock()
}

// deliver hands r to the call in flight, if any.
func (p *stdioProc) deliver(r callResult) bool {
	p.mu.Lock()
	pc := p.pending
	p.pending = nil
	p.mu.Unlock()
	if pc == nil {
		return false
	}
	pc.reply <- r
	return true
}

// route passes a reply line to the call waiting for its id. Frames with an unknown or
// stale id (an abandoned call, a notification, a bug) are dropped and never answer the
// live call; a line that is not one JSON object fails the call in flight.
func (p *stdioProc) route(line []byte, log *zap.Logger) {
	if err := checkReplyFrame(line); err != nil {
		if !p.deliver(callResult{err: err}) {
			log.Debug("dropped a malformed stdout line while no call was in flight", zap.Int("pid", p.pid), zap.Int("bytes", len(line)))
		}
		return
	}
	p.mu.Lock()
	pc := p.pending
	p.mu.Unlock()
	if pc == nil || !replyIDMatches(line, pc.id) {
		log.Debug("dropped a reply with an unknown or stale id", zap.Int("pid", p.pid), zap.Int("bytes", len(line)))
		return
	}
	p.mu.Lock()
	live := p.pending == pc
	if live {
		p.pending = nil
	}
	p.mu.Unlock()
	if live {
		pc.reply <- callResult{frame: line}
	}
}

// outputClosed records that stdout ended and fails the call in flight.
func (p *stdioProc) outputClosed() {
	p.mu.Lock()
	p.outEOF = true
	p.mu.Unlock()
	p.deliver(callResult{err: fail(KindProcess, "backend process closed its output")})
}

func (p *stdioProc) doneReading() { p.readingOnce.Do(func() { close(p.stdoutDone) }) }

func (p *stdioProc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.killed && !p.outEOF && !p.reaped
}

// kill ends the process and its process group and closes our pipe ends, which unblocks
// every read and write on them. Safe to call any number of times, from any goroutine.
func (p *stdioProc) kill() {
	p.mu.Lock()
	p.killed = true
	if !p.reaped {
		// Only before reaping: afterwards the pid may belong to someone else.
		killProcessTree(p.cmd.Process)
	}
	p.mu.Unlock()
	p.closePipes()
}

// shutdown asks the process to exit by closing stdin, then kills it after grace.
func (p *stdioProc) shutdown(grace time.Duration) {
	// Not under writeMu: closing unblocks a write stuck on a backend that stopped reading.
	p.stdin.Close()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
	}
	p.kill()
}

func (p *stdioProc) closePipes() {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		if p.stdout != nil {
			p.stdout.Close()
		}
		p.stderr.Close()
	})
}

// limitLifetime kills the process after d unless it was reaped before, and records that
// the deadline ended it.
func (p *stdioProc) limitLifetime(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		p.lifetime = time.AfterFunc(d, p.expire)
	}
}

// expire is the lifetime timer's kill: it marks the process expired in the same critical
// section that kills it, so a process that exited on its own first is never marked.
func (p *stdioProc) expire() {
	p.mu.Lock()
	p.killed = true
	if !p.reaped {
		p.expired = true
		killProcessTree(p.cmd.Process)
	}
	p.mu.Unlock()
	p.closePipes()
}

func (p *stdioProc) expiredByLifetime() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expired
}

func (p *stdioProc) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// exitDetail describes how the process ended, waiting briefly for its exit status.
func (p *stdioProc) exitDetail(ctx context.Context) string {
	timer := time.NewTimer(stdioExitDetailWait)
	defer timer.Stop()
	select {
	case <-p.exited:
		return describeExit(p.exitError())
	case <-timer.C:
	case <-ctx.Done():
	}
	return "exit status not yet known"
}

func describeExit(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	default:
		return err.Error()
	}
}

// readLine returns the next '\n'-terminated line without its terminator, refusing a line
// longer than limit bytes as soon as the limit is passed. At EOF it returns the
// unterminated remainder (possibly empty) with io.EOF.
func readLine(br *bufio.Reader, limit int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if int64(len(line))+int64(len(chunk)) > limit+1 { // +1: the terminator
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// discardLine skips the rest of the current line.
func discardLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// readLogLine reads one line, keeping at most limit bytes of it; truncated says whether
// anything was dropped.
func readLogLine(br *bufio.Reader, limit int) (line []byte, truncated bool, err error) {
	for {
		chunk, rerr := br.ReadSlice('\n')
		if rerr == nil {
			chunk = chunk[:len(chunk)-1]
		}
		if room := limit - len(line); room > 0 {
			take := min(room, len(chunk))
			line = append(line, chunk[:take]...)
			truncated = truncated || take < len(chunk)
		} else if len(chunk) > 0 {
			truncated = true
		}
		if !errors.Is(rerr, bufio.ErrBufferFull) {
			return line, truncated, rerr
		}
	}
}
