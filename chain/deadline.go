package chain

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Every intercept exchange runs under its subscription's deadline (AHP-FAIL-002). The
// deadline of context.WithTimeout is a runtime timer, and a timer that becomes the
// process's earliest wakes the network poller: a write to its eventfd and a thread woken,
// on every hook of every request. Most exchanges never wait on the deadline: a bounded
// in-process policy runs on the caller's goroutine and asks Err while it works, and the
// chain asks Err when the reply is in. lazyDeadline keeps the deadline as a time until
// something waits on it: Err compares the clock with it, and the first call of Done makes
// the timer (context.WithDeadline), so a waiter gets the channel closed at the deadline
// as before. The outcome is the same either way: past the deadline Err is
// context.DeadlineExceeded, and a reply read after it is refused.

// lazyDeadline is parent with a deadline that starts no timer until Done is called.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time

	mu      sync.Mutex
	timed   atomic.Pointer[timedCtx] // made by the first Done
	stopped atomic.Pointer[error]    // cancel was called: what Err says from then on
}

type timedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// withLazyDeadline returns parent with a deadline d from now (or parent's own, when that
// is earlier) and the function that ends it, as context.WithTimeout does.
func withLazyDeadline(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := &lazyDeadline{parent: parent, deadline: time.Now().Add(d)}
	if pd, ok := parent.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	return c, c.cancel
}

func (c *lazyDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *lazyDeadline) Value(key any) any { return c.parent.Value(key) }

// Done makes the timer the first time it is called: from then on the channel closes at
// the deadline, when parent ends or when the context is cancelled.
func (c *lazyDeadline) Done() <-chan struct{} {
	if t := c.timed.Load(); t != nil {
		return t.ctx.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.timed.Load()
	if t == nil {
		ctx, cancel := context.WithDeadline(c.parent, c.deadline)
		t = &timedCtx{ctx: ctx, cancel: cancel}
		if c.stopped.Load() != nil {
			cancel()
		}
		c.timed.Store(t)
	}
	return t.ctx.Done()
}

// Err is parent's error, then what cancel left, then context.DeadlineExceeded once the
// clock has reached the deadline.
func (c *lazyDeadline) Err() error {
	if err := c.stopped.Load(); err != nil {
		if perr := c.parent.Err(); perr != nil {
			return perr
		}
		return *err
	}
	if t := c.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

var (
	errCanceled = context.Canceled
	errExpired  = context.DeadlineExceeded
)

// cancel ends the context: Err is context.Canceled from then on, unless it had ended
// already (the deadline passed, or parent ended), which it keeps saying.
func (c *lazyDeadline) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Load() != nil {
		return
	}
	if t := c.timed.Load(); t != nil {
		t.cancel()
		return
	}
	end := &errCanceled
	if c.parent.Err() == nil && !time.Now().Before(c.deadline) {
		end = &errExpired
	}
	c.stopped.Store(end)
}
