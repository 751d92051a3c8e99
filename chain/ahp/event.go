package ahp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

// Event types hookproxy emits or routes (AHP spec, execution-payloads.md). The full catalogue
// of 32 names is EventTypes.
const (
	EventSessionStart          = "session.start"
	EventSessionEnd            = "session.end"
	EventTurnStart             = "turn.start"
	EventTurnFinishBefore      = "turn.finish.before"
	EventTurnEnd               = "turn.end"
	EventModelRequestBefore    = "model.request.before"
	EventModelResponseAfter    = "model.response.after"
	EventModelError            = "model.error"
	EventToolBefore            = "tool.before"
	EventToolAfter             = "tool.after"
	EventHookFailure           = "hook.failure"
	EventUserElicitationResult = "user.elicitation.result"
	EventUserMessageOutbound   = "user.message.outbound"
)

// NewEventID returns a fresh event identity: "evt_" and 128 random bits in hex
// (crypto/rand), for events the harness creates itself.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "evt_" + hex.EncodeToString(b[:])
}

// Event is the AHP event envelope plus the event-specific members hookproxy produces.
// Members that the protocol requires to be present even when empty use omitzero on a
// slice (nil = absent, empty = present as []).
type Event struct {
	ID            string   `json:"id"`
	Source        string   `json:"source"`
	Type          string   `json:"type"`
	Time          string   `json:"time"`
	Session       *Session `json:"session,omitempty"`
	Turn          *Turn    `json:"turn,omitempty"`
	ParentEventID string   `json:"parentEventId,omitempty"`
	Synthesized   bool     `json:"synthesized,omitempty"`

	// model.*
	Model        *Model          `json:"model,omitempty"`
	Attempt      *Attempt        `json:"attempt,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
	Execution    *Execution      `json:"execution,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"`
	Usage        *Usage          `json:"usage,omitempty"`
	LatencyMs    *float64        `json:"latencyMs,omitempty"`
	Error        *ErrorInfo      `json:"error,omitempty"`
	Recovery     string          `json:"recovery,omitempty"`

	// turn.*
	Trigger           string   `json:"trigger,omitempty"`
	Outcome           string   `json:"outcome,omitempty"` // turn.finish.before, turn.end, tool.after
	ContinuationCount *int     `json:"continuationCount,omitempty"`
	LastAssistantItem *ItemRef `json:"lastAssistantItem,omitempty"`

	// tool.*
	Call       *Call    `json:"call,omitempty"`
	Tool       *Tool    `json:"tool,omitempty"`
	Path       string   `json:"path,omitempty"`
	Batch      *Batch   `json:"batch,omitempty"`
	DurationMs *float64 `json:"durationMs,omitempty"`

	// hook.failure
	Failure *Failure `json:"failure,omitempty"`

	Items      []Message                  `json:"items,omitzero"`
	Gaps       []Gap                      `json:"gaps,omitempty"`
	Native     json.RawMessage            `json:"native,omitempty"`
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Session identifies the agent session (open object on the wire).
type Session struct {
	ID          string `json:"id"`
	Synthesized bool   `json:"synthesized,omitempty"`
}

// Turn identifies the agent turn.
type Turn struct {
	ID          string `json:"id"`
	Synthesized bool   `json:"synthesized,omitempty"`
}

// Model names the provider model of a model.* event.
type Model struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
}

// Attempt is one provider attempt; a new attempt gets a new identity.
type Attempt struct {
	ID          string `json:"id"`
	Number      int    `json:"number"`
	Synthesized bool   `json:"synthesized,omitempty"`
}

// Execution statuses and skip reasons (AHP spec, execution-payloads.md).
const (
	ExecutionExecuted = "executed"
	ExecutionSkipped  = "skipped"

	SkipSuppliedResult = "supplied_result"
	SkipPolicy         = "policy"
	SkipCancelled      = "cancelled"
	SkipTimeout        = "timeout"
	SkipOther          = "other"
)

// Execution says whether the original operation ran.
type Execution struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Usage is provider-reported token usage. Missing counts mean unknown, never zero.
type Usage struct {
	Kind             string `json:"kind"`         // amount | total
	Scope            string `json:"scope"`        // attempt | turn
	Completeness     string `json:"completeness"` // complete | partial | unknown
	Provenance       string `json:"provenance"`   // provider | estimate | mixed
	InputTokens      *int64 `json:"inputTokens,omitempty"`
	OutputTokens     *int64 `json:"outputTokens,omitempty"`
	CacheReadTokens  *int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens *int64 `json:"cacheWriteTokens,omitempty"`
}

// ErrorInfo describes a failed model call or tool call. Status is a string or integer.
type ErrorInfo struct {
	Message string          `json:"message"`
	Class   string          `json:"class"`
	Code    string          `json:"code,omitempty"`
	Status  json.RawMessage `json:"status,omitempty"`
}

// ItemRef points at an item by id.
type ItemRef struct {
	ID string `json:"id"`
}

// Call is a tool invocation identity, stable across tool.before and tool.after.
type Call struct {
	ID          string `json:"id"`
	Synthesized bool   `json:"synthesized,omitempty"`
}

// Tool origins.
const (
	OriginNative = "native"
	OriginMCP    = "mcp"
)

// Tool describes the tool of a tool.* event. Input is always a JSON object.
type Tool struct {
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Origin string          `json:"origin"`
	Kind   string          `json:"kind,omitempty"`
	MCP    *MCPTool        `json:"mcp,omitempty"`
}

// MCPTool is the mcp descriptor, required iff Origin is "mcp". It never carries credentials.
type MCPTool struct {
	Server     MCPServer     `json:"server"`
	ToolName   string        `json:"toolName"`
	Provenance string        `json:"provenance"` // runtime | inferred
	Connection MCPConnection `json:"connection"`
}

// MCPServer identifies an MCP server.
type MCPServer struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// MCPConnection is the connection descriptor of an MCP server.
type MCPConnection struct {
	Transport string   `json:"transport"`
	URL       string   `json:"url,omitempty"`
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Gaps      []Gap    `json:"gaps,omitempty"`
}

// Batch groups sibling tool calls of one model response.
type Batch struct {
	ID          string   `json:"id"`
	CallIDs     []string `json:"callIds,omitempty"`
	Synthesized bool     `json:"synthesized,omitempty"`
}

// Failure is the payload of hook.failure; closed on the wire.
type Failure struct {
	BackendID string `json:"backendId"`
	Reason    string `json:"reason"`
	Policy    string `json:"policy"` // fail-open | fail-closed
}

// EventTypes is the full catalogue of the draft (AHP spec, execution-payloads.md), in catalogue
// order.
var EventTypes = []string{
	"session.start", "session.end", "config.change.before", "config.change.after",
	"turn.start", "turn.finish.before", "turn.end", "turn.progress",
	"model.request.before", "model.response.after", "model.error",
	"model.switch.before", "model.switch.after",
	"tool.before", "tool.after", "tool.permission.request", "tool.permission.resolved",
	"tool.progress", "tool.batch.after",
	"context.compact.before", "context.compact.after",
	"task.change.before", "task.change.after", "user.attention",
	"user.elicitation.request", "user.elicitation.result",
	"user.message.inbound", "user.message.outbound",
	"workspace.change.before", "workspace.change.after", "file.changed", "hook.failure",
}

// interceptable is the set of events that may be delivered by hooks/intercept.
var interceptable = map[string]bool{
	"tool.before": true, "tool.after": true, "session.start": true, "config.change.before": true,
	"turn.start": true, "turn.finish.before": true, "model.request.before": true,
	"model.response.after": true, "model.switch.before": true, "tool.permission.request": true,
	"tool.batch.after": true, "context.compact.before": true, "context.compact.after": true,
	"task.change.before": true, "user.elicitation.request": true, "user.elicitation.result": true,
	"user.message.inbound": true, "user.message.outbound": true, "workspace.change.before": true,
}

var knownEvent = func() map[string]bool {
	m := make(map[string]bool, len(EventTypes))
	for _, t := range EventTypes {
		m[t] = true
	}
	return m
}()

// IsEventType reports whether t is one of the 32 event names of the draft.
func IsEventType(t string) bool { return knownEvent[t] }

// IsInterceptable reports whether t may be delivered by hooks/intercept.
func IsInterceptable(t string) bool { return interceptable[t] }
