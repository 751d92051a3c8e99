package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// failClosedReason is the generic, model-safe reason of a synthetic denial: it names the
// backend and never carries network details, credentials or backend content (AHP-FAIL-001).
func failClosedReason(backendID string) string {
	return fmt.Sprintf("Required policy backend %s unavailable.", backendID)
}

// invalidReplyReason is the model-safe reason of a fail-closed denial caused by a reply
// the backend did send but that was refused for a protocol reason: it names the backend
// and says its reply was refused, never what the reply held.
func invalidReplyReason(backendID string) string {
	return fmt.Sprintf("Required policy backend %s sent a reply that violates the hook protocol; it was refused.", backendID)
}

// hookFailure is one operational failure to report through hook.failure (AHP spec,
// interaction-payloads.md).
type hookFailure struct {
	backendID string
	kind      transport.Kind
	policy    string
}

// Intercept runs the interceptor chain of one boundary and returns its settlement.
//
// caps is what the host can enforce at this boundary; each subscription is offered the
// honest subset of it (AHP-CAP-001). ev is not modified; Settlement.Event is the effective
// event with accepted modifications applied (the same pointer as ev when nothing changed).
//
// Intercept returns as soon as decision-making ends. Observations of the settled event
// start afterwards and run concurrently; the caller owns them and must call
// Settlement.Wait before its hook call completes. Neither ev nor Settlement.Event may be
// mutated until Wait returns.
//
// ext names the hookproxy extensions the host declares at this boundary; the only one the
// chain knows is ahp.ExtRedactText (redact_text.go), offered to each subscription that may
// modify the boundary's message list.
func (c *Chain) Intercept(ctx context.Context, ev *ahp.Event, caps ahp.Capabilities, ext ...string) *Settlement {
	st := c.intercept(ctx, ev, caps, ext)
	if c.opts.Tap != nil && ev != nil {
		// After settlement, before the caller enforces it: the tap only copies what it
		// keeps (Options.Tap), so this costs the request a copy, never a backend call.
		// caps and ext are copied here, in the branch, so that without a tap neither
		// escapes to the heap.
		offered := caps
		c.opts.Tap(&Tapped{Event: ev, Capabilities: &offered, Extensions: slices.Clone(ext), Settlement: st})
	}
	return st
}

