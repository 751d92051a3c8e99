package admin

import "github.com/hookproxy/hookproxy/chain/ahp"

// CapabilityManifest is hookproxy's AHP capability manifest (AHP spec, capability-auth.md
// "Discovery and honest capabilities"): the static upper bound of what it can enforce, served
// by hooks/capabilities. All nine members are required and always encoded. Per-request
// advertisements (params.capabilities) narrow it to the boundary, tool path and subscriber at
// hand; they may never widen it, which is why this document lives in its own file: the proxy's
// advertisements are checked against it.
type CapabilityManifest struct {
	Events                    []ManifestEvent `json:"events"`
	Gaps                      []Gap           `json:"gaps"`
	Transports                []string        `json:"transports"`
	Authentication            []string        `json:"authentication"`
	ToolPaths                 []string        `json:"toolPaths"`
	ContentCategories         []string        `json:"contentCategories"`
	Limits                    Limits          `json:"limits"`
	ManagedPolicy             ManagedPolicy   `json:"managedPolicy"`
	CorrelationIdentityFields []string        `json:"correlationIdentityFields"`
}

// ManifestEvent is one covered event: its delivery modes and, for intercept, the upper
// bound of its capabilities (observe-only events advertise no effects).
type ManifestEvent struct {
	Event        string            `json:"event"`
	Modes        []string          `json:"modes"`
	Capabilities *ahp.Capabilities `json:"capabilities,omitempty"`
}

// Gap is an honest coverage hole: a path the proxy cannot supply or enforce, and why.
type Gap struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Limits are the published limits. A limit left out would have to be explained in Gaps,
// because an absent limit never means unlimited.
type Limits struct {
	MaxUploadBytes   *int `json:"maxUploadBytes,omitempty"`
	MaxContinuations *int `json:"maxContinuations,omitempty"`
	MinTimeoutMs     *int `json:"minTimeoutMs,omitempty"`
	MaxTimeoutMs     *int `json:"maxTimeoutMs,omitempty"`
}

// ManagedPolicy says where registrations come from and whether they can be disabled.
type ManagedPolicy struct {
	Scopes      []string `json:"scopes"`
	Disableable bool     `json:"disableable"`
}

// Tool paths (event.path values) hookproxy covers, one per native API it maps.
const (
	ToolPathOpenAIChat        = "hookproxy.openai.chat"
	ToolPathOpenAIResponses   = "hookproxy.openai.responses"
	ToolPathAnthropicMessages = "hookproxy.anthropic.messages"
	ToolPathGemini            = "hookproxy.gemini.generate_content"
	ToolPathMCP               = "hookproxy.mcp"
)

// Limits hookproxy enforces on registrations. No flow continue is advertised anywhere, so
// the continuation allowance is zero and stated as such.
const (
	MinTimeoutMs     = 1
	MaxTimeoutMs     = 30000
	MaxContinuations = 0
)

// Event entry (the event itself) and mode names.
const (
	modeIntercept = "intercept"
	modeObserve   = "observe"
)

