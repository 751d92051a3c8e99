package ahp

import (
	"context"
	"encoding/json"
)

// Request is a JSON-RPC 2.0 request or notification. ID is omitted for notifications.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  any             `json:"params"`
}

// Response is a JSON-RPC 2.0 response frame as received from a backend. Exactly one of
// Result and Error is present on a well-formed response.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// InterceptParams are the params of hooks/intercept. State is omitted for the first
// interceptor of a chain and carried to every later one.
type InterceptParams struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Event           *Event                     `json:"event"`
	Capabilities    *Capabilities              `json:"capabilities"`
	State           *State                     `json:"state,omitempty"`
	Extensions      map[string]json.RawMessage `json:"extensions,omitempty"`
}

// ObserveParams are the params of hooks/observe: only the version and the effective,
// permission-filtered event.
type ObserveParams struct {
	ProtocolVersion string `json:"protocolVersion"`
	Event           *Event `json:"event"`
}

// InterceptResult is the result member of a successful hooks/intercept response.
type InterceptResult struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Effects         []Effect                   `json:"effects"`
	Extensions      map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Effect type names (the eight core effects of the draft; AHP spec, capability-auth.md
// "Event-semantic capability bounds").
const (
	EffectDeny    = "deny"
	EffectAllow   = "allow"
	EffectAsk     = "ask"
	EffectModify  = "modify"
	EffectMessage = "message"
	EffectReturn  = "return"
	EffectFlow    = "flow"
	EffectInject  = "inject"
)

// Modification targets (AHP spec, capability-auth.md "Event-semantic capability bounds").
const (
	TargetInput        = "input"
	TargetOutput       = "output"
	TargetPrompt       = "prompt"
	TargetRequest      = "request"
	TargetResponse     = "response"
	TargetContent      = "content"
	TargetInstructions = "instructions"
	TargetSummary      = "summary"
	TargetWorkspace    = "workspace"
)

// Operations.
const (
	OpReplace  = "replace"
	OpMerge    = "merge"
	OpStop     = "stop"
	OpContinue = "continue"
	OpAppend   = "append"

	DeliverNow      = "now"
	DeliverNextTurn = "next_turn"
)

// Effect is the union of the core effect shapes, used to build replies (in-process
// policies, the standalone backend) and to carry accepted effects. Replies received from
// backends are decoded strictly by the chain, not through this struct, because every
// effect object is closed per type.
type Effect struct {
	Type        string                     `json:"type"`
	Reason      string                     `json:"reason,omitempty"`      // deny, flow stop
	Code        string                     `json:"code,omitempty"`        // deny
	Text        *string                    `json:"text,omitempty"`        // message
	Target      string                     `json:"target,omitempty"`      // modify, inject
	Operation   string                     `json:"operation,omitempty"`   // modify, flow, inject
	DeliverAt   string                     `json:"deliverAt,omitempty"`   // inject
	Instruction *string                    `json:"instruction,omitempty"` // flow continue
	Value       json.RawMessage            `json:"value,omitempty"`       // modify, return, inject
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`  // deny
}

// Capabilities is the per-request advertisement of what the harness can enforce for this
// interception (AHP spec, capability-auth.md "Discovery and honest capabilities"). Effects is
// never nil when encoded.
type Capabilities struct {
	Effects     []string             `json:"effects"`
	Modify      map[string]ModifyOps `json:"modify,omitempty"`
	Flow        *FlowCaps            `json:"flow,omitempty"`
	Inject      *InjectCaps          `json:"inject,omitempty"`
	Elicitation *ElicitationCaps     `json:"elicitation,omitempty"`
}

// ModifyOps says which operations a modify target admits. Both keys are always encoded.
type ModifyOps struct {
	Replace bool `json:"replace"`
	Merge   bool `json:"merge"`
}

// FlowCaps advertises flow operations and the continuation allowance.
type FlowCaps struct {
	Operations             []string `json:"operations"`
	RemainingContinuations *int     `json:"remainingContinuations,omitempty"`
	ContinuationCount      *int     `json:"continuationCount,omitempty"`
	MaxContinuations       *int     `json:"maxContinuations,omitempty"`
}

// InjectCaps advertises context injection.
type InjectCaps struct {
	Context InjectContextCaps `json:"context"`
}

// InjectContextCaps lists where injected context can be delivered.
type InjectContextCaps struct {
	Append    bool     `json:"append"`
	DeliverAt []string `json:"deliverAt"`
}

// ElicitationCaps advertises the elicitation modes supported at elicitation boundaries.
type ElicitationCaps struct {
	Form *struct{} `json:"form,omitempty"`
	URL  *struct{} `json:"url,omitempty"`
}

// Has reports whether effect type t is advertised.
func (c *Capabilities) Has(t string) bool {
	if c == nil {
		return false
	}
	for _, e := range c.Effects {
		if e == t {
			return true
		}
	}
	return false
}

// Permission values of the accumulated state (deny > ask > allow > none).
const (
	PermissionNone  = "none"
	PermissionAllow = "allow"
	PermissionAsk   = "ask"
	PermissionDeny  = "deny"

	FlowNone     = "none"
	FlowStop     = "stop"
	FlowContinue = "continue"
)

// State is the settled decision so far, sent to later interceptors as params.state.
// Candidate is always encoded (null when unset).
type State struct {
	Permission   string     `json:"permission"`
	Candidate    *Candidate `json:"candidate"`
	Flow         string     `json:"flow,omitempty"`
	Instructions []string   `json:"instructions,omitempty"`
	Injections   []Effect   `json:"injections,omitempty"`
}

// Candidate is a bound supplied result (return effect).
type Candidate struct {
	Value json.RawMessage `json:"value"`
}

// InterceptRequest is one hooks/intercept call as handed to an in-process interceptor.
type InterceptRequest struct {
	ID     string
	Params *InterceptParams
}

// Interceptor is the contract every built-in policy implements. Its result is encoded and
// then validated and staged exactly like a reply from a remote backend; an error is an
// operational failure of that subscription.
type Interceptor interface {
	Intercept(ctx context.Context, req *InterceptRequest) (*InterceptResult, error)
}

// Observer is optionally implemented by an in-process interceptor that wants hooks/observe
// deliveries; interceptors without it ignore observations.
type Observer interface {
	Observe(ctx context.Context, params *ObserveParams) error
}

// NoEffects is the result that requests no change.
func NoEffects() *InterceptResult {
	return &InterceptResult{ProtocolVersion: ProtocolVersion, Effects: []Effect{}}
}

// EventBound is the per-event capability bound of capabilities.schema.json#/$defs
// (AHP spec, capability-auth.md "Event-semantic capability bounds"): which effects, which
// modify target and which flow operations an advertisement for that event may contain at most.
type EventBound struct {
	Effects []string
	Target  string   // "" when the event has no modify target
	FlowOps []string // nil when flow is not allowed
}

// EventBounds maps each interceptable event to its bound.
var EventBounds = map[string]EventBound{
	"session.start":            {Effects: []string{"inject", "message"}},
	"config.change.before":     {Effects: []string{"deny", "message"}},
	"turn.start":               {Effects: []string{"deny", "modify", "inject", "flow", "message"}, Target: TargetPrompt, FlowOps: []string{"stop"}},
	"turn.finish.before":       {Effects: []string{"modify", "flow", "message"}, Target: TargetResponse, FlowOps: []string{"stop", "continue"}},
	"model.request.before":     {Effects: []string{"deny", "modify", "inject", "return", "flow", "message"}, Target: TargetRequest, FlowOps: []string{"stop"}},
	"model.response.after":     {Effects: []string{"modify", "flow", "message"}, Target: TargetResponse, FlowOps: []string{"stop"}},
	"model.switch.before":      {Effects: []string{"deny", "flow", "message"}, FlowOps: []string{"stop"}},
	"tool.before":              {Effects: []string{"deny", "allow", "ask", "modify", "inject", "flow", "return", "message"}, Target: TargetInput, FlowOps: []string{"stop"}},
	"tool.after":               {Effects: []string{"modify", "inject", "flow", "message"}, Target: TargetOutput, FlowOps: []string{"stop", "continue"}},
	"tool.permission.request":  {Effects: []string{"allow", "deny", "modify", "flow", "message"}, Target: TargetInput, FlowOps: []string{"stop"}},
	"tool.batch.after":         {Effects: []string{"flow", "inject", "message"}, FlowOps: []string{"stop"}},
	"context.compact.before":   {Effects: []string{"deny", "modify", "return", "inject", "message"}, Target: TargetInstructions},
	"context.compact.after":    {Effects: []string{"inject", "modify", "message"}, Target: TargetSummary},
	"task.change.before":       {Effects: []string{"deny", "message"}},
	"user.elicitation.request": {Effects: []string{"deny", "return", "message"}},
	"user.elicitation.result":  {Effects: []string{"modify", "message"}, Target: TargetContent},
	"user.message.inbound":     {Effects: []string{"deny", "modify", "message"}, Target: TargetPrompt},
	"user.message.outbound":    {Effects: []string{"deny", "modify", "message"}, Target: TargetContent},
	"workspace.change.before":  {Effects: []string{"deny", "modify", "message"}, Target: TargetWorkspace},
}
