package ahp

// EventToolDefinitions is hookproxy's declared extension event (AHP-EXT-001: a
// reverse-DNS name, outside the draft's catalogue): tool-definition pinning found that
// what an agent is shown of its tools differs from the pins — a tool new, removed,
// changed, renamed, confusable with a pinned name — or that a description is poisoned.
// It is observe-only and offered only to a subscription that names it exactly: "*" and
// family wildcards select catalogue events only, so a backend that did not ask for it
// never receives it (an unknown event type is unsupported semantics for a receiver).
//
// The event carries source, id, time, the session where one is known, and the report in
// extensions under ExtToolDefinitions:
//
//	"extensions": {"hookproxy.tool_definitions": {
//	  "route": "/mcp/files", "api": "mcp", "scope": "mcp:/mcp/files",
//	  "changes": [{"tool": "add", "kind": "changed", "digest": "sha256:…", "pinned": "sha256:…", "action": "deny"}]}}
const EventToolDefinitions = "hookproxy.tool_definitions"

// ExtToolDefinitions is the event extension key holding a ToolDefinitionReport.
const ExtToolDefinitions = "hookproxy.tool_definitions"

// ToolDefinitionReport is the value of the ExtToolDefinitions extension.
type ToolDefinitionReport struct {
	Route   string                 `json:"route"`
	API     string                 `json:"api"`
	Scope   string                 `json:"scope"`
	Changes []ToolDefinitionChange `json:"changes"`
}

// ToolDefinitionChange is one change or finding. Kind is new, removed, changed, renamed,
// confusable or poisoned; Action what hookproxy does about it: warn, strip or deny.
type ToolDefinitionChange struct {
	Tool   string   `json:"tool"`
	Kind   string   `json:"kind"`
	Like   string   `json:"like,omitempty"`   // renamed, confusable: the pinned name
	Digest string   `json:"digest,omitempty"` // the definition seen
	Pinned string   `json:"pinned,omitempty"` // the pinned definition
	Poison []string `json:"poison,omitempty"` // poisoned: the finding kinds
	Action string   `json:"action"`
}
