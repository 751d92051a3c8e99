package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
)

// compose encodes the settlement of the backend's own chain as the effects of ONE
// hooks/intercept reply. The harness applies that reply to the event it sent us exactly as
// the chain applied the policies' replies one after another, because:
//
//   - Modification: the policies' edits were chained (each policy saw the previous ones
//     applied) and only the final value is sent. When the request advertises replace for
//     the target, one modify replace carries the final value (two replaces from two
//     policies become one). Otherwise every accepted edit was a merge, and one merge
//     carries their combined delta: the appended messages for a list target, the changed
//     or added top-level members for an object target (merge cannot remove, so nothing
//     is lost).
//   - Decisions are taken from the settled state rather than concatenated, since the
//     order-of-application rules differ inside one reply (modifications first) and across
//     replies (in turn): an allow followed by another policy's edit was reset by the
//     chain and is not sent; deny > ask > allow collapses to the one winning effect; a
//     supplied result (return) survives only when no later edit, deny or stop discarded
//     it; flow stop keeps the first stop's reason; continue instructions are sent in order.
//   - A deny is the first accepted deny (its reason and code, hookproxy.denied when the
//     policy gave none). A fail-closed policy failure is sent as deny when deny is
//     advertised, else as flow stop when stop is; when neither is, compose fails and the
//     request is answered with -32004, so the harness's own failure policy decides.
//   - Injections and user-facing messages are sent in acceptance order.
//
// The reply is then checked with chain.ValidateReply against the event as received (see
// checkReply) before it leaves.
func compose(ev *ahp.Event, caps *ahp.Capabilities, st *chain.Settlement) ([]ahp.Effect, error) {
	effects := []ahp.Effect{}
	if st.Modified {
		m, err := modification(ev, st.Event, caps)
		if err != nil {
			return nil, err
		}
		effects = append(effects, m)
	}
	effects = append(effects, st.Injections...)
	if st.Candidate != nil {
		effects = append(effects, ahp.Effect{Type: ahp.EffectReturn, Value: st.Candidate.Value})
	}
	switch st.Flow {
	case ahp.FlowStop:
		reason := st.StopReason
		if reason == "" {
			reason = "Stopped by policy."
		}
		effects = append(effects, ahp.Effect{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: reason})
	case ahp.FlowContinue:
		if len(st.Instructions) == 0 {
			effects = append(effects, ahp.Effect{Type: ahp.EffectFlow, Operation: ahp.OpContinue})
		}
		for _, in := range st.Instructions {
			effects = append(effects, ahp.Effect{Type: ahp.EffectFlow, Operation: ahp.OpContinue, Instruction: &in})
		}
	}
	switch st.Permission {
	case ahp.PermissionDeny:
		d, err := denial(caps, st)
		if err != nil {
			return nil, err
		}
		if d != nil {
			effects = append(effects, *d)
		}
	case ahp.PermissionAsk:
		effects = append(effects, ahp.Effect{Type: ahp.EffectAsk})
	case ahp.PermissionAllow:
		effects = append(effects, ahp.Effect{Type: ahp.EffectAllow})
	}
	for _, m := range st.Messages {
		effects = append(effects, ahp.Effect{Type: ahp.EffectMessage, Text: &m})
	}
	return effects, nil
}

// denial returns the refusal effect of a settled deny (nil when a flow stop already sent
// says the same thing).
func denial(caps *ahp.Capabilities, st *chain.Settlement) (*ahp.Effect, error) {
	reason, code := "Denied by policy.", chain.CodeDenied
	if st.Denial != nil {
		reason, code = st.Denial.Reason, st.Denial.Code
	}
	if caps.Has(ahp.EffectDeny) {
		return &ahp.Effect{Type: ahp.EffectDeny, Reason: reason, Code: code}, nil
	}
	// Only a fail-closed failure reaches here: an explicit deny is accepted only where it
	// was advertised.
	if st.Flow == ahp.FlowStop {
		return nil, nil
	}
	if caps.Has(ahp.EffectFlow) && caps.Flow != nil && slices.Contains(caps.Flow.Operations, ahp.OpStop) {
		return &ahp.Effect{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: reason}, nil
	}
	return nil, errors.New("a fail-closed policy failure cannot be expressed: neither deny nor flow stop is advertised")
}

