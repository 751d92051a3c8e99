package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// inProcessTransport runs a built-in policy behind the same interceptor contract as a
// remote backend: its result is framed as a JSON-RPC response and validated by the chain
// exactly like a reply that came over the wire.
//
// Each call gets its own copy of the params (a JSON round trip, as a remote backend would
// decode them), runs in its own goroutine and is abandoned at the deadline: a policy can
// neither corrupt the chain's event, nor stretch the deadline (AHP-FAIL-002), nor crash the
// proxy with a panic. Close waits for abandoned calls to return.
type inProcessTransport struct {
	name     string
	policy   ahp.Interceptor
	bounded  bool // runs on the caller's goroutine (BoundedPolicy)
	maxReply int64
	log      *zap.Logger

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

var _ Transport = (*inProcessTransport)(nil)

func newInProcess(b registration.Backend, opts Options, log *zap.Logger) (*inProcessTransport, error) {
	name := b.Transport.Policy
	factory := opts.Policies[name]
	if factory == nil {
		return nil, fmt.Errorf("backend %s: unknown in_process policy %q", b.ID, name)
	}
	policy, err := buildPolicy(factory, b.Transport.Config)
	if err != nil {
		return nil, fmt.Errorf("backend %s: in_process policy %q: %w", b.ID, name, err)
	}
	if policy == nil {
		return nil, fmt.Errorf("backend %s: in_process policy %q: factory returned no interceptor", b.ID, name)
	}
	_, bounded := policy.(BoundedPolicy)
	return &inProcessTransport{name: name, policy: policy, bounded: bounded, maxReply: opts.MaxReplyBytes, log: log}, nil
}

// EventReader is an in-process policy that never writes what an intercept call gives it
// (the event, capabilities, state, extensions, nor anything they point to) and keeps none
// of it once the call has returned. The transport hands such a policy the chain's own
// values instead of a deep copy: the copy of a coding agent's request is its whole history,
// hundreds of messages, on every call. The chain and the proxy never write an event in
// place (a changed event is a new one sharing what did not change), so a call abandoned at
// its deadline may go on reading. The built-in content scanners are readers; a test holds
// each to it.
type EventReader interface {
	ahp.Interceptor
	// ReadsEventOnly marks the policy as a reader; it is never called.
	ReadsEventOnly()
}

// buildPolicy turns a panicking factory (bad config handling) into an error.
func buildPolicy(factory PolicyFactory, config json.RawMessage) (p ahp.Interceptor, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("factory panicked: %s", panicSummary(r))
		}
	}()
	return factory(config)
}

// Intercept calls the policy and frames its result as {"jsonrpc","id","result"}.
func (t *inProcessTransport) Intercept(ctx context.Context, id string, params *ahp.InterceptParams) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, ctxFailure(ctx, "before calling the policy")
	}
	// The policy gets its own deep copy, so it can never change the chain's accepted event
	// (structural copy: per message and part, not per byte of text) — unless it is a
	// reader, which gets the chain's own values.
	own := *params
	if _, reader := t.policy.(EventReader); !reader {
		own = ahp.InterceptParams{
			ProtocolVersion: params.ProtocolVersion,
			Event:           params.Event.Clone(),
			Capabilities:    params.Capabilities.Clone(),
			State:           params.State.Clone(),
			Extensions:      ahp.CloneRawMap(params.Extensions),
		}
	}
	var result *ahp.InterceptResult
	err := t.run(ctx, func(ctx context.Context) error {
		r, err := t.policy.Intercept(ctx, &ahp.InterceptRequest{ID: id, Params: &own})
		result = r
		return err
	})
	if err != nil {
		return nil, err
	}
	if result == nil {
		return nil, fail(KindPolicy, "policy %s returned no result", t.name)
	}
	frame, err := responseFrame(id, result)
	if err != nil {
		return nil, fail(KindPolicy, "encoding the result of policy %s: %v", t.name, err)
	}
	if int64(len(frame)) > t.maxReply {
		return nil, fail(KindOversized, "policy %s result exceeds the %d-byte limit", t.name, t.maxReply)
	}
	return frame, nil
}

// Observe delivers to the policy when it implements ahp.Observer; otherwise it is a no-op.
func (t *inProcessTransport) Observe(ctx context.Context, params *ahp.ObserveParams) error {
	obs, ok := t.policy.(ahp.Observer)
	if !ok {
		return nil
	}
	if ctx.Err() != nil {
		return ctxFailure(ctx, "before calling the policy")
	}
	own := ahp.ObserveParams{ProtocolVersion: params.ProtocolVersion, Event: params.Event.Clone()}
	return t.run(ctx, func(ctx context.Context) error { return obs.Observe(ctx, &own) })
}

// Close waits for calls still running and closes the policy when it is an io.Closer.
func (t *inProcessTransport) Close() error {
	t.mu.Lock()
	already := t.closed
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
	if c, ok := t.policy.(io.Closer); ok && !already {
		return c.Close()
	}
	return nil
}

// BoundedPolicy is an in-process policy whose calls end by their context's deadline on
// their own: its work is metered, and the meter checks the context as the work goes. The
// transport runs its calls on the caller's goroutine instead of starting one per call to
// wait on (a goroutine, a wake-up of another thread and a context switch, on every hook
// of every request). The built-in content scanners are bounded.
type BoundedPolicy interface {
	ahp.Interceptor
	// EndsByDeadline marks the policy as bounded; it is never called.
	EndsByDeadline()
}

// run calls fn, recovering a panic into KindPolicy, and returns when fn does or when ctx
// ends, whichever comes first: fn runs in a goroutine of its own unless the policy is
// bounded, whose call returns by the deadline by itself.
func (t *inProcessTransport) run(ctx context.Context, fn func(context.Context) error) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fail(KindPolicy, "policy %s transport closed", t.name)
	}
	t.wg.Add(1)
	t.mu.Unlock()

	if t.bounded {
		defer t.wg.Done()
		err := t.call(ctx, fn)
		if ctx.Err() != nil {
			// Past the deadline, what the policy answered is not used, as when a call
			// in a goroutine of its own is left behind.
			return ctxFailure(ctx, "waiting for policy "+t.name)
		}
		return err
	}
	done := make(chan error, 1) // buffered: an abandoned call still finishes
	go func() {
		defer t.wg.Done()
		done <- t.call(ctx, fn)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctxFailure(ctx, "waiting for policy "+t.name)
	}
}

func (t *inProcessTransport) call(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			// A policy bug must not take the proxy down; it is a failure of this delivery.
			buf := make([]byte, 8<<10)
			buf = buf[:runtime.Stack(buf, false)]
			t.log.Error("in_process policy panicked", zap.String("policy", t.name),
				zap.String("panic", panicSummary(r)), zap.ByteString("stack", buf))
			err = fail(KindPolicy, "policy %s panicked", t.name)
		}
	}()
	if err := fn(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return ctxFailure(ctx, "in policy "+t.name)
		}
		return &Error{Kind: KindPolicy, Err: fmt.Errorf("policy %s: %w", t.name, err)}
	}
	return nil
}

// panicSummary names a panic without echoing arbitrary values, which may carry event
// content: runtime errors are safe to print, anything else is reported by type.
func panicSummary(r any) string {
	if re, ok := r.(runtime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("panic value of type %T", r)
}
