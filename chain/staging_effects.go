package chain

// Stage two of reply staging: each effect strictly decoded and checked against the event bound
// and the request's advertisement.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// effectViolation is the reason one effect was refused, before it is placed in the list.
type effectViolation struct {
	violation transport.Violation
	err       error
}

func (e *effectViolation) Error() string { return e.err.Error() }
func (e *effectViolation) Unwrap() error { return e.err }

// invalidEffect rejects the whole reply because of effects[i] of type effectType.
func invalidEffect(i int, effectType string, err error) error {
	v := transport.ViolationInvalidEffect
	var ev *effectViolation
	if errors.As(err, &ev) {
		v = ev.violation
	}
	return &transport.Error{Kind: transport.KindInvalid, Err: fmt.Errorf("effects[%d]: %v", i, err), Violation: v, Effect: effectType}
}

// effectTypeOf is the type member of a raw effect, for reporting ("" when absent).
func effectTypeOf(raw []byte) string {
	var e struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Type
}

// parsedEffect is one effect after strict decoding, with its typed value.
type parsedEffect struct {
	eff ahp.Effect
	val *value // modify: the supplied value
}

// allowed checks that effect type t is inside the event bound and advertised in this
// request's capabilities (AHP-CAP-001).
func (s *stager) allowed(t string) error {
	if !s.contextual {
		return nil
	}
	if !s.hasBound || !slices.Contains(s.bound.Effects, t) {
		return fmt.Errorf("effect %q is not allowed at %s", t, s.eventType)
	}
	if !s.caps.Has(t) {
		return fmt.Errorf("effect %q was not advertised", t)
	}
	if isElicitation(s.eventType) && (t == ahp.EffectDeny || t == ahp.EffectReturn || t == ahp.EffectModify) {
		// Elicitation control needs the event's mode advertised (AHP spec, capability-auth.md
		// "Discovery and honest capabilities").
		e := s.caps.Elicitation
		if e == nil || (s.elicitMode != "form" || e.Form == nil) && (s.elicitMode != "url" || e.URL == nil) {
			return fmt.Errorf("effect %q needs elicitation mode %q advertised", t, s.elicitMode)
		}
	}
	return nil
}

// roleFor is the role every message of target must carry at this boundary.
func (s *stager) roleFor(target string) string {
	switch {
	case s.eventType == "user.message.inbound" && target == ahp.TargetPrompt:
		return ahp.RoleUser
	case s.eventType == ahp.EventUserMessageOutbound && target == ahp.TargetContent:
		return ahp.RoleAssistant
	}
	return ""
}

