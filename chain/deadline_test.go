package chain

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// The lazy deadline behaves as context.WithTimeout to whoever asks: Err turns to
// DeadlineExceeded at the deadline whether or not anything waits, Done closes at it once
// asked for, parent's end and cancel show in both, and an earlier parent deadline wins.
// Only a waiter makes a timer. Each case runs against context.WithTimeout too (the
// control: the same expectations hold for the standard context).
func TestLazyDeadlineActsAsWithTimeout(t *testing.T) {
	kinds := map[string]func(context.Context, time.Duration) (context.Context, context.CancelFunc){
		"lazy":     withLazyDeadline,
		"standard": context.WithTimeout,
	}
	for name, with := range kinds {
		t.Run(name, func(t *testing.T) {
			const d = 30 * time.Millisecond
			// Polled only: Err turns at the deadline.
			ctx, cancel := with(context.Background(), d)
			if err := ctx.Err(); err != nil {
				t.Fatalf("before the deadline Err = %v", err)
			}
			if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > d {
				t.Fatalf("Deadline = %v %v", dl, ok)
			}
			start := time.Now()
			for ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			if el := time.Since(start); !errors.Is(ctx.Err(), context.DeadlineExceeded) || el < d-5*time.Millisecond {
				t.Fatalf("Err = %v after %v", ctx.Err(), el)
			}
			cancel()
			_ = ctx.Done()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("cancel after the deadline changed Err to %v", ctx.Err())
			}

			// Waited on: Done closes at the deadline.
			ctx, cancel = with(context.Background(), d)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("Done never closed")
			}
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("after Done, Err = %v", ctx.Err())
			}
			cancel()

			// cancel before the deadline, asked before and after Done was made.
			for _, waitFirst := range []bool{false, true} {
				ctx, cancel = with(context.Background(), time.Hour)
				if waitFirst {
					_ = ctx.Done()
				}
				cancel()
				if !errors.Is(ctx.Err(), context.Canceled) {
					t.Fatalf("cancelled (Done made first: %v): Err = %v", waitFirst, ctx.Err())
				}
				select {
				case <-ctx.Done():
				default:
					t.Fatalf("cancelled (Done made first: %v): Done open", waitFirst)
				}
			}

			// The parent's end and its earlier deadline.
			parent, end := context.WithCancel(context.Background())
			ctx, cancel = with(parent, time.Hour)
			end()
			if !errors.Is(ctx.Err(), context.Canceled) {
				t.Fatalf("parent ended: Err = %v", ctx.Err())
			}
			<-ctx.Done()
			cancel()
			parent, end = context.WithTimeout(context.Background(), time.Minute)
			defer end()
			ctx, cancel = with(parent, time.Hour)
			defer cancel()
			if dl, _ := ctx.Deadline(); time.Until(dl) > time.Minute {
				t.Fatalf("the parent's earlier deadline lost: %v", dl)
			}
			if got := ctx.Value(ahp.EventToolBefore); got != nil {
				t.Fatalf("Value = %v", got)
			}
		})
	}
	ctx, cancel := withLazyDeadline(context.Background(), time.Hour)
	defer cancel()
	if _ = ctx.Err(); ctx.(*lazyDeadline).timed.Load() != nil {
		t.Fatal("Err made a timer")
	}
	if _ = ctx.Done(); ctx.(*lazyDeadline).timed.Load() == nil {
		t.Fatal("Done made no timer")
	}
}
