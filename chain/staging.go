package chain

// Whole-response validation and atomic staging of hooks/intercept replies
// (AHP-EDIT-001; AHP spec, base/failure.md "Failure classes").
//
// AHP-EDIT-001: result.effects is parsed, validated and staged as a whole before anything
// is published. Any problem — an unknown effect, an unknown member inside an effect, an
// unadvertised effect/target/operation, a wrong value type, an exhausted continuation
// allowance — rejects the entire response: a valid deny or message is never salvaged
// from an invalid list. The caller applies the subscription's failure policy once.
//
// The pipeline runs in three stages, one file each: staging_envelope.go (the JSON-RPC
// envelope and the result object), staging_effects.go (each effect strictly decoded and
// checked against the bound and the advertisement) and staging_apply.go (the typed target
// values and the staging of the accepted effects over the current state).

import (
	"encoding/json"
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// ReplyContext is the boundary a reply is judged against.
type ReplyContext struct {
	RequestID         string                     // expected JSON-RPC id; "" skips the id check
	EventType         string                     // "" = no boundary context: wire-level checks only
	Capabilities      *ahp.Capabilities          // nil with EventType set = the event's full bound
	Current           map[string]json.RawMessage // current value per target ("input","output","content",...)
	ElicitationMode   string                     // user.elicitation.* context: "form" | "url"
	ElicitationAction string                     // user.elicitation.result context: "accept" | "decline" | "cancel"
	State             *ahp.State                 // accumulated state before this reply (nil = initial)
}

// Staged is an accepted reply, ready to publish: the accepted effects in order, the new
// value of every modified target, the new accumulated state and the user-facing messages.
type Staged struct {
	Effects []ahp.Effect
	// Values holds the staged value of each target a modify effect addressed, encoded as
	// JSON (filled by ValidateReply; the engine uses the typed value instead).
	Values   map[string]json.RawMessage
	State    ahp.State
	Messages []string
	// Changed reports whether an accepted modification changed an effective value; a
	// change drops an earlier allow and candidate, since they approved the unmodified value.
	Changed bool
	// Extensions is the result's extensions object (reverse-DNS keys; AHP-EXT-001). The
	// chain interprets only hookproxy.redact_text, and only where the host offered it
	// (redact_text.go); the host may act on the ones it declares.
	Extensions map[string]json.RawMessage

	values map[string]*value // staged values by target
	deny   *ahp.Effect       // first accepted deny, if any
}

// ValidateReply validates one hooks/intercept response frame against rc and stages it.
// A non-nil error is an operational failure of the subscription; transport.KindOf(err)
// says which: transport.KindMalformed (not a well-formed JSON-RPC response for this
// request), transport.KindRPCError (the backend answered with a JSON-RPC error object) or
// transport.KindInvalid (the result failed AHP validation).
func ValidateReply(frame []byte, rc ReplyContext) (*Staged, error) {
	s := &stager{
		requestID:    rc.RequestID,
		eventType:    rc.EventType,
		contextual:   rc.EventType != "",
		elicitMode:   rc.ElicitationMode,
		elicitAction: rc.ElicitationAction,
	}
	if rc.State != nil {
		s.state = *rc.State
	} else {
		s.state = initialState()
	}
	if s.contextual {
		s.bound, s.hasBound = ahp.EventBounds[rc.EventType]
		s.caps = rc.Capabilities
		if s.caps == nil {
			s.caps = fullBoundCaps(rc.EventType)
		}
	}
	s.current = func(target string, k valueKind) (*value, error) {
		raw, ok := rc.Current[target]
		if !ok || isJSONNull(raw) {
			return &value{kind: k}, nil
		}
		v, err := decodeValue(raw, k, s.roleFor(target))
		if err != nil {
			return nil, invalidf("current value of %s: %v", target, err)
		}
		return v, nil
	}
	st, err := s.stage(frame)
	if err != nil {
		return nil, err
	}
	if len(st.values) > 0 {
		st.Values = make(map[string]json.RawMessage, len(st.values))
		for t, v := range st.values {
			b, err := v.encode()
			if err != nil {
				return nil, invalidf("%s: %v", t, err)
			}
			st.Values[t] = b
		}
	}
	return st, nil
}

func initialState() ahp.State {
	return ahp.State{Permission: ahp.PermissionNone, Flow: ahp.FlowNone}
}

// fullBoundCaps is the widest advertisement the event's bound admits (AHP spec,
// capability-auth.md "Event-semantic capability bounds"). The continuation allowance is left
// unset, meaning not limited.
func fullBoundCaps(eventType string) *ahp.Capabilities {
	b, ok := ahp.EventBounds[eventType]
	if !ok {
		return &ahp.Capabilities{Effects: []string{}}
	}
	c := &ahp.Capabilities{Effects: slices.Clone(b.Effects)}
	if b.Target != "" {
		c.Modify = map[string]ahp.ModifyOps{b.Target: {Replace: true, Merge: true}}
	}
	if len(b.FlowOps) > 0 {
		c.Flow = &ahp.FlowCaps{Operations: slices.Clone(b.FlowOps)}
	}
	if slices.Contains(b.Effects, ahp.EffectInject) {
		c.Inject = &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true, DeliverAt: []string{ahp.DeliverNow, ahp.DeliverNextTurn}}}
	}
	if isElicitation(eventType) {
		c.Elicitation = &ahp.ElicitationCaps{Form: &struct{}{}, URL: &struct{}{}}
	}
	return c
}

func isElicitation(t string) bool {
	return t == "user.elicitation.request" || t == ahp.EventUserElicitationResult
}

// stager validates and stages one reply. It is built per reply; contextual checks apply
// when eventType is set.
type stager struct {
	requestID    string
	eventType    string
	contextual   bool
	caps         *ahp.Capabilities
	bound        ahp.EventBound
	hasBound     bool
	elicitMode   string
	elicitAction string
	state        ahp.State
	extensions   map[string]json.RawMessage // result.extensions, once parsed
	// current returns the current effective value of target as kind k.
	current func(target string, k valueKind) (*value, error)
}

// stage runs the whole pipeline: envelope, result, every effect, then staging.
func (s *stager) stage(frame []byte) (*Staged, error) {
	result, err := s.envelope(frame)
	if err != nil {
		return nil, err
	}
	rawEffects, err := s.result(result)
	if err != nil {
		return nil, err
	}
	parsed := make([]parsedEffect, 0, len(rawEffects))
	for i, raw := range rawEffects {
		pe, err := s.effect(raw)
		if err != nil {
			// AHP-EDIT-001 / AHP-DEC-001: one bad member rejects the whole response.
			return nil, invalidEffect(i, effectTypeOf(raw), err)
		}
		parsed = append(parsed, pe)
	}
	if s.contextual && s.eventType == "user.elicitation.request" {
		var deny, ret bool
		for _, pe := range parsed {
			deny = deny || pe.eff.Type == ahp.EffectDeny
			ret = ret || pe.eff.Type == ahp.EffectReturn
		}
		if deny && ret {
			return nil, invalidf("deny and return conflict at user.elicitation.request")
		}
	}
	staged, err := s.apply(parsed)
	if err != nil {
		return nil, err
	}
	staged.Extensions = s.extensions
	return staged, nil
}
