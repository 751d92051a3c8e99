package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
)

// The events of a lifecycle's boundaries: built with the request's identities, settled
// through the chain (or delivered to observers), and handed to the Auditor.

// newEvent starts an event of this lifecycle with a fresh identity.
func (x *lifecycle) newEvent(typ string) *ahp.Event {
	sess, turn := x.session, x.turn
	return &ahp.Event{ID: ahp.NewEventID(), Source: x.s.source, Type: typ, Time: eventTime(),
		Session: &sess, Turn: &turn}
}

// settle runs one interceptable boundary through the chain. With only observers
// subscribed the chain settles at once and dispatches the observations.
func (x *lifecycle) settle(ev *ahp.Event, caps ahp.Capabilities, ext ...string) *chain.Settlement {
	st := settledOrNone(x.s.intercept(x.ctx, ev, caps, ext...), ev)
	x.settlements = append(x.settlements, st)
	return st
}

// observe delivers an observe-only event and records it. Delivery runs concurrently so
// that a slow observer never delays the response it describes; the request still owns it
// and waits for it before completing (AHP spec, base/composition.md "Observers"). ev must not
// change afterwards.
func (x *lifecycle) observe(ev *ahp.Event, callID, toolName string) {
	x.s.traceObserved(x.ctx, ev)
	x.observing.Go(func() { x.s.chain.Observe(x.ctx, ev) })
	x.audit(ev, nil, DeliveryObserve, enforcement.Forwarded, callID, toolName)
}

// waitObservers returns once every observation this request started has completed or
// reached its bounded deadline: no delivery outlives the request.
func (x *lifecycle) waitObservers() {
	for _, st := range x.settlements {
		st.Wait()
	}
	x.observing.Wait()
}

// audit hands the enforced boundary to the Auditor.
func (x *lifecycle) audit(ev *ahp.Event, st *chain.Settlement, delivery string, action enforcement.Action, callID, toolName string) {
	if x.s.auditor == nil {
		return
	}
	rec := BoundaryRecord{
		Time: time.Now().UTC(), Route: x.rt.prefix, API: x.rt.api,
		EventID: ev.ID, EventType: ev.Type, ParentID: ev.ParentEventID,
		SessionID: x.session.ID, TurnID: x.turn.ID, CallID: callID, ToolName: toolName,
		Delivery: delivery, Enforcement: action, Event: ev,
		Permission: ahp.PermissionNone, Flow: ahp.FlowNone,
	}
	if ev.Model != nil {
		rec.Model = ev.Model.ID
	}
	switch ev.Type {
	case ahp.EventModelRequestBefore:
		rec.Reapplied = x.rw.applied
	case ahp.EventToolAfter, ahp.EventTurnStart:
		rec.Resettled = x.rw.resettling
	case ahp.EventModelResponseAfter, ahp.EventToolBefore, ahp.EventTurnFinishBefore:
		rec.Held = x.mode.heldAs()
	}
	rec.UpstreamStatus = x.upstreamStatus
	if st != nil && st.Event != nil && st.Event != ev {
		rec.Original = ev // the chain copies on write: ev is the event as it was judged first
	}
	rec.settled(st)
	rec.Approval, x.approval = x.approval, nil
	x.s.auditor.OnBoundary(x.ctx, rec)
}

// injections turns a settlement's accepted inject effects into messages with fresh
// identities (new injected items get new identities), split by
// delivery time. Fresh ids also keep an injected item from being mistaken for an
// existing native message when the request is re-rendered.
func (x *lifecycle) injections(st *chain.Settlement, eventID string) (now, nextTurn []ahp.Message) {
	for i, eff := range st.Injections {
		var msgs []ahp.Message
		if err := json.Unmarshal(eff.Value, &msgs); err != nil {
			// The chain validated the value; this would be an engine defect.
			x.s.logAt(x.ctx, zapcore.ErrorLevel, "accepted inject effect is not a message list", zap.String("event", eventID), zap.Error(err))
			continue
		}
		for j := range msgs {
			m := &msgs[j]
			m.ID = derive("inj_", eventID, strconv.Itoa(i), strconv.Itoa(j))
			m.Synthesized = true
			for k := range m.Parts {
				m.Parts[k].ID = m.ID + "." + strconv.Itoa(k)
				m.Parts[k].Synthesized = true
			}
		}
		if eff.DeliverAt == ahp.DeliverNextTurn {
			nextTurn = append(nextTurn, msgs...)
		} else {
			now = append(now, msgs...)
		}
	}
	return now, nextTurn
}

// cloneMessages copies messages and their part lists, so that events handed to the chain
// never alias the lifecycle's working list.
func cloneMessages(in []ahp.Message) []ahp.Message {
	n := 0
	for i := range in {
		n += len(in[i].Parts)
	}
	out := make([]ahp.Message, len(in))
	parts := make([]ahp.Part, 0, n) // one backing array: a long conversation has many messages
	for i, m := range in {
		out[i] = m
		if m.Parts != nil {
			start := len(parts)
			parts = append(parts, m.Parts...)
			out[i].Parts = parts[start:len(parts):len(parts)]
		}
	}
	return out
}

// isJSONObject reports whether raw is a JSON object (tool.input must be one).
func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// jsonStatus encodes an HTTP status for error.status.
func jsonStatus(code int) json.RawMessage { return json.RawMessage(strconv.Itoa(code)) }
