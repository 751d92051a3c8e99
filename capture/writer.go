package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/policies"
)

// Defaults of the capture settings (documented in docs/configuration.md).
const (
	DefaultMaxBytes  = 64 << 20
	DefaultMaxAge    = time.Hour
	DefaultQueueSize = 1024
)

// Options configure a Writer.
type Options struct {
	Dir string
	// Sample is the fraction of sessions captured, 0 < Sample <= 1. Sampling is by
	// session, so a captured conversation is captured whole.
	Sample float64
	// MaxBytes bounds one capture file: a file is closed before a line would take it past
	// the bound. A single line larger than the bound is written alone in its own file,
	// whole (nothing is ever truncated).
	MaxBytes int64
	// MaxAge bounds the time one file stays open for writing.
	MaxAge time.Duration
	// QueueSize bounds the lines waiting to be written; beyond it lines are dropped and
	// counted (the request path never waits for the disk).
	QueueSize int
	// Name distinguishes the files of concurrent writers in one directory (a reload's
	// old and new generations); "" is fine for one writer.
	Name string
	// Redact stores each event after the default secrets redaction
	// (policies.RedactedCopy) instead of as received.
	Redact bool
	// OnFailure is told of every line lost (queue full, encoding or write failure).
	OnFailure func(reason string)
	Logger    *zap.Logger
	now       func() time.Time
}

// Writer appends lines to rotated capture files in a directory, from its own goroutine.
type Writer struct {
	o      Options
	q      chan *Line
	done   chan struct{}
	failed atomic.Uint64
	logged atomic.Bool

	closeOnce sync.Once
	mu        sync.RWMutex // guards closed against sends
	closed    bool

	f       *os.File
	size    int64
	opened  time.Time
	seq     int
	Written atomic.Uint64
}

// NewWriter creates the directory and starts the writer.
func NewWriter(o Options) (*Writer, error) {
	if o.Dir == "" {
		return nil, errors.New("capture: no directory")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if o.Sample <= 0 || o.Sample > 1 {
		o.Sample = 1
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.now == nil {
		o.now = time.Now
	}
	w := &Writer{o: o, q: make(chan *Line, o.QueueSize), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// Sampled reports whether the boundaries of session are captured.
func (w *Writer) Sampled(session string) bool {
	if w == nil {
		return false
	}
	if w.o.Sample >= 1 {
		return true
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(session))
	return float64(h.Sum64()%1_000_000) < w.o.Sample*1_000_000
}

// Write queues one line; the writer's goroutine redacts (Options.Redact) and encodes it.
// It never blocks: a full queue loses the line, counted as a failure. The caller must
// not use l afterwards.
func (w *Writer) Write(line *Line) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.fail("closed", nil)
		return
	}
	select {
	case w.q <- line:
	default:
		w.fail("queue_full", nil)
	}
}

// Failed is the number of lines lost.
func (w *Writer) Failed() uint64 { return w.failed.Load() }

// fail counts a lost line, and logs the first failure of this writer only: a full disk
// must not flood the log.
func (w *Writer) fail(reason string, err error) {
	w.failed.Add(1)
	if w.o.OnFailure != nil {
		w.o.OnFailure(reason)
	}
	if w.logged.CompareAndSwap(false, true) {
		w.o.Logger.Warn("capture: a line was lost; traffic is unaffected (further losses are only counted, hookproxy_capture_failures_total)",
			zap.String("dir", w.o.Dir), zap.String("reason", reason), zap.Error(err))
	}
}

func (w *Writer) run() {
	defer close(w.done)
	for l := range w.q {
		line, err := w.encode(l)
		if err != nil {
			w.fail("encode", err)
			continue
		}
		if err := w.append(line); err != nil {
			w.fail("write", err)
		} else {
			w.Written.Add(1)
		}
	}
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			w.fail("write", err)
		}
	}
}

// append writes one line, rotating first when the line would pass MaxBytes or the file
// is older than MaxAge.
func (w *Writer) append(line []byte) error {
	n := int64(len(line)) + 1
	now := w.o.now()
	if w.f != nil && (w.size+n > w.o.MaxBytes || now.Sub(w.opened) >= w.o.MaxAge) {
		err := w.f.Close()
		w.f = nil
		if err != nil {
			return err
		}
	}
	if w.f == nil {
		w.seq++
		name := fmt.Sprintf("capture-%s%s-%04d.jsonl", now.UTC().Format("20060102T150405.000Z"), w.o.Name, w.seq)
		f, err := os.OpenFile(filepath.Join(w.o.Dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		w.f, w.size, w.opened = f, 0, now
	}
	buf := make([]byte, 0, n)
	buf = append(append(buf, line...), '\n')
	k, err := w.f.Write(buf)
	w.size += int64(k)
	return err
}

// Close stops accepting lines, writes what is queued and closes the file.
func (w *Writer) Close() {
	if w == nil {
		return
	}
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		close(w.q)
		w.mu.Unlock()
		<-w.done
	})
}

// encode redacts the line's event when configured and encodes the line.
func (w *Writer) encode(l *Line) ([]byte, error) {
	l.Version = Version
	if w.o.Redact && !l.Redacted {
		var ev ahp.Event
		if err := json.Unmarshal(l.Event, &ev); err != nil {
			return nil, err
		}
		red, err := json.Marshal(policies.RedactedCopy(&ev))
		if err != nil {
			return nil, err
		}
		l.Event, l.Redacted = red, true
	}
	return json.Marshal(l)
}

// Fail counts a line the caller could not even hand over (it failed to encode the event).
func (w *Writer) Fail(reason string, err error) {
	if w != nil {
		w.fail(reason, err)
	}
}
