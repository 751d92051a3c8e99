package backend

import (
	"encoding/json"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// rpcResponse is a JSON-RPC 2.0 response as this backend writes it. ID is always encoded:
// null when the request's id could not be read (JSON-RPC 2.0 §5).
type rpcResponse struct {
	JSONRPC string               `json:"jsonrpc"`
	ID      json.RawMessage      `json:"id"`
	Result  *ahp.InterceptResult `json:"result,omitempty"`
	Error   *rpcError            `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

var nullID = json.RawMessage("null")

// replyError answers with a JSON-RPC error. data must never carry secrets or event
// content (AHP spec, base/errors.md "JSON-RPC errors").
func replyError(id json.RawMessage, code int, message string, data any) outcome {
	if id == nil {
		id = nullID
	}
	b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: message, Data: data}})
	if err != nil {
		// Only data could fail to encode, and it is built here from plain values.
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32004,"message":"Backend internal error"}}`)
	}
	return outcome{reply: b}
}

// resultFrame encodes a successful hooks/intercept response.
func resultFrame(id json.RawMessage, effects []ahp.Effect, ext map[string]json.RawMessage) ([]byte, error) {
	return json.Marshal(rpcResponse{JSONRPC: "2.0", ID: id,
		Result: &ahp.InterceptResult{ProtocolVersion: ahp.ProtocolVersion, Effects: effects, Extensions: ext}})
}
