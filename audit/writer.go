package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/config"
)

// Errors returned by Write. A record that was not queued is always counted in Dropped.
var (
	ErrQueueFull = errors.New("audit: queue full, record dropped")
	ErrClosed    = errors.New("audit: writer closed, record dropped")
)

const (
	// A batch is what the drain goroutine writes with one Write call: whatever is already
	// queued, bounded so that one slow write does not hold a huge buffer.
	maxBatchRecords = 256
	maxBatchBytes   = 1 << 20
	// dropLogInterval rate-limits the drop log line; drops in between are summed into the
	// next line (and into the final line at Close), so none goes unreported.
	dropLogInterval = 10 * time.Second
)

// Writer is the audit log: a bounded queue drained by one goroutine into an append-only
// file or stdout. Its methods are safe for concurrent use; a nil *Writer and the disabled
// writer (empty path) accept and discard records.
type Writer struct {
	enabled        bool
	includeContent bool
	onFull         string
	waitTimeout    time.Duration
	log            *zap.Logger
	out            io.Writer
	owned          bool // out is ours to sync and close (a file, or a test writer)

	mu     sync.RWMutex // Write holds it shared while queueing; Close exclusively to close the queue
	closed bool
	queue  chan []byte
	abort  chan struct{} // closed by Close when its context ends before the queue drained
	done   chan struct{} // closed when the drain goroutine has returned

	dropped atomic.Uint64

	dropMu       sync.Mutex
	lastDropLog  time.Time
	droppedSince uint64 // drops not yet reported in a log line
}

// NewWriter opens the audit log described by cfg. Path "" returns a disabled writer,
// "-" writes to stdout, anything else is opened append-only (created 0600). Invalid
// settings are errors, never silently replaced by defaults.
func NewWriter(cfg config.Audit, logger *zap.Logger) (*Writer, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg, err := normalize(cfg)
	if err != nil {
		return nil, err
	}
	switch cfg.Path {
	case "":
		return &Writer{log: logger}, nil
	case "-":
		// stdout is shared with the process: synced and closed by nobody here.
		return newWriter(cfg, logger, os.Stdout, false), nil
	}
	f, err := os.OpenFile(cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", cfg.Path, err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		// An existing file keeps its mode; say so rather than chmod an operator's file.
		logger.Warn("audit log is readable or writable by group or others",
			zap.String("path", cfg.Path), zap.Stringer("mode", fi.Mode().Perm()))
	}
	return newWriter(cfg, logger, f, true), nil
}

func normalize(cfg config.Audit) (config.Audit, error) {
	switch cfg.OnFull {
	case "":
		cfg.OnFull = config.AuditOnWait
	case config.AuditOnWait, config.AuditOnDrop:
	default:
		return cfg, fmt.Errorf("audit: onFull %q: want %q or %q", cfg.OnFull, config.AuditOnWait, config.AuditOnDrop)
	}
	switch {
	case cfg.QueueSize < 0:
		return cfg, fmt.Errorf("audit: queueSize %d: must not be negative", cfg.QueueSize)
	case cfg.QueueSize == 0:
		cfg.QueueSize = config.DefaultAuditQueueSize
	}
	switch {
	case cfg.WaitTimeout < 0:
		return cfg, fmt.Errorf("audit: waitTimeout %s: must not be negative", cfg.WaitTimeout)
	case cfg.WaitTimeout == 0:
		cfg.WaitTimeout = config.DefaultAuditWaitTimeout
	}
	return cfg, nil
}

// newWriter starts a writer on out with an already normalized cfg. When owned is true,
// Close syncs out (if it has Sync) and closes it (if it is an io.Closer); closing is also
// how Close unblocks a write stuck past its deadline. Tests inject blocking writers here.
func newWriter(cfg config.Audit, logger *zap.Logger, out io.Writer, owned bool) *Writer {
	w := &Writer{
		enabled:        true,
		includeContent: cfg.IncludeContent,
		onFull:         cfg.OnFull,
		waitTimeout:    cfg.WaitTimeout,
		log:            logger,
		out:            out,
		owned:          owned,
		queue:          make(chan []byte, cfg.QueueSize),
		abort:          make(chan struct{}),
		done:           make(chan struct{}),
	}
	go w.drain()
	return w
}

// Enabled reports whether records are written anywhere.
func (w *Writer) Enabled() bool { return w != nil && w.enabled }

// Write queues one record. The record is encoded here, in the caller's goroutine, so the
// caller may reuse it at once and an encoding problem is reported to the caller. When the
// queue is full, OnFull "drop" drops at once; "wait" waits up to WaitTimeout (or until
// ctx ends) for room, then drops. Every drop is counted and logged; the returned error
// says why the record was not queued.
func (w *Writer) Write(ctx context.Context, rec Record) error {
	if !w.Enabled() {
		return nil
	}
	line, err := w.encode(rec)
	if err != nil {
		w.drop(1, "encode", err)
		return fmt.Errorf("audit: encode record: %w", err)
	}

	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.drop(1, "closed", nil)
		return ErrClosed
	}
	select {
	case w.queue <- line:
		return nil
	default:
	}
	if w.onFull == config.AuditOnDrop {
		w.drop(1, "queue full", nil)
		return ErrQueueFull
	}
	t := time.NewTimer(w.waitTimeout)
	defer t.Stop()
	select {
	case w.queue <- line:
		return nil
	case <-t.C:
		w.drop(1, "queue full after wait", nil)
		return ErrQueueFull
	case <-ctx.Done():
		w.drop(1, "queue full, caller gone", ctx.Err())
		return fmt.Errorf("%w: %w", ErrQueueFull, ctx.Err())
	}
}