// Manifest returns hookproxy's manifest. Each call builds a fresh value, so a caller may
// narrow its copy without affecting anyone else's.
//
// It is derived from what the proxy really enforces at each boundary it sits on (honest
// capabilities: AHP spec, capability-auth.md "Discovery and honest capabilities"):
//   - turn.start: deny refuses the request; modify(prompt) rewrites the new user
//     messages; inject adds context now or after the next user prompt; flow stop answers
//     without calling the model.
//   - model.request.before: deny, modify(request), inject, return (a native response, or
//     a synthesized SSE stream, without calling the upstream) and flow stop.
//   - model.response.after: modify(response) re-renders the held response; flow stop
//     strips pending tool calls with a terminal stop reason.
//   - tool.before: deny removes the call; modify(input) rewrites its arguments; inject;
//     flow stop removes it and every later call. return is enforced only on MCP routes,
//     where the proxy answers tools/call itself; on model-API paths it is narrowed out of
//     every request (see Gaps).
//   - tool.after: modify(output) rewrites the tool result before the model sees it;
//     inject; flow stop.
//   - turn.finish.before: modify(response) and flow stop; no continue (no proxy-run
//     continuation loop), hence maxContinuations 0.
//   - observe-only: turn.end, model.error, hook.failure.
//
// Not advertised anywhere: allow (the harness's permission prompt is invisible to a proxy)
// and message (there is no user channel). ask at tool.before is added by WithApprovals
// when an approval path exists.
func Manifest() CapabilityManifest {
	replaceMerge := func(target string) map[string]ahp.ModifyOps {
		return map[string]ahp.ModifyOps{target: {Replace: true, Merge: true}}
	}
	inject := func() *ahp.InjectCaps {
		return &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true, DeliverAt: []string{ahp.DeliverNow, ahp.DeliverNextTurn}}}
	}
	stop := func() *ahp.FlowCaps { return &ahp.FlowCaps{Operations: []string{ahp.OpStop}} }
	both := func() []string { return []string{modeIntercept, modeObserve} }
	observeOnly := func(event string) ManifestEvent {
		return ManifestEvent{Event: event, Modes: []string{modeObserve}, Capabilities: &ahp.Capabilities{Effects: []string{}}}
	}
	intPtr := func(v int) *int { return &v }

	return CapabilityManifest{
		Events: []ManifestEvent{
			{Event: ahp.EventTurnStart, Modes: both(), Capabilities: &ahp.Capabilities{
				Effects: []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectInject, ahp.EffectFlow},
				Modify:  replaceMerge(ahp.TargetPrompt), Inject: inject(), Flow: stop(),
			}},
			{Event: ahp.EventModelRequestBefore, Modes: both(), Capabilities: &ahp.Capabilities{
				Effects: []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectInject, ahp.EffectReturn, ahp.EffectFlow},
				Modify:  replaceMerge(ahp.TargetRequest), Inject: inject(), Flow: stop(),
			}},
			{Event: ahp.EventModelResponseAfter, Modes: both(), Capabilities: &ahp.Capabilities{
				Effects: []string{ahp.EffectModify, ahp.EffectFlow},
				Modify:  replaceMerge(ahp.TargetResponse), Flow: stop(),
			}},
			{Event: ahp.EventToolBefore, Modes: both(), Capabilities: &ahp.Capabilities{
				Effects: []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectInject, ahp.EffectReturn, ahp.EffectFlow},
				Modify:  replaceMerge(ahp.TargetInput), Inject: inject(), Flow: stop(),
			}},
			{Event: ahp.EventToolAfter, Modes: both(), Capabilities: &ahp.Capabilities{
				Effects: []string{ahp.EffectModify, ahp.EffectInject, ahp.EffectFlow},
				Modify:  replaceMerge(ahp.TargetOutput), Inject: inject(), Flow: stop(),
			}},
			{Event: ahp.EventTurnFinishBefore, Modes: both(), Capabilities: &ahp.Capabilities{
				Effects: []string{ahp.EffectModify, ahp.EffectFlow},
				Modify:  replaceMerge(ahp.TargetResponse), Flow: stop(),
			}},
			observeOnly(ahp.EventTurnEnd),
			observeOnly(ahp.EventModelError),
			observeOnly(ahp.EventHookFailure),
		},
		Gaps: []Gap{
			{Path: "tool.before.return", Reason: "return at tool.before is enforced only on tool path " + ToolPathMCP +
				", where hookproxy answers tools/call itself; on model-API tool paths a proxy cannot hand the harness a tool result, so requests there do not advertise it"},
			{Path: "tool.permission.request", Reason: "the harness's permission stage is not visible to a proxy; allow and ask are not advertised"},
			{Path: "tool.permission.resolved", Reason: "the harness's permission stage is not visible to a proxy"},
			{Path: "tool.progress", Reason: "tool execution happens in the harness, out of the proxy's sight"},
			{Path: "tool.batch.after", Reason: "batch completion happens in the harness; tool results are only seen in the next model request"},
			{Path: "tool.after.execution", Reason: "on model-API paths execution is inferred from the tool result in the next model request"},
			{Path: "session.start", Reason: "session boundaries are not observable on model or tool traffic"},
			{Path: "session.end", Reason: "session boundaries are not observable on model or tool traffic"},
			{Path: "user.message.inbound", Reason: "the user channel is not visible; prompts found in model requests are reported as turn.start"},
			{Path: "user.message.outbound", Reason: "the user channel is not visible to a proxy"},
			{Path: "user.attention", Reason: "the user channel is not visible to a proxy"},
			{Path: "user.elicitation.request", Reason: "MCP elicitation is not intercepted"},
			{Path: "user.elicitation.result", Reason: "MCP elicitation is not intercepted"},
			{Path: "context.compact.before", Reason: "context compaction happens inside the harness"},
			{Path: "context.compact.after", Reason: "context compaction happens inside the harness"},
			{Path: "config.change.before", Reason: "harness configuration changes are not visible to a proxy"},
			{Path: "config.change.after", Reason: "harness configuration changes are not visible to a proxy"},
			{Path: "model.switch.before", Reason: "a model switch is only seen as a different model in the next request"},
			{Path: "model.switch.after", Reason: "a model switch is only seen as a different model in the next request"},
			{Path: "task.change.before", Reason: "harness task state is not visible to a proxy"},
			{Path: "task.change.after", Reason: "harness task state is not visible to a proxy"},
			{Path: "workspace.change.before", Reason: "workspace changes happen in the harness"},
			{Path: "workspace.change.after", Reason: "workspace changes happen in the harness"},
			{Path: "file.changed", Reason: "file changes happen in the harness"},
			{Path: "turn.progress", Reason: "no streaming deltas are delivered to backends; held responses are evaluated whole"},
			{Path: "limits.maxUploadBytes", Reason: "the binary content upload binding is not implemented; attachments are described by metadata only, never uploaded"},
		},
		Transports:     []string{"http", "stdio", "in_process"},
		Authentication: []string{"bearer"},
		ToolPaths:      []string{ToolPathOpenAIChat, ToolPathOpenAIResponses, ToolPathAnthropicMessages, ToolPathGemini, ToolPathMCP},
		ContentCategories: []string{
			"text", "images", ahp.CategoryReasoning, ahp.CategoryToolCall, ahp.CategoryToolResult,
		},
		Limits: Limits{
			MinTimeoutMs:     intPtr(MinTimeoutMs),
			MaxTimeoutMs:     intPtr(MaxTimeoutMs),
			MaxContinuations: intPtr(MaxContinuations),
		},
		ManagedPolicy: ManagedPolicy{Scopes: []string{"user", "project"}, Disableable: true},
		CorrelationIdentityFields: []string{
			"id", "source", "parentEventId", "session.id", "turn.id", "call.id", "items.id",
		},
	}
}

// Event returns the manifest entry of one event type, or nil when the manifest does not
// cover it. Callers use it to check that a per-request advertisement only narrows.
func (m *CapabilityManifest) Event(eventType string) *ManifestEvent {
	for i := range m.Events {
		if m.Events[i].Event == eventType {
			return &m.Events[i]
		}
	}
	return nil
}
