package policies

// What a policy may do at each boundary: the modify target of the event, its direction,
// and helpers that read the per-request capability advertisement (AHP spec, capability-auth.md
// "Discovery and honest capabilities"). A policy returns only what the request advertises — an
// unadvertised effect would make the chain reject the whole reply — so every decision goes
// through these helpers.

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// direction tells requests (content on its way to the model or a tool) from responses
// (content produced by the model or a tool).
type direction uint8

const (
	dirNone direction = iota
	dirRequest
	dirResponse
)

// boundary is the policy view of one event type.
type boundary struct {
	target string // modify target
	dir    direction
	list   bool // target is a canonical message list (items); else the tool.input object
}

// boundaryOf maps an event type to its modify target and direction. ok is false for
// events a content policy does not act on.
func boundaryOf(eventType string) (boundary, bool) {
	switch eventType {
	case ahp.EventModelRequestBefore:
		return boundary{target: ahp.TargetRequest, dir: dirRequest, list: true}, true
	case ahp.EventTurnStart:
		return boundary{target: ahp.TargetPrompt, dir: dirRequest, list: true}, true
	case ahp.EventToolBefore, "tool.permission.request":
		return boundary{target: ahp.TargetInput, dir: dirRequest}, true
	case ahp.EventModelResponseAfter, ahp.EventTurnFinishBefore:
		return boundary{target: ahp.TargetResponse, dir: dirResponse, list: true}, true
	case ahp.EventToolAfter:
		return boundary{target: ahp.TargetOutput, dir: dirResponse, list: true}, true
	}
	return boundary{}, false
}

var errNoEvent = errors.New("policies: intercept request without params or event")

// unpack returns the event and capabilities of req. A request without an event is a bug
// in the caller and is reported as an error (an operational failure of the subscription).
func unpack(ctx context.Context, req *ahp.InterceptRequest) (*ahp.Event, *ahp.Capabilities, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if req == nil || req.Params == nil || req.Params.Event == nil {
		return nil, nil, errNoEvent
	}
	caps := req.Params.Capabilities
	if caps == nil {
		caps = &ahp.Capabilities{}
	}
	return req.Params.Event, caps, nil
}

// modifyOps is what the advertisement allows for target ({false,false} when nothing).
func modifyOps(c *ahp.Capabilities, target string) ahp.ModifyOps {
	if target == "" || !c.Has(ahp.EffectModify) {
		return ahp.ModifyOps{}
	}
	return c.Modify[target]
}

// canStop reports whether flow stop is advertised.
func canStop(c *ahp.Capabilities) bool {
	return c.Has(ahp.EffectFlow) && c.Flow != nil && slices.Contains(c.Flow.Operations, ahp.OpStop)
}

// canInjectNow reports whether an inject effect delivered now is advertised.
func canInjectNow(c *ahp.Capabilities) bool {
	return c.Has(ahp.EffectInject) && c.Inject != nil && c.Inject.Context.Append &&
		slices.Contains(c.Inject.Context.DeliverAt, ahp.DeliverNow)
}

// block returns the strongest refusal the boundary advertises: deny, else flow stop
// (tool.after, model.response.after and turn.finish.before have no deny, but stopping the
// flow keeps the content from being used). ok is false when neither is advertised.
func block(c *ahp.Capabilities, reason, code string) (ahp.Effect, bool) {
	if c.Has(ahp.EffectDeny) {
		return ahp.Effect{Type: ahp.EffectDeny, Reason: reason, Code: code}, true
	}
	if canStop(c) {
		return ahp.Effect{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: reason}, true
	}
	return ahp.Effect{}, false
}

// denyOnly returns a deny effect when deny is advertised.
func denyOnly(c *ahp.Capabilities, reason, code string) (ahp.Effect, bool) {
	if c.Has(ahp.EffectDeny) {
		return ahp.Effect{Type: ahp.EffectDeny, Reason: reason, Code: code}, true
	}
	return ahp.Effect{}, false
}

func modifyEffect(target, op string, value json.RawMessage) ahp.Effect {
	return ahp.Effect{Type: ahp.EffectModify, Target: target, Operation: op, Value: value}
}

// results wraps effects into a reply; an empty list is "no change requested".
func results(effects ...ahp.Effect) *ahp.InterceptResult {
	if effects == nil {
		effects = []ahp.Effect{}
	}
	return &ahp.InterceptResult{ProtocolVersion: ahp.ProtocolVersion, Effects: effects}
}

// reverseDNS is the protocol's pattern for deny codes (deny-effect.schema.json).
var reverseDNS = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$`)