// encode renders one JSON line. It works on a copy so the caller's slices are untouched.
func (w *Writer) encode(rec Record) ([]byte, error) {
	if !w.includeContent {
		rec.Content = nil
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	rec.Time = rec.Time.UTC()
	// Interceptors and effects are always arrays, so readers need no null checks.
	ics := make([]Interceptor, len(rec.Interceptors))
	copy(ics, rec.Interceptors)
	for i := range ics {
		if ics[i].Effects == nil {
			ics[i].Effects = []EffectType{}
		}
	}
	rec.Interceptors = ics
	line, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// Dropped is the number of records that never reached the log: queue full, written after
// Close, encoding or write failures, or discarded because Close ran out of time.
func (w *Writer) Dropped() uint64 {
	if w == nil {
		return 0
	}
	return w.dropped.Load()
}

// QueueDepth is the number of encoded records waiting for the drain goroutine.
func (w *Writer) QueueDepth() int {
	if !w.Enabled() {
		return 0
	}
	return len(w.queue)
}

// Close stops accepting records, writes everything already queued and syncs and closes
// the file. ctx bounds the flush: when it ends first, the records still queued are
// counted as dropped, an owned output is closed to unblock a stuck write, and the error
// says how many were lost. After Close returns no goroutine of the writer is left, except
// when stdout itself is blocked (stdout is not ours to close): then the drain goroutine
// ends as soon as that one write returns.
func (w *Writer) Close(ctx context.Context) error {
	if !w.Enabled() {
		return nil
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.queue) // safe: every Write that could send holds mu shared
	w.mu.Unlock()

	var errs []error
	closedOut := false
	flushed := false
	select {
	case <-w.done:
		flushed = true
	case <-ctx.Done():
		// Both may be ready; a finished flush wins over an expired context.
		select {
		case <-w.done:
			flushed = true
		default:
		}
	}
	if !flushed {
		before := w.Dropped()
		close(w.abort)
		if c, ok := w.out.(io.Closer); ok && w.owned {
			closedOut = true
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("audit: close output: %w", err))
			}
		}
		if closedOut {
			<-w.done
		}
		errs = append(errs, fmt.Errorf("audit: close: %w: %d records dropped while flushing", ctx.Err(), w.Dropped()-before))
	}
	if w.owned && !closedOut {
		if s, ok := w.out.(interface{ Sync() error }); ok {
			if err := s.Sync(); err != nil {
				errs = append(errs, fmt.Errorf("audit: sync: %w", err))
			}
		}
		if c, ok := w.out.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("audit: close output: %w", err))
			}
		}
	}
	w.reportPendingDrops()
	return errors.Join(errs...)
}

// drain is the single goroutine that writes queued lines, batching what is already
// queued into one write. It returns when the queue is closed and empty, or on abort.
func (w *Writer) drain() {
	defer close(w.done)
	var buf bytes.Buffer
	for {
		select {
		case <-w.abort:
			w.discard()
			return
		default:
		}
		var line []byte
		var ok bool
		select {
		case line, ok = <-w.queue:
		case <-w.abort:
			w.discard()
			return
		}
		if !ok {
			return
		}
		buf.Reset()
		buf.Write(line)
		n := 1
		more := true
		for more && n < maxBatchRecords && buf.Len() < maxBatchBytes {
			select {
			case line, ok = <-w.queue:
				if !ok {
					more = false
					break
				}
				buf.Write(line)
				n++
			default:
				more = false
			}
		}
		if _, err := w.out.Write(buf.Bytes()); err != nil {
			w.drop(uint64(n), "write failed", err)
		}
	}
}

// discard counts what is still queued after an abort. Close closed the queue before it
// could abort, so the range ends.
func (w *Writer) discard() {
	var n uint64
	for range w.queue {
		n++
	}
	if n > 0 {
		w.drop(n, "close deadline", nil)
	}
}

// drop counts n lost records and logs at most one line per dropLogInterval; the line
// carries every drop since the previous one.
func (w *Writer) drop(n uint64, reason string, err error) {
	total := w.dropped.Add(n)
	now := time.Now()
	w.dropMu.Lock()
	w.droppedSince += n
	if !w.lastDropLog.IsZero() && now.Sub(w.lastDropLog) < dropLogInterval {
		w.dropMu.Unlock()
		return
	}
	count := w.droppedSince
	w.droppedSince = 0
	w.lastDropLog = now
	w.dropMu.Unlock()
	fields := []zap.Field{zap.String("reason", reason), zap.Uint64("dropped", count), zap.Uint64("droppedTotal", total)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	w.log.Error("audit records dropped", fields...)
}

// reportPendingDrops logs drops that the rate limit held back, so the last ones before
// shutdown are not silent.
func (w *Writer) reportPendingDrops() {
	w.dropMu.Lock()
	count := w.droppedSince
	w.droppedSince = 0
	w.dropMu.Unlock()
	if count > 0 {
		w.log.Error("audit records dropped", zap.String("reason", "summary at close"),
			zap.Uint64("dropped", count), zap.Uint64("droppedTotal", w.Dropped()))
	}
}
