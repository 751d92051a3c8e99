package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
func compose(ev *ahp.Event, caps *ahp.Capabilities, st *chain.Settlement, textOffered bool) ([]ahp.Effect, map[string]json.RawMessage, error) {
	effects := []ahp.Effect{}
	var ext map[string]json.RawMessage
	if st.Modified {
		var reds []ahp.TextRedaction
		if textOffered {
			reds = textRedactions(st)
		}
		m, ok, err := modification(ev, st.Event, caps, reds)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			effects = append(effects, m)
		}
		if len(reds) > 0 && !isReplace(m, ok) {
			raw, err := json.Marshal(reds)
			if err != nil {
				return nil, nil, err
			}
			ext = map[string]json.RawMessage{ahp.ExtRedactText: raw}
		}
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
			return nil, nil, err
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
	return effects, ext, nil
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

// modification builds the single modify effect that takes ev's target to eff's. reds are
// the policies' accepted hookproxy.redact_text entries, relayed beside it when no replace
// is advertised: the merge then carries only what was appended, and ok is false when
// nothing was.
func modification(ev, eff *ahp.Event, caps *ahp.Capabilities, reds []ahp.TextRedaction) (e ahp.Effect, ok bool, err error) {
	target := ahp.EventBounds[ev.Type].Target
	ops := caps.Modify[target]
	if target == "" || !caps.Has(ahp.EffectModify) || (!ops.Replace && !ops.Merge) {
		return ahp.Effect{}, false, fmt.Errorf("the policies modified %s, which was not advertised", ev.Type)
	}
	if target == ahp.TargetInput {
		if ev.Tool == nil || eff.Tool == nil {
			return ahp.Effect{}, false, errors.New("modify input without a tool")
		}
		if ops.Replace {
			return modify(target, ahp.OpReplace, eff.Tool.Input), true, nil
		}
		delta, err := objectDelta(ev.Tool.Input, eff.Tool.Input)
		if err != nil {
			return ahp.Effect{}, false, err
		}
		return modify(target, ahp.OpMerge, delta), true, nil
	}
	// Every other target the chain can edit is the items message list.
	value := eff.Items
	op := ahp.OpReplace
	if !ops.Replace {
		appended, err := appendedMessages(redactedInPlace(ev.Items, reds), eff.Items)
		if err != nil {
			return ahp.Effect{}, false, err
		}
		if len(appended) == 0 && len(reds) > 0 {
			return ahp.Effect{}, false, nil // only redactions in place: the extension says it all
		}
		value, op = appended, ahp.OpMerge
	}
	if value == nil {
		value = []ahp.Message{}
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return ahp.Effect{}, false, err
	}
	return modify(target, op, raw), true, nil
}

// isReplace reports whether m is a modify replace (which carries every edit itself).
func isReplace(m ahp.Effect, ok bool) bool { return ok && m.Operation == ahp.OpReplace }

// textRedactions collects the hookproxy.redact_text entries of the accepted replies, in
// chain order: applied one after the other to the event the harness sent, they give the
// edits the chain made in place (each entry's find is in the text the harness sent, and a
// placeholder never holds another entry's find).
func textRedactions(st *chain.Settlement) []ahp.TextRedaction {
	var out []ahp.TextRedaction
	for _, e := range st.Extensions {
		if e.Key != ahp.ExtRedactText {
			continue
		}
		var reds []ahp.TextRedaction
		if json.Unmarshal(e.Value, &reds) == nil {
			out = append(out, reds...)
		}
	}
	return out
}

// redactedInPlace is items with reds applied as the chain applies them (a copy; items is
// not changed), so that what a merge appended can be told from what was edited in place.
func redactedInPlace(items []ahp.Message, reds []ahp.TextRedaction) []ahp.Message {
	if len(reds) == 0 {
		return items
	}
	out := slices.Clone(items)
	for _, r := range reds {
		for mi := range out {
			if out[mi].ID != r.Message {
				continue
			}
			for pi := range out[mi].Parts {
				p := &out[mi].Parts[pi]
				if p.ID != r.Part || p.Text == nil || !strings.Contains(*p.Text, r.Find) {
					continue
				}
				out[mi].Parts = slices.Clone(out[mi].Parts)
				p = &out[mi].Parts[pi]
				t := strings.ReplaceAll(*p.Text, r.Find, r.Replace)
				p.Text = &t
			}
			break
		}
	}
	return out
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
