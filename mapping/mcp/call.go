package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// MethodToolsCall is the MCP method that runs a tool.
const MethodToolsCall = "tools/call"

// ToolPath is the AHP event path of tool calls seen on an MCP route.
const ToolPath = "hookproxy.mcp"

// paramsKeys are the tools/call params members hookproxy reads; see envelopeKeys for why a
// case variant is refused.
var paramsKeys = []string{"name", "arguments", "_meta"}

// ToolCall is a tools/call request.
type ToolCall struct {
	ID   json.RawMessage
	Name string
	// Arguments is always a JSON object: {} when the request has none (or null).
	Arguments json.RawMessage
	// Meta is params._meta, nil when absent.
	Meta json.RawMessage
}

// ToolCallOf returns the tools/call request that m is. ok is false for every other message.
// A tools/call whose params cannot be read (no tool name, arguments that are not an
// object) is a *Error with CodeInvalidParams: such a call is answered by hookproxy and
// never forwarded, since no hook could have judged it.
func ToolCallOf(m *Message) (call *ToolCall, ok bool, err error) {
	if m.Method != MethodToolsCall {
		return nil, false, nil
	}
	if m.Kind != KindRequest {
		// ParseBody never yields this; a caller building a Message by hand might.
		return nil, true, &Error{Code: CodeInvalidRequest, Message: "invalid JSON-RPC request: tools/call needs an id"}
	}
	params := gjson.GetBytes(m.Raw, "params")
	if !params.IsObject() {
		return nil, true, invalidParams("params must be an object")
	}
	if k := caseVariant(params, paramsKeys); k != "" {
		return nil, true, invalidParams(fmt.Sprintf("member %q differs from a tools/call member only in letter case", k))
	}
	name := params.Get("name")
	if name.Type != gjson.String || name.Str == "" {
		return nil, true, invalidParams("params.name must be a non-empty string")
	}
	call = &ToolCall{ID: m.ID, Name: name.Str, Arguments: json.RawMessage(`{}`)}
	switch args := params.Get("arguments"); {
	case !args.Exists() || args.Type == gjson.Null:
	case args.IsObject():
		call.Arguments = json.RawMessage(args.Raw)
	default:
		return nil, true, invalidParams("params.arguments must be an object")
	}
	if meta := params.Get("_meta"); meta.Exists() {
		call.Meta = json.RawMessage(meta.Raw)
	}
	return call, true, nil
}

func invalidParams(reason string) *Error {
	return &Error{Code: CodeInvalidParams, Message: "invalid tools/call params: " + reason}
}

// WithArguments returns the raw tools/call request msg with params.arguments set to args
// (a JSON object); every other member keeps its bytes.
func WithArguments(msg []byte, args json.RawMessage) ([]byte, error) {
	if !gjson.ValidBytes(args) || !gjson.ParseBytes(args).IsObject() {
		return nil, fmt.Errorf("mcp: arguments must be a JSON object")
	}
	out, err := sjson.SetRawBytes(msg, "params.arguments", args)
	if err != nil {
		return nil, fmt.Errorf("mcp: set arguments: %w", err)
	}
	return out, nil
}