func (c *Chain) intercept(ctx context.Context, ev *ahp.Event, caps ahp.Capabilities, ext []string) *Settlement {
	st := &Settlement{Event: ev, Permission: ahp.PermissionNone, Flow: ahp.FlowNone}
	if ev == nil {
		return st
	}
	p := c.plan(ev.Type)
	if len(p.entries) == 0 {
		return st
	}

	state := initialState()
	eff := ev // the accepted effective event
	target, loc := locate(ev)
	offerText := loc == locItems && slices.Contains(ext, ahp.ExtRedactText)
	var (
		settled, interrupted bool
		called               int
		pending              []*subscription // observers and downgraded interceptors, in order
		downgraded           []bool
		failures             []hookFailure
		modified             bool
		stopReason           string
	)

	for i, s := range p.entries {
		if s.mode != registration.ModeIntercept {
			pending = append(pending, s)
			downgraded = append(downgraded, false)
			continue
		}
		if settled {
			// After deny, stop or fail-closed the remaining interceptors receive the settled
			// boundary by hooks/observe, with their own content selection (AHP spec,
			// base/composition.md "Observers").
			pending = append(pending, s)
			downgraded = append(downgraded, true)
			continue
		}
		if ctx.Err() != nil {
			// Interruption: no new deliveries of any kind (AHP-COMP-001).
			interrupted = true
			st.Records = append(st.Records, notCalled(p.entries[i:])...)
			break
		}

		// AHP-COMP-001: serial, in registration order; never concurrent.
		view, w := project(eff, &s.sel)
		params := &ahp.InterceptParams{
			ProtocolVersion: ahp.ProtocolVersion,
			Event:           view,
			Capabilities:    narrow(&caps, eff, target, loc, w),
		}
		if offerText && canModify(params.Capabilities, target) {
			params.Extensions = textRedactionOffer(target)
		}
		if called > 0 {
			// Later interceptors learn the settled decision so far (params.state).
			snap := state
			params.State = &snap
		}
		called++

		rec := Record{BackendID: s.backend.id, Subscription: s.index, Mode: s.mode, Policy: s.policy}
		staged, err := c.exchange(ctx, s, eff, loc, target, params, state, &rec)
		if ctx.Err() != nil {
			// A cancelled exchange is an interruption, not a policy failure: nothing from it
			// is accepted and no failure policy applies (AHP-EDIT-001).
			interrupted = true
			rec.Outcome, rec.FailureKind, rec.Policy = OutcomeFailed, transport.KindCancelled, ""
			st.Records = append(st.Records, rec)
			st.Records = append(st.Records, notCalled(p.entries[i+1:])...)
			break
		}
		if err != nil {
			// AHP-FAIL-001: the subscription's failure policy, applied exactly once.
			kind := transport.KindOf(err)
			rec.Outcome, rec.FailureKind, rec.Detail = OutcomeFailed, kind, err.Error()
			rec.Violation, rec.OffendingEffect = transport.ViolationOf(err)
			st.Records = append(st.Records, rec)
			failures = append(failures, hookFailure{backendID: s.backend.id, kind: kind, policy: s.policy})
			// Debug only: the host logs each failed call from the settlement's records at
			// warn, with its request and event ids, so a warning here would say it twice.
			c.log.Debug("interceptor failed",
				zap.String("backend", s.backend.id), zap.Int("subscription", s.index),
				zap.String("event", ev.Type), zap.String("eventId", ev.ID), zap.String("kind", string(kind)),
				zap.String("policy", s.policy), zap.Error(err))
			if s.failClosed {
				// Synthetic denial; the candidate cannot bypass it.
				state.Permission = ahp.PermissionDeny
				state.Candidate = nil
				st.Denial = &Denial{Reason: failClosedReason(s.backend.id), Code: CodeFailClosed, BackendID: s.backend.id, Synthetic: true}
				if transport.InvalidReply(err) {
					// The backend answered, wrongly: a protocol fault, not an outage.
					st.Denial.Reason, st.Denial.Code = invalidReplyReason(s.backend.id), CodeBackendInvalidReply
				}
				settled = true
			}
			// fail-open: continue with the previously accepted event and state.
			continue
		}

		// Publish atomically (AHP-EDIT-001).
		if staged.Changed {
			eff = withValue(eff, loc, staged.values[target])
			modified = true
		}
		state = staged.State
		st.Messages = append(st.Messages, staged.Messages...)
		st.Extensions = appendExtensions(st.Extensions, s.backend.id, staged.Extensions)
		if len(staged.Effects) == 0 && !staged.Changed { // Changed alone: hookproxy.redact_text
			rec.Outcome = OutcomeNoEffect
		} else {
			rec.Outcome = OutcomeAccepted
			rec.Effects = make([]string, len(staged.Effects))
			for j := range staged.Effects {
				rec.Effects[j] = staged.Effects[j].Type
				if staged.Effects[j].Type == ahp.EffectFlow && staged.Effects[j].Operation == ahp.OpStop && stopReason == "" {
					stopReason = staged.Effects[j].Reason
				}
			}
		}
		st.Records = append(st.Records, rec)
		if staged.deny != nil {
			code := staged.deny.Code
			if code == "" {
				code = CodeDenied
			}
			st.Denial = &Denial{Reason: staged.deny.Reason, Code: code, BackendID: s.backend.id}
		}
		// AHP-COMP-001: an accepted deny or flow stop ends decision-making.
		if state.Permission == ahp.PermissionDeny || state.Flow == ahp.FlowStop {
			state.Candidate = nil
			settled = true
		}
	}

	if interrupted {
		// An interrupted outcome keeps accepted modifications, injections, deny and stop,
		// but not what would let the operation proceed on its own: allow, a supplied
		// result, or a continuation (AHP-EDIT-001).
		if state.Permission == ahp.PermissionAllow {
			state.Permission = ahp.PermissionNone
		}
		state.Candidate = nil
		if state.Flow == ahp.FlowContinue {
			state.Flow = ahp.FlowNone
		}
		state.Instructions = nil
	}

	st.Event = eff
	st.Permission = state.Permission
	st.Flow = state.Flow
	st.Candidate = state.Candidate
	st.Injections = state.Injections
	st.Interrupted = interrupted
	st.Instructions = state.Instructions
	if state.Flow == ahp.FlowStop {
		st.StopReason = stopReason
	}
	if modified {
		st.Modified = !targetEqual(ev, eff, loc)
	}
	if interrupted {
		// Interruption MUST NOT start further best-effort observations — not even
		// hook.failure reports of failures that happened before it (AHP spec,
		// base/composition.md "Observers").
		return st
	}

	// Observations start only now, after settlement, with accepted effective content.
	deliveries := make([]delivery, 0, len(pending)+len(failures))
	for j, s := range pending {
		deliveries = append(deliveries, delivery{sub: s, ev: eff})
		rec := Record{BackendID: s.backend.id, Subscription: s.index, Mode: s.mode, Outcome: OutcomeObserved}
		if downgraded[j] {
			rec.Policy = s.policy
		}
		st.Records = append(st.Records, rec)
	}
	deliveries = append(deliveries, c.failureDeliveries(ev, failures)...)
	st.wait = c.dispatch(ctx, deliveries)
	return st
}