// modification builds the single modify effect that takes ev's target to eff's.
func modification(ev, eff *ahp.Event, caps *ahp.Capabilities) (ahp.Effect, error) {
	target := ahp.EventBounds[ev.Type].Target
	ops := caps.Modify[target]
	if target == "" || !caps.Has(ahp.EffectModify) || (!ops.Replace && !ops.Merge) {
		return ahp.Effect{}, fmt.Errorf("the policies modified %s, which was not advertised", ev.Type)
	}
	if target == ahp.TargetInput {
		if ev.Tool == nil || eff.Tool == nil {
			return ahp.Effect{}, errors.New("modify input without a tool")
		}
		if ops.Replace {
			return modify(target, ahp.OpReplace, eff.Tool.Input), nil
		}
		delta, err := objectDelta(ev.Tool.Input, eff.Tool.Input)
		if err != nil {
			return ahp.Effect{}, err
		}
		return modify(target, ahp.OpMerge, delta), nil
	}
	// Every other target the chain can edit is the items message list.
	value := eff.Items
	op := ahp.OpReplace
	if !ops.Replace {
		appended, err := appendedMessages(ev.Items, eff.Items)
		if err != nil {
			return ahp.Effect{}, err
		}
		value, op = appended, ahp.OpMerge
	}
	if value == nil {
		value = []ahp.Message{}
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return ahp.Effect{}, err
	}
	return modify(target, op, raw), nil
}

func modify(target, op string, value json.RawMessage) ahp.Effect {
	return ahp.Effect{Type: ahp.EffectModify, Target: target, Operation: op, Value: value}
}

// appendedMessages returns the messages that merges appended to orig to give final.
func appendedMessages(orig, final []ahp.Message) ([]ahp.Message, error) {
	if len(final) < len(orig) {
		return nil, errors.New("merge-only edits shortened the message list")
	}
	for i := range orig {
		a, err := json.Marshal(orig[i])
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(final[i])
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(a, b) {
			return nil, fmt.Errorf("merge-only edits changed existing message %d", i)
		}
	}
	return final[len(orig):], nil
}

// objectDelta returns the top-level members of final that orig lacks or holds with another
// value: the shallow merge that takes orig to final.
func objectDelta(orig, final json.RawMessage) (json.RawMessage, error) {
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(orig, &a); err != nil {
		return nil, fmt.Errorf("current input: %w", err)
	}
	if err := json.Unmarshal(final, &b); err != nil {
		return nil, fmt.Errorf("modified input: %w", err)
	}
	delta := map[string]json.RawMessage{}
	for k, v := range b {
		if old, ok := a[k]; !ok || !jsonEqual(old, v) {
			delta[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return nil, fmt.Errorf("merge-only edits removed input member %q", k)
		}
	}
	return json.Marshal(delta)
}

// jsonEqual compares two JSON values by their compact encodings.
func jsonEqual(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// checkReply validates the combined reply as a harness would, against ev as received.
func checkReply(reply []byte, ev *ahp.Event, caps *ahp.Capabilities) error {
	current := map[string]json.RawMessage{}
	target := ahp.EventBounds[ev.Type].Target
	switch {
	case target == ahp.TargetInput:
		if ev.Tool != nil {
			current[target] = ev.Tool.Input
		}
	case target == ahp.TargetOutput || target == ahp.TargetRequest || target == ahp.TargetResponse ||
		(target == ahp.TargetPrompt && ev.Type == ahp.EventTurnStart):
		// The targets the chain edits in items; the others it never offers to policies.
		items := ev.Items
		if items == nil {
			items = []ahp.Message{}
		}
		raw, err := json.Marshal(items)
		if err != nil {
			return err
		}
		current[target] = raw
	}
	_, err := chain.ValidateReply(reply, chain.ReplyContext{
		RequestID:    ev.ID,
		EventType:    ev.Type,
		Capabilities: caps,
		Current:      current,
	})
	return err
}
