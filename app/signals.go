package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// StopSignals returns a context that ends at the first SIGINT or SIGTERM. A second
// signal then kills the process the default way, so a shutdown that hangs can still be
// interrupted. The returned stop releases the signal handler.
func StopSignals(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process the default way
	}()
	return ctx, stop
}

// ReloadSignals delivers a value on the returned channel for each SIGHUP (Options.Reload);
// a SIGHUP that arrives while a reload is pending is folded into it. stop releases the
// handler.
func ReloadSignals() (reload <-chan struct{}, stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ch := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case ch <- struct{}{}:
			default: // a reload is already pending
			}
		}
	}()
	return ch, func() {
		signal.Stop(hup)
		close(hup) // ends the forwarder above; Stop guarantees no further sends
	}
}
