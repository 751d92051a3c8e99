package chain

// Whole-response validation and atomic staging of hooks/intercept replies
// (SPEC-DIGEST §7.1–§7.3, seed "Atomic effect acceptance").
//
// AHP-EDIT-001: result.effects is parsed, validated and staged as a whole before anything
// is published. Any problem — an unknown effect, an unknown member inside an effect, an
// unadvertised effect/target/operation, a wrong value type, an exhausted continuation
// allowance — rejects the entire response: a valid deny or message is never salvaged
// from an invalid list. The caller applies the subscription's failure policy once.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
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
	// change drops an earlier allow and candidate (SPEC-DIGEST §5.4).
	Changed bool
	// Extensions is the result's extensions object (reverse-DNS keys; AHP-EXT-001). The
	// chain never interprets them; the host may act on the ones it declares.
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

// fullBoundCaps is the widest advertisement the event's bound admits (SPEC-DIGEST §6.4).
// The continuation allowance is left unset, meaning not limited.
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

func wrongIDf(format string, a ...any) error {
	return &transport.Error{Kind: transport.KindMalformed, Err: fmt.Errorf(format, a...), Violation: transport.ViolationWrongID}
}

func malformedf(format string, a ...any) error {
	return &transport.Error{Kind: transport.KindMalformed, Err: fmt.Errorf(format, a...)}
}

func invalidf(format string, a ...any) error {
	return &transport.Error{Kind: transport.KindInvalid, Err: fmt.Errorf(format, a...)}
}

// effectViolation is the reason one effect was refused, before it is placed in the list.
type effectViolation struct {
	violation string // transport.Violation*
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

// valueKind is the value type of a modification target (SPEC-DIGEST §5.3).
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

// parsedEffect is one effect after strict decoding, with its typed value.
type parsedEffect struct {
	eff ahp.Effect
	val *value // modify: the supplied value
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

// envelope checks the JSON-RPC response envelope and returns the raw result member.
func (s *stager) envelope(frame []byte) ([]byte, error) {
	if !utf8.Valid(frame) {
		return nil, malformedf("reply is not valid UTF-8")
	}
	if !isJSONObject(frame) {
		// Batches (arrays) and scalars are not one JSON-RPC response object.
		return nil, malformedf("reply is not a single JSON-RPC object")
	}
	if !json.Valid(frame) {
		return nil, malformedf("reply is not valid JSON")
	}
	var (
		jsonrpc, rawID, rawErr, result []byte
		seen                           [5]bool
	)
	err := eachMember(frame, func(k, v []byte) error {
		n := -1
		switch string(k) {
		case "jsonrpc":
			n, jsonrpc = 0, v
		case "id":
			n, rawID = 1, v
		case "error":
			n, rawErr = 2, v
		case "result":
			n, result = 3, v
		case "method":
			n = 4
		default:
			return nil // unknown envelope members are ignored (AHP-CORE-003)
		}
		if seen[n] {
			return fmt.Errorf("reply repeats member %q", k)
		}
		seen[n] = true
		return nil
	})
	if err != nil {
		return nil, malformedf("%v", err)
	}
	if !seen[0] || !jsonString(jsonrpc, "2.0") {
		return nil, malformedf(`reply jsonrpc must be "2.0"`)
	}
	if seen[4] {
		return nil, malformedf("reply carries a method: it is a request, not a response")
	}
	if !seen[1] {
		return nil, malformedf("reply has no id")
	}
	switch firstByte(rawID) {
	case '"':
		if s.requestID != "" && !jsonString(rawID, s.requestID) {
			return nil, wrongIDf("reply id does not match the request id")
		}
		if jsonString(rawID, "") {
			return nil, malformedf("reply id is empty")
		}
	case 'n':
		// A null id answers a request the backend could not parse; never ours.
		if s.requestID != "" {
			return nil, wrongIDf("reply id does not match the request id")
		}
	default:
		if !isJSONInteger(rawID) {
			return nil, malformedf("reply id must be a string or an integer")
		}
		// The request id is the event id, a string: a number never equals it (JSON value
		// equality, not textual).
		if s.requestID != "" {
			return nil, wrongIDf("reply id does not match the request id")
		}
	}
	switch {
	case seen[2] && seen[3]:
		return nil, malformedf("reply carries both result and error")
	case seen[2]:
		o, err := decodeObject(rawErr)
		if err != nil {
			return nil, malformedf("reply error member is not an object")
		}
		if raw, ok := o["code"]; !ok || !isJSONInteger(raw) {
			return nil, malformedf("reply error has no integer code")
		}
		if _, ok, err := o.str("message"); err != nil || !ok {
			return nil, malformedf("reply error has no message")
		}
		// Any error response to hooks/intercept is an operational failure; the backend's
		// message and data are untrusted and never carried further — only the code.
		return nil, &transport.Error{Kind: transport.KindRPCError, Err: fmt.Errorf("backend answered JSON-RPC error %s", bytes.TrimSpace(o["code"]))}
	case !seen[3]:
		return nil, malformedf("reply has neither result nor error")
	}
	return result, nil
}

// jsonString reports whether raw is the JSON string want, without allocating in the
// common case of a string with no escapes.
func jsonString(raw []byte, want string) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == want
	}
	var got string
	return json.Unmarshal(raw, &got) == nil && got == want
}

// result checks the hooks/intercept result object and returns its effects.
func (s *stager) result(raw []byte) ([][]byte, error) {
	if !isJSONObject(raw) {
		return nil, invalidf("result must be an object")
	}
	var (
		version, ext, effects  []byte
		hasVersion, hasEffects bool
		hasManifest, hasExt    bool
	)
	_ = eachMember(raw, func(k, v []byte) error {
		switch string(k) {
		case "protocolVersion":
			version, hasVersion = v, true
		case "effects":
			effects, hasEffects = v, true
		case "manifest":
			hasManifest = true
		case "extensions":
			ext, hasExt = v, true
		}
		return nil // other result members are ignored
	})
	// AHP-VER-001: every successful result carries the snapshot id.
	if !hasVersion || firstByte(version) != '"' {
		return nil, invalidf("result.protocolVersion is required")
	}
	if !jsonString(version, ahp.ProtocolVersion) {
		return nil, invalidf("result.protocolVersion is not %q", ahp.ProtocolVersion)
	}
	if hasManifest {
		return nil, invalidf("an intercept result must not carry a manifest")
	}
	if hasExt {
		var err error
		if s.extensions, err = parseExtensions(ext); err != nil {
			return nil, invalidf("result.%v", err)
		}
	}
	// AHP-DEC-001: an ordered effects array is required; null or missing is invalid, an
	// empty array means "no change requested" (never permission, AHP-DEC-003).
	if !hasEffects {
		return nil, invalidf("result.effects is required")
	}
	if !isJSONArray(effects) {
		return nil, invalidf("result.effects must be an array")
	}
	var out [][]byte
	_ = eachElement(effects, func(v []byte) error {
		out = append(out, v)
		return nil
	})
	return out, nil
}

// allowed checks that effect type t is inside the event bound and advertised in this
// request's capabilities (AHP-CAP-001, SPEC-DIGEST §6.2).
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
		// Elicitation control needs the event's mode advertised (SPEC-DIGEST §6.1).
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

// effect strictly decodes and validates one effect (SPEC-DIGEST §5.1, §7.1).
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
		// extension effect (SPEC-DIGEST §5.1).
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

// checkReturn validates a supplied result against the active boundary (SPEC-DIGEST §5.5).
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

// apply stages the validated effects: modifications first, in order, then the decision
// effects in order over the new state (SPEC-DIGEST §7.4 validateAndStage).
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