// effect strictly decodes and validates one effect (AHP spec, base/failure.md "Failure
// classes": a malformed or unknown effect is an operational failure).
func (s *stager) effect(raw json.RawMessage) (parsedEffect, error) {
	var pe parsedEffect
	o, err := decodeObject(raw)
	if err != nil {
		return pe, errors.New("effect must be an object")
	}
	t, err := o.reqStr("type", 1)
	if err != nil {
		return pe, err
	}
	pe.eff.Type = t
	switch t {
	case ahp.EffectDeny:
		if err := o.closed("type", "reason", "code", "extensions"); err != nil {
			return pe, fmt.Errorf("deny: %w", err)
		}
		if pe.eff.Reason, err = o.reqStr("reason", 1); err != nil {
			return pe, fmt.Errorf("deny: %w", err)
		}
		if code, ok, err := o.str("code"); err != nil {
			return pe, fmt.Errorf("deny: %w", err)
		} else if ok {
			if !ahp.IsReverseDNS(code) {
				return pe, errors.New("deny: code must be reverse-DNS")
			}
			pe.eff.Code = code
		}
		if ext, ok := o["extensions"]; ok {
			if pe.eff.Extensions, err = parseExtensions(ext); err != nil {
				return pe, fmt.Errorf("deny: %w", err)
			}
		}
	case ahp.EffectAllow, ahp.EffectAsk:
		if err := o.closed("type"); err != nil {
			return pe, fmt.Errorf("%s: %w", t, err)
		}
	case ahp.EffectMessage:
		if err := o.closed("type", "text"); err != nil {
			return pe, fmt.Errorf("message: %w", err)
		}
		text, ok, err := o.str("text")
		if err != nil || !ok {
			return pe, errors.New("message: text must be a string")
		}
		pe.eff.Text = &text
	case ahp.EffectFlow:
		op, err := o.reqStr("operation", 0)
		if err != nil {
			return pe, fmt.Errorf("flow: %w", err)
		}
		pe.eff.Operation = op
		switch op {
		case ahp.OpStop:
			if err := o.closed("type", "operation", "reason"); err != nil {
				return pe, fmt.Errorf("flow stop: %w", err)
			}
			if pe.eff.Reason, err = o.reqStr("reason", 1); err != nil {
				return pe, fmt.Errorf("flow stop: %w", err)
			}
		case ahp.OpContinue:
			if err := o.closed("type", "operation", "instruction"); err != nil {
				return pe, fmt.Errorf("flow continue: %w", err)
			}
			if ins, ok, err := o.str("instruction"); err != nil {
				return pe, fmt.Errorf("flow continue: %w", err)
			} else if ok {
				if ins == "" {
					return pe, errors.New("flow continue: instruction must not be empty")
				}
				pe.eff.Instruction = &ins
			}
		default:
			return pe, fmt.Errorf("flow: unknown operation %q", op)
		}
	case ahp.EffectInject:
		if err := o.closed("type", "target", "operation", "deliverAt", "value"); err != nil {
			return pe, fmt.Errorf("inject: %w", err)
		}
		if pe.eff.Target, err = o.reqStr("target", 0); err != nil || pe.eff.Target != "context" {
			return pe, errors.New(`inject: target must be "context"`)
		}
		if pe.eff.Operation, err = o.reqStr("operation", 0); err != nil || pe.eff.Operation != ahp.OpAppend {
			return pe, errors.New(`inject: operation must be "append"`)
		}
		if pe.eff.DeliverAt, err = o.reqStr("deliverAt", 0); err != nil ||
			(pe.eff.DeliverAt != ahp.DeliverNow && pe.eff.DeliverAt != ahp.DeliverNextTurn) {
			return pe, errors.New(`inject: deliverAt must be "now" or "next_turn"`)
		}
		rawVal, ok := o["value"]
		if !ok {
			return pe, errors.New("inject: value is required")
		}
		if err := ahp.ValidateContentMessages(rawVal, ""); err != nil {
			return pe, fmt.Errorf("inject: value: %w", err)
		}
		pe.eff.Value = rawVal
	case ahp.EffectReturn:
		if err := o.closed("type", "value"); err != nil {
			return pe, fmt.Errorf("return: %w", err)
		}
		rawVal, ok := o["value"]
		if !ok {
			return pe, errors.New("return: value is required")
		}
		pe.eff.Value = rawVal
	case ahp.EffectModify:
		if err := o.closed("type", "target", "operation", "value"); err != nil {
			// There is no path / JSON-pointer member: an edit addresses the whole target.
			return pe, fmt.Errorf("modify: %w", err)
		}
		if pe.eff.Target, err = o.reqStr("target", 0); err != nil {
			return pe, fmt.Errorf("modify: %w", err)
		}
		if pe.eff.Operation, err = o.reqStr("operation", 0); err != nil {
			return pe, fmt.Errorf("modify: %w", err)
		}
		if pe.eff.Operation != ahp.OpReplace && pe.eff.Operation != ahp.OpMerge {
			return pe, fmt.Errorf("modify: unknown operation %q", pe.eff.Operation)
		}
		rawVal, ok := o["value"]
		if !ok {
			return pe, errors.New("modify: value is required")
		}
		pe.eff.Value = rawVal
	default:
		// Only the eight core effects exist in this draft; no per-event bound admits an
		// extension effect (AHP spec, capability-auth.md "Event-semantic capability bounds").
		return pe, &effectViolation{transport.ViolationUnknownEffect, fmt.Errorf("unsupported effect type %q", t)}
	}
	if err := s.allowed(t); err != nil {
		// AHP-CAP-001: a backend returns only advertised effects.
		return pe, &effectViolation{transport.ViolationUnadvertisedEffect, err}
	}
	switch t {
	case ahp.EffectFlow:
		err = s.checkFlow(&pe.eff)
	case ahp.EffectInject:
		err = s.checkInject(&pe.eff)
	case ahp.EffectReturn:
		err = s.checkReturn(&pe.eff)
	case ahp.EffectModify:
		pe.val, err = s.checkModify(&pe.eff)
	}
	return pe, err
}