// exchange performs one hooks/intercept exchange under the subscription deadline and
// validates and stages the reply against the full effective event.
func (c *Chain) exchange(ctx context.Context, s *subscription, eff *ahp.Event, loc targetLoc, target string,
	params *ahp.InterceptParams, state ahp.State, rec *Record) (*Staged, error) {
	// AHP-FAIL-002: the deadline starts at dispatch and covers credentials, connect,
	// write, backend processing and read; nothing extends it. Its timer is made only when
	// something waits on it (deadline.go).
	cctx, cancel := withLazyDeadline(ctx, s.timeout)
	start := time.Now()
	frame, err := s.backend.tr.Intercept(cctx, eff.ID, params)
	late := cctx.Err()
	cancel()
	rec.Latency = time.Since(start)
	if err != nil {
		return nil, err
	}
	if late != nil {
		// A reply that arrives after the deadline MUST be ignored (AHP-FAIL-002).
		if errors.Is(late, context.DeadlineExceeded) {
			return nil, &transport.Error{Kind: transport.KindTimeout, Err: errors.New("reply arrived after the deadline")}
		}
		return nil, &transport.Error{Kind: transport.KindCancelled, Err: late}
	}
	sg := &stager{
		requestID:  eff.ID,
		eventType:  eff.Type,
		contextual: true,
		caps:       params.Capabilities,
		state:      state,
	}
	sg.bound, sg.hasBound = ahp.EventBounds[eff.Type]
	sg.current = func(t string, k valueKind) (*value, error) {
		if t != target || loc == locNone {
			return nil, invalidf("modify %s cannot be applied at %s", t, eff.Type)
		}
		return currentValue(eff, loc), nil
	}
	staged, err := sg.stage(frame)
	if err != nil || params.Extensions[ahp.ExtRedactText] == nil {
		return staged, err
	}
	if err := applyTextRedactions(staged, params.Event, eff, loc, target); err != nil {
		return nil, err
	}
	return staged, nil
}

// notCalled records the intercept subscriptions among subs that were never called.
func notCalled(subs []*subscription) []Record {
	var out []Record
	for _, s := range subs {
		if s.mode == registration.ModeIntercept {
			out = append(out, Record{BackendID: s.backend.id, Subscription: s.index, Mode: s.mode, Outcome: OutcomeNotCalled, Policy: s.policy})
		}
	}
	return out
}

// appendExtensions adds a reply's result extensions to the settlement's, in key order so
// that the settlement does not depend on map iteration.
func appendExtensions(dst []ReplyExtension, backendID string, ext map[string]json.RawMessage) []ReplyExtension {
	if len(ext) == 0 {
		return dst
	}
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = append(dst, ReplyExtension{BackendID: backendID, Key: k, Value: ext[k]})
	}
	return dst
}
