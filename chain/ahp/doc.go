// Package ahp holds the Agent Hooks Protocol wire model shared by every part of hookproxy:
// JSON-RPC envelopes, the event envelope, canonical messages and parts, capabilities,
// effects and the accumulated chain state, and the encoder of the hooks/intercept and
// hooks/observe frames (encode_event.go: no reflection, byte for byte encoding/json's
// output). It knows no provider JSON and performs no I/O.
//
// Field names here are the protocol's own. Comments cite the protocol by requirement id
// (AHP-AREA-NNN) or as (AHP spec, DOC "SECTION"): the document DOC under spec/draft of the
// public specification repository agenthooksprotocol/agent-hooks-protocol, and the heading
// SECTION in it.
package ahp

// ProtocolVersion is the only snapshot this implementation speaks (AHP-VER-001).
const ProtocolVersion = "draft"

// JSON-RPC method names (AHP-RPC-002).
const (
	MethodIntercept    = "hooks/intercept"
	MethodObserve      = "hooks/observe"
	MethodCapabilities = "hooks/capabilities"
)

// AHP-reserved and standard JSON-RPC error codes (AHP spec, base/errors.md "JSON-RPC errors").
const (
	CodeParseError                 = -32700
	CodeInvalidRequest             = -32600
	CodeMethodNotFound             = -32601
	CodeInvalidParams              = -32602
	CodeUnsupportedProtocolVersion = -32001
	CodeUnsupportedEvent           = -32002
	CodeBackendUnavailable         = -32003
	CodeBackendInternalError       = -32004
)