func (s *stager) checkFlow(e *ahp.Effect) error {
	if !s.contextual {
		return nil
	}
	if !slices.Contains(s.bound.FlowOps, e.Operation) {
		return fmt.Errorf("flow %s is not allowed at %s", e.Operation, s.eventType)
	}
	if s.caps.Flow == nil || !slices.Contains(s.caps.Flow.Operations, e.Operation) {
		return fmt.Errorf("flow %s was not advertised", e.Operation)
	}
	if e.Operation == ahp.OpContinue {
		// An exhausted allowance rejects continue, unless an earlier accepted response in
		// this chain already requested the one step this continue would join.
		if r := s.caps.Flow.RemainingContinuations; r != nil && *r <= 0 && s.state.Flow != ahp.FlowContinue {
			return errors.New("flow continue: no continuation allowance remains")
		}
	}
	return nil
}

func (s *stager) checkInject(e *ahp.Effect) error {
	if !s.contextual {
		return nil
	}
	in := s.caps.Inject
	if in == nil || !in.Context.Append || !slices.Contains(in.Context.DeliverAt, e.DeliverAt) {
		return fmt.Errorf("inject deliverAt %q was not advertised", e.DeliverAt)
	}
	return nil
}

// checkReturn validates a supplied result against the active boundary (AHP spec,
// capability-auth.md "Event-semantic capability bounds").
func (s *stager) checkReturn(e *ahp.Effect) error {
	if !s.contextual {
		return nil
	}
	switch s.eventType {
	case ahp.EventModelRequestBefore:
		if err := ahp.ValidateContentMessages(e.Value, ahp.RoleAssistant); err != nil {
			return fmt.Errorf("return: model result: %w", err)
		}
	case "context.compact.before":
		if err := ahp.ValidateContentParts(e.Value, true); err != nil {
			return fmt.Errorf("return: compaction summary: %w", err)
		}
	case "user.elicitation.request":
		return s.checkElicitResult(e.Value)
	}
	// tool.before: the actual JSON tool result, any JSON value.
	return nil
}

// checkElicitResult validates a supplied MCP ElicitResult {action, content?, _meta?}.
func (s *stager) checkElicitResult(raw json.RawMessage) error {
	o, err := decodeObject(raw)
	if err != nil {
		return errors.New("return: ElicitResult must be an object")
	}
	action, err := o.reqStr("action", 0)
	if err != nil {
		return fmt.Errorf("return: ElicitResult %w", err)
	}
	switch action {
	case "accept", "decline", "cancel":
	default:
		return fmt.Errorf("return: ElicitResult action %q is unknown", action)
	}
	if m, ok := o["_meta"]; ok && !isJSONObject(m) {
		return errors.New("return: ElicitResult _meta must be an object")
	}
	if c, ok := o["content"]; ok {
		if action != "accept" || s.elicitMode != "form" {
			return errors.New("return: ElicitResult content is only allowed for an accepted form")
		}
		co, err := decodeObject(c)
		if err != nil {
			return errors.New("return: ElicitResult content must be an object")
		}
		if err := flatAnswer(co); err != nil {
			return fmt.Errorf("return: %w", err)
		}
	}
	return nil
}

// checkModify validates target, operation authority and value type (AHP-EDIT-001).
func (s *stager) checkModify(e *ahp.Effect) (*value, error) {
	if s.contextual {
		if s.bound.Target == "" || e.Target != s.bound.Target {
			return nil, fmt.Errorf("modify target %q is not the target of %s", e.Target, s.eventType)
		}
		ops, ok := s.caps.Modify[e.Target]
		if !ok || e.Operation == ahp.OpReplace && !ops.Replace || e.Operation == ahp.OpMerge && !ops.Merge {
			return nil, fmt.Errorf("modify %s %s was not advertised", e.Target, e.Operation)
		}
		if s.eventType == ahp.EventUserElicitationResult && (s.elicitMode != "form" || s.elicitAction != "accept") {
			return nil, errors.New("modify content: only an accepted form result can be edited")
		}
	}
	k, ok := targetKind(s.eventType, e.Target)
	if !ok {
		return nil, fmt.Errorf("modify: unknown target %q", e.Target)
	}
	v, err := decodeValue(e.Value, k, s.roleFor(e.Target))
	if err != nil {
		return nil, fmt.Errorf("modify %s: value: %w", e.Target, err)
	}
	if s.contextual && s.eventType == ahp.EventUserElicitationResult {
		o, _ := decodeObject(v.obj)
		if err := flatAnswer(o); err != nil {
			return nil, fmt.Errorf("modify content: %w", err)
		}
	}
	return v, nil
}
