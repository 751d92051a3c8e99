package chain

// Stage three of reply staging: the typed values of modification targets, and the staging of
// the validated effects in order over the current state.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// valueKind is the value type of a modification target.
type valueKind int

const (
	kindAny       valueKind = iota // wire-level content: a message list or an object
	kindMessages                   // canonical message list
	kindTextParts                  // text-part list
	kindObject                     // JSON object
)

// targetKind returns the value type of target at eventType; at wire level ("") content
// may be either a message list or an object.
func targetKind(eventType, target string) (valueKind, bool) {
	switch target {
	case ahp.TargetOutput, ahp.TargetPrompt, ahp.TargetRequest, ahp.TargetResponse:
		return kindMessages, true
	case ahp.TargetInstructions, ahp.TargetSummary:
		return kindTextParts, true
	case ahp.TargetInput, ahp.TargetWorkspace:
		return kindObject, true
	case ahp.TargetContent:
		switch eventType {
		case ahp.EventUserElicitationResult:
			return kindObject, true
		case ahp.EventUserMessageOutbound:
			return kindMessages, true
		}
		return kindAny, true
	}
	return 0, false
}

// value is the typed current or staged value of one modification target.
type value struct {
	kind    valueKind
	present bool
	msgs    []ahp.Message
	parts   []ahp.Part
	obj     json.RawMessage
}

func (v *value) encode() (json.RawMessage, error) {
	switch v.kind {
	case kindMessages:
		if v.msgs == nil {
			return json.RawMessage("[]"), nil
		}
		return json.Marshal(v.msgs)
	case kindTextParts:
		if v.parts == nil {
			return json.RawMessage("[]"), nil
		}
		return json.Marshal(v.parts)
	case kindObject:
		if v.obj == nil {
			return json.RawMessage("null"), nil
		}
		return v.obj, nil
	}
	return nil, errors.New("no value")
}

