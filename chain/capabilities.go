package chain

// Honest per-request capabilities (AHP-CAP-001, AHP spec, capability-auth.md "Discovery and
// honest capabilities"): each subscription is offered only what the host can enforce at this
// boundary, within the event's bound, for this subscriber's view and with the remaining
// continuation allowance.

import (
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// targetLoc is where the engine finds and applies a boundary's modification target on
// the Event type.
type targetLoc int

const (
	locNone  targetLoc = iota // the engine cannot apply edits of this target
	locInput                  // Tool.Input (object)
	locItems                  // Items (canonical message list)
)

// locate maps the boundary's target to a field of ahp.Event. Targets whose event field
// the Event type does not carry (message.messages, instructions, summary, workspace,
// elicitation answers) are not applicable, so they are never advertised.
func locate(ev *ahp.Event) (string, targetLoc) {
	b, ok := ahp.EventBounds[ev.Type]
	if !ok || b.Target == "" {
		return "", locNone
	}
	switch b.Target {
	case ahp.TargetInput:
		if ev.Tool != nil && isJSONObject(ev.Tool.Input) {
			return b.Target, locInput
		}
	case ahp.TargetOutput, ahp.TargetRequest, ahp.TargetResponse:
		return b.Target, locItems
	case ahp.TargetPrompt:
		if ev.Type == ahp.EventTurnStart { // user.message.inbound keeps it in message.messages
			return b.Target, locItems
		}
	}
	return b.Target, locNone
}

// currentValue is the effective value of the boundary target of ev.
func currentValue(ev *ahp.Event, loc targetLoc) *value {
	switch loc {
	case locInput:
		return &value{kind: kindObject, present: true, obj: ev.Tool.Input}
	case locItems:
		return &value{kind: kindMessages, present: true, msgs: ev.Items}
	}
	return &value{}
}

// withValue returns a shallow copy of ev with the target replaced by v; ev is untouched.
func withValue(ev *ahp.Event, loc targetLoc, v *value) *ahp.Event {
	n := *ev
	switch loc {
	case locInput:
		t := *ev.Tool
		t.Input = v.obj
		n.Tool = &t
	case locItems:
		n.Items = v.msgs
		if n.Items == nil {
			n.Items = []ahp.Message{}
		}
	}
	return &n
}

// targetEqual reports whether the effective target of a and b is the same value.
func targetEqual(a, b *ahp.Event, loc targetLoc) bool {
	switch loc {
	case locInput:
		return jsonEqual(a.Tool.Input, b.Tool.Input)
	case locItems:
		return messagesEqual(a.Items, b.Items)
	}
	return true
}

// narrow builds the advertisement for one subscription from the host's capabilities:
//   - effects outside the event bound are dropped;
//   - modify keeps only the boundary's own target, only if the engine can apply it, and
//     loses whole-list replace when the subscriber's view withholds text (metadata/omit
//     parts or gaps) — and, as our conservative choice, attachments — because a
//     replacement could not carry what the subscriber never saw (AHP-EDIT-001);
//     modify disappears when no operation remains;
//   - flow keeps the bound's operations; continue needs the host's allowance counters and
//     carries them, even when none is left (staging then rejects a continue unless one
//     was already accepted in this chain);
//   - inject needs append and at least one deliverAt;
//   - at elicitation boundaries only message is offered (the mode is unknown here).
func narrow(host *ahp.Capabilities, ev *ahp.Event, target string, loc targetLoc, w withheld) *ahp.Capabilities {
	bound := ahp.EventBounds[ev.Type]
	out := &ahp.Capabilities{Effects: make([]string, 0, len(host.Effects))}
	for _, e := range host.Effects {
		if !slices.Contains(bound.Effects, e) || slices.Contains(out.Effects, e) {
			continue
		}
		if isElicitation(ev.Type) && e != ahp.EffectMessage {
			// Elicitation control depends on the elicitation's mode and action, which the
			// Event type does not carry; what cannot be checked is not offered.
			continue
		}
		switch e {
		case ahp.EffectModify:
			ops, ok := host.Modify[target]
			if !ok || loc == locNone {
				continue
			}
			if loc == locItems && (w.text || w.attachments) {
				ops.Replace = false
			}
			if !ops.Replace && !ops.Merge {
				continue
			}
			out.Modify = map[string]ahp.ModifyOps{target: ops}
		case ahp.EffectFlow:
			f := narrowFlow(host.Flow, bound.FlowOps, ev)
			if f == nil {
				continue
			}
			out.Flow = f
		case ahp.EffectInject:
			if host.Inject == nil || !host.Inject.Context.Append {
				continue
			}
			var at []string
			for _, d := range host.Inject.Context.DeliverAt {
				if (d == ahp.DeliverNow || d == ahp.DeliverNextTurn) && !slices.Contains(at, d) {
					at = append(at, d)
				}
			}
			if len(at) == 0 {
				continue
			}
			out.Inject = &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true, DeliverAt: at}}
		}
		out.Effects = append(out.Effects, e)
	}
	if host.Elicitation != nil && isElicitation(ev.Type) {
		el := *host.Elicitation
		out.Elicitation = &el
	}
	return out
}

func narrowFlow(host *ahp.FlowCaps, boundOps []string, ev *ahp.Event) *ahp.FlowCaps {
	if host == nil {
		return nil
	}
	f := &ahp.FlowCaps{}
	for _, op := range host.Operations {
		if !slices.Contains(boundOps, op) || slices.Contains(f.Operations, op) {
			continue
		}
		if op == ahp.OpContinue {
			// An exhausted allowance (0) is still advertised, with its count: the backend
			// learns there is none left, and a continue is then rejected whole unless an
			// earlier response of this chain already asked for one (the interop scenario
			// flow-exhausted-allowance-rejects-message).
			rem := host.RemainingContinuations
			if rem == nil {
				continue
			}
			count := host.ContinuationCount
			if count == nil {
				count = ev.ContinuationCount
			}
			if count == nil {
				continue // the advertisement would be incomplete
			}
			f.RemainingContinuations, f.ContinuationCount, f.MaxContinuations = rem, count, host.MaxContinuations
		}
		f.Operations = append(f.Operations, op)
	}
	if len(f.Operations) == 0 {
		return nil
	}
	return f
}
