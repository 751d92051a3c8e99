package chain

// Observation delivery (AHP spec, base/composition.md "Observers"), including the
// hook.failure audit event.
//
// Observations never take part in decisions and never delay settlement: they are started
// only after decision-making ends. The hook call owns them: Settlement.Wait (and Observe)
// return only when every delivery has completed or hit its bounded deadline, so no
// delivery outlives the call. Interruption starts none.

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// delivery is one hooks/observe notification of ev to one subscription. The view is
// projected in the delivery's own goroutine, so even projection never delays settlement.
type delivery struct {
	sub *subscription
	ev  *ahp.Event
}

// Observe delivers an observe-only event (turn.end, model.error, ...) to every matching
// observe subscription, each through its own content selection, concurrently and each
// bounded by Options.ObserveTimeout. It returns when all deliveries are done. An already
// interrupted ctx starts no delivery.
func (c *Chain) Observe(ctx context.Context, ev *ahp.Event) {
	if ev == nil || ctx.Err() != nil {
		return
	}
	p := c.plan(ev.Type)
	if len(p.observers) == 0 {
		return
	}
	ds := make([]delivery, 0, len(p.observers))
	for _, s := range p.observers {
		ds = append(ds, delivery{sub: s, ev: ev})
	}
	if wait := c.dispatch(ctx, ds); wait != nil {
		wait()
	}
}

// dispatch starts every delivery concurrently and returns the function that waits for
// all of them (nil when there is nothing to wait for). Each delivery is bounded by the
// observe timeout and by ctx: interruption cancels pending I/O instead of waiting for it.
func (c *Chain) dispatch(ctx context.Context, ds []delivery) func() {
	if len(ds) == 0 {
		return nil
	}
	var wg sync.WaitGroup
	wg.Add(len(ds))
	for _, d := range ds {
		go func() {
			defer wg.Done()
			c.deliver(ctx, d)
		}()
	}
	return wg.Wait
}

func (c *Chain) deliver(ctx context.Context, d delivery) {
	octx, cancel := context.WithTimeout(ctx, c.opts.ObserveTimeout)
	defer cancel()
	// Each observer sees the event through its own content selection (AHP spec,
	// base/composition.md "Observers").
	view, _ := project(d.ev, &d.sub.sel)
	params := &ahp.ObserveParams{ProtocolVersion: ahp.ProtocolVersion, Event: view}
	if err := d.sub.backend.tr.Observe(octx, params); err != nil {
		// Observation is best effort: a failed delivery is recorded locally only. It does
		// not raise hook.failure, which would start work after the call's own deliveries.
		c.log.Debug("observation failed",
			zap.String("backend", d.sub.backend.id), zap.Int("subscription", d.sub.index),
			zap.String("event", d.ev.Type), zap.Error(err))
	}
}

// failureDeliveries builds the hook.failure observations of the operational failures of
// one boundary, for every observe subscription selecting hook.failure. The event carries
// only the backend id, the failure kind and the policy: never backend text or secrets.
func (c *Chain) failureDeliveries(parent *ahp.Event, failures []hookFailure) []delivery {
	if len(failures) == 0 {
		return nil
	}
	p := c.plan(ahp.EventHookFailure)
	if len(p.observers) == 0 {
		return nil
	}
	source := c.opts.Source
	if source == "" {
		source = parent.Source
	}
	var ds []delivery
	for _, f := range failures {
		ev := &ahp.Event{
			ID:            ahp.NewEventID(),
			Source:        source,
			Type:          ahp.EventHookFailure,
			Time:          time.Now().UTC().Format(time.RFC3339Nano),
			Session:       parent.Session,
			ParentEventID: parent.ID,
			Failure:       &ahp.Failure{BackendID: f.backendID, Reason: string(f.kind), Policy: f.policy},
		}
		for _, s := range p.observers {
			ds = append(ds, delivery{sub: s, ev: ev})
		}
	}
	return ds
}