// decodeValue decodes raw as a value of kind k; kindAny picks by JSON type.
func decodeValue(raw []byte, k valueKind, role string) (*value, error) {
	if k == kindAny {
		if isJSONArray(raw) {
			k = kindMessages
		} else {
			k = kindObject
		}
	}
	v := &value{kind: k, present: true}
	var err error
	switch k {
	case kindMessages:
		v.msgs, err = ahp.ParseContentMessages(raw, role)
	case kindTextParts:
		v.parts, err = ahp.ParseContentParts(raw, true)
	case kindObject:
		if !isJSONObject(raw) {
			return nil, errors.New("must be an object")
		}
		if !json.Valid(raw) {
			return nil, errors.New("must be an object")
		}
		v.obj = append(json.RawMessage(nil), bytes.TrimSpace(raw)...)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// apply stages the validated effects: modifications first, in order, then the decision
// effects in order over the new state (AHP-EDIT-001).
func (s *stager) apply(parsed []parsedEffect) (*Staged, error) {
	st := &Staged{State: s.state}
	for i := range parsed {
		pe := &parsed[i]
		if pe.eff.Type != ahp.EffectModify {
			continue
		}
		if st.values == nil {
			st.values = make(map[string]*value, 1)
		}
		cur, ok := st.values[pe.eff.Target]
		if !ok {
			var err error
			if cur, err = s.current(pe.eff.Target, pe.val.kind); err != nil {
				return nil, err
			}
		}
		next, changed, err := s.modify(cur, pe)
		if err != nil {
			return nil, invalidEffect(i, pe.eff.Type, err)
		}
		st.values[pe.eff.Target] = next
		st.Changed = st.Changed || changed
	}
	state := &st.State
	if st.Changed {
		// Approval and a supplied result are bound to the old effective value.
		state.Candidate = nil
		if state.Permission == ahp.PermissionAllow {
			state.Permission = ahp.PermissionNone
		}
	}
	st.Effects = make([]ahp.Effect, 0, len(parsed))
	for i := range parsed {
		e := parsed[i].eff
		st.Effects = append(st.Effects, e)
		switch e.Type {
		case ahp.EffectDeny:
			// Deny wins over ask and allow.
			state.Permission = ahp.PermissionDeny
		case ahp.EffectAsk:
			// Ask persists despite a later allow.
			if state.Permission != ahp.PermissionDeny {
				state.Permission = ahp.PermissionAsk
			}
		case ahp.EffectAllow:
			if state.Permission != ahp.PermissionDeny && state.Permission != ahp.PermissionAsk {
				state.Permission = ahp.PermissionAllow
			}
		case ahp.EffectReturn:
			// A later return replaces an earlier candidate.
			state.Candidate = &ahp.Candidate{Value: e.Value}
		case ahp.EffectFlow:
			// Multiple continuation instructions accumulate in order; stop wins.
			if e.Operation == ahp.OpContinue && e.Instruction != nil {
				state.Instructions = append(slices.Clip(state.Instructions), *e.Instruction)
			}
			if state.Flow != ahp.FlowStop {
				state.Flow = e.Operation
			}
		case ahp.EffectInject:
			state.Injections = append(slices.Clip(state.Injections), e)
		case ahp.EffectMessage:
			st.Messages = append(st.Messages, *e.Text)
		}
	}
	if state.Permission == ahp.PermissionDeny || state.Flow == ahp.FlowStop {
		// Deny and stop prevent a candidate from bypassing the settled decision.
		state.Candidate = nil
	}
	for i := range st.Effects {
		if st.Effects[i].Type == ahp.EffectDeny {
			st.deny = &st.Effects[i] // the first deny gives the refusal its reason and code
			break
		}
	}
	return st, nil
}

// modify applies one modification to cur (AHP-EDIT-001): list replace substitutes the
// whole list; list merge appends in order without deduplication; object replace
// substitutes; object merge is shallow with literal null, and both sides must be objects.
func (s *stager) modify(cur *value, pe *parsedEffect) (*value, bool, error) {
	add := pe.val
	if cur.kind != add.kind {
		if cur.present {
			return nil, false, fmt.Errorf("modify %s: value type does not match the current value", pe.eff.Target)
		}
		cur = &value{kind: add.kind}
	}
	next := &value{kind: add.kind, present: true}
	switch pe.eff.Operation {
	case ahp.OpReplace:
		next.msgs, next.parts, next.obj = add.msgs, add.parts, add.obj
		if !cur.present {
			return next, true, nil
		}
		switch add.kind {
		case kindMessages:
			return next, !messagesEqual(cur.msgs, add.msgs), nil
		case kindTextParts:
			return next, !partsEqual(cur.parts, add.parts), nil
		default:
			return next, !jsonEqual(cur.obj, add.obj), nil
		}
	case ahp.OpMerge:
		// slices.Concat allocates: the current list may still be referenced by an earlier
		// effective event, so its backing array is never appended to.
		switch add.kind {
		case kindMessages:
			next.msgs = slices.Concat(cur.msgs, add.msgs)
			return next, len(add.msgs) > 0, nil
		case kindTextParts:
			next.parts = slices.Concat(cur.parts, add.parts)
			return next, len(add.parts) > 0, nil
		default:
			base := cur.obj
			if !cur.present {
				if s.contextual {
					return nil, false, fmt.Errorf("modify %s merge: the current value is not an object", pe.eff.Target)
				}
				base = json.RawMessage("{}")
			}
			merged, err := shallowMerge(base, add.obj)
			if err != nil {
				return nil, false, fmt.Errorf("modify %s merge: %v", pe.eff.Target, err)
			}
			next.obj = merged
			if s.contextual && s.eventType == ahp.EventUserElicitationResult {
				o, _ := decodeObject(merged)
				if err := flatAnswer(o); err != nil {
					return nil, false, fmt.Errorf("modify content: %w", err)
				}
			}
			return next, !jsonEqual(cur.obj, merged), nil
		}
	}
	return nil, false, fmt.Errorf("modify: unknown operation %q", pe.eff.Operation)
}
