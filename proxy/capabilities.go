package proxy

import "github.com/hookproxy/hookproxy/chain/ahp"

// Per-boundary advertisements (AHP spec, capability-auth.md "Discovery and honest
// capabilities"). Each lists only what this proxy really enforces at that boundary on a model
// route (AHP-CAP-001); no advertisement, and no empty effect list, ever grants what the agent's
// own permissions, approval or sandbox would refuse (AHP-SEC-001):
//   - never allow: the harness's permission prompt is invisible to a proxy;
//   - ask at tool.before only where an approval path exists (Server.withAsk): the proxy
//     then holds the call until a person decides (approval_hold.go);
//   - never message: there is no user channel;
//   - never return at tool.before: the proxy cannot hand the harness a tool result;
//   - never flow continue: there is no proxy-run continuation (maxContinuations 0).

var bothOps = ahp.ModifyOps{Replace: true, Merge: true}

// stopOnly and injectNowOrNext build fresh values per advertisement, so that a chain
// narrowing one subscriber's copy can never change another's.
func stopOnly() *ahp.FlowCaps { return &ahp.FlowCaps{Operations: []string{ahp.OpStop}} }

func injectNowOrNext() *ahp.InjectCaps {
	return &ahp.InjectCaps{Context: ahp.InjectContextCaps{
		Append: true, DeliverAt: []string{ahp.DeliverNow, ahp.DeliverNextTurn}}}
}

// capsToolAfter: modify(output) rewrites the tool result in the outbound request; inject
// adds context to this request (now) or the next prompt's request; stop answers without
// calling the model.
func capsToolAfter() ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectModify, ahp.EffectInject, ahp.EffectFlow},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetOutput: bothOps},
		Inject:  injectNowOrNext(),
		Flow:    stopOnly(),
	}
}

// capsTurnStart: deny refuses the request; modify(prompt) rewrites the trailing prompt.
func capsTurnStart() ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectInject, ahp.EffectFlow},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetPrompt: bothOps},
		Inject:  injectNowOrNext(),
		Flow:    stopOnly(),
	}
}

// capsModelRequest: a whole-list replace is not offered when the canonical list is known
// to be incomplete (gaps such as provider-held history): replacing what the subscriber
// cannot see is not authority the proxy can grant.
func capsModelRequest(hasGaps bool) ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectInject, ahp.EffectReturn, ahp.EffectFlow},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetRequest: {Replace: !hasGaps, Merge: true}},
		Inject:  injectNowOrNext(),
		Flow:    stopOnly(),
	}
}

// capsOpaqueRequest: an unmapped endpoint forwarded as it is (mapping.OpaqueJSON) has no
// message list to edit or answer: it can be refused or stopped, and its params redacted
// (hookproxy.redact_params), nothing else.
func capsOpaqueRequest() ahp.Capabilities {
	return ahp.Capabilities{Effects: []string{ahp.EffectDeny, ahp.EffectFlow}, Flow: stopOnly()}
}

// capsModelResponse: modify(response) re-renders the native response; stop strips every
// pending tool call. Tool calls added by an edit still pass tool.before.
func capsModelResponse() ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectModify, ahp.EffectFlow},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetResponse: bothOps},
		Flow:    stopOnly(),
	}
}

// capsToolBefore: deny removes the call before the harness sees it; modify(input)
// rewrites its arguments; stop removes it and every later call; inject is delivered
// with the next model call (the request that carries the tool results) or the next turn.
func capsToolBefore() ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectInject, ahp.EffectFlow},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetInput: bothOps},
		Inject:  injectNowOrNext(),
		Flow:    stopOnly(),
	}
}

// capsTurnFinish: modify(response) rewrites the final answer; stop is honoured trivially
// (nothing is pending once the answer holds no tool call).
func capsTurnFinish() ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectModify, ahp.EffectFlow},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetResponse: bothOps},
		Flow:    stopOnly(),
	}
}

// CapabilitiesFor is what the proxy offers at a boundary of eventType on a model route
// (hookproxy test's event cases settle with it); false for an event it does not intercept.
func CapabilitiesFor(eventType string) (ahp.Capabilities, bool) {
	caps, ok := map[string]func() ahp.Capabilities{
		ahp.EventToolAfter: capsToolAfter, ahp.EventTurnStart: capsTurnStart, ahp.EventModelResponseAfter: capsModelResponse,
		ahp.EventToolBefore: capsToolBefore, ahp.EventTurnFinishBefore: capsTurnFinish,
		ahp.EventModelRequestBefore: func() ahp.Capabilities { return capsModelRequest(false) },
	}[eventType]
	if !ok {
		return ahp.Capabilities{}, false
	}
	return caps(), true
}
