package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// JSON-RPC 2.0 error codes hookproxy answers with.
const (
	CodeParseError     = -32700 // the body is not JSON
	CodeInvalidRequest = -32600 // JSON, but not a JSON-RPC message or batch
	CodeInvalidParams  = -32602 // a tools/call whose params are unusable
	CodeInternalError  = -32603 // the MCP server's answer could not be read or checked

	// CodePolicyDenied is the JSON-RPC error code of a policy refusal. JSON-RPC leaves
	// -32000..-32099 to the implementation; -32091 was picked because the codes MCP and its
	// SDKs already use live elsewhere in that range: -32000/-32001 (connection closed and
	// request timeout in the TypeScript SDK), -32002 (resource not found), -32020..-32022
	// (Go SDK header, capability and version errors) and -32042 (URL elicitation required).
	CodePolicyDenied = -32091
)

// maxDepth bounds the nesting of a JSON-RPC body. MCP payloads nest a few levels (tool
// schemas the deepest); the bound keeps every later walk shallow.
const maxDepth = 512

// Error is a JSON-RPC error that hookproxy answers with instead of forwarding.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return "json-rpc " + strconv.Itoa(e.Code) + ": " + e.Message }

func invalidRequest(format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "invalid JSON-RPC request: " + fmt.Sprintf(format, args...)}
}

// Kind says what a JSON-RPC message is.
type Kind int

// Message kinds.
const (
	KindRequest      Kind = iota // method and id: expects a response
	KindNotification             // method, no id
	KindResponse                 // id and exactly one of result and error
)

// Message is one JSON-RPC message of a body.
type Message struct {
	Raw    []byte // the message as received
	Kind   Kind
	ID     json.RawMessage // requests and responses; nil for notifications
	Method string          // requests and notifications

	// Responses: exactly one of Result and Err is set.
	Result json.RawMessage
	Err    *Error
}

// Body is a decoded POST body or JSON answer: one message, or a batch of them.
type Body struct {
	Batch    bool
	Messages []Message
}

// Encode renders the body with msgs (raw messages) in place of its own, keeping its single
// or batch shape. A single body must get exactly one message.
func (b *Body) Encode(msgs [][]byte) []byte {
	if !b.Batch && len(msgs) == 1 {
		return msgs[0]
	}
	return EncodeBatch(msgs)
}

// SingleID is the id of the one request of a single-message body, or nil for a batch.
func (b *Body) SingleID() json.RawMessage {
	if b.Batch || len(b.Messages) != 1 {
		return nil
	}
	return b.Messages[0].ID
}

// EncodeBatch renders msgs as a JSON array.
func EncodeBatch(msgs [][]byte) []byte {
	out := make([]byte, 0, 64)
	out = append(out, '[')
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return append(out, ']')
}

// envelopeKeys are the members whose value decides what a message is. A key that differs
// from one of them only in letter case is refused: a case-insensitive decoder (Go's
// encoding/json, for one) would take it for the real member, gjson would not.
var envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// ParseBody decodes a JSON-RPC body: one message or a non-empty batch. A body that is not
// JSON is a *Error with CodeParseError; anything else malformed (duplicate keys, a missing
// or wrong jsonrpc member, a message that is neither request, notification nor response)
// is a *Error with CodeInvalidRequest. It never panics on input.
func ParseBody(body []byte) (*Body, error) {
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	root := gjson.ParseBytes(body)
	switch {
	case root.IsObject():
		m, err := parseMessage(root)
		if err != nil {
			return nil, err
		}
		return &Body{Messages: []Message{*m}}, nil
	case root.IsArray():
		elems := root.Array()
		if len(elems) == 0 {
			return nil, invalidRequest("empty batch")
		}
		b := &Body{Batch: true, Messages: make([]Message, 0, len(elems))}
		for i, e := range elems {
			m, err := parseMessage(e)
			if err != nil {
				var je *Error
				if errors.As(err, &je) {
					je.Message += " (batch element " + strconv.Itoa(i) + ")"
				}
				return nil, err
			}
			b.Messages = append(b.Messages, *m)
		}
		return b, nil
	}
	return nil, invalidRequest("the body is neither a message object nor a batch array")
}

func parseMessage(v gjson.Result) (*Message, error) {
	if !v.IsObject() {
		return nil, invalidRequest("a message must be an object")
	}
	if k := caseVariant(v, envelopeKeys); k != "" {
		return nil, invalidRequest("member %q differs from a JSON-RPC member only in letter case", k)
	}
	if jv := v.Get("jsonrpc"); jv.Type != gjson.String || jv.Str != "2.0" {
		return nil, invalidRequest(`"jsonrpc" must be "2.0"`)
	}
	m := &Message{Raw: []byte(v.Raw)}
	id := v.Get("id")
	if id.Exists() && id.Type != gjson.String && id.Type != gjson.Number {
		// MCP forbids null ids, and JSON-RPC allows only strings and numbers besides.
		return nil, invalidRequest(`"id" must be a string or a number`)
	}
	if id.Exists() {
		m.ID = json.RawMessage(id.Raw)
	}
	method := v.Get("method")
	if method.Exists() {
		if method.Type != gjson.String || method.Str == "" {
			return nil, invalidRequest(`"method" must be a non-empty string`)
		}
		if p := v.Get("params"); p.Exists() && !p.IsObject() && !p.IsArray() {
			return nil, invalidRequest(`"params" must be an object`)
		}
		if v.Get("result").Exists() || v.Get("error").Exists() {
			return nil, invalidRequest("a request cannot carry result or error")
		}
		m.Method = method.Str
		m.Kind = KindNotification
		if id.Exists() {
			m.Kind = KindRequest
		} else if m.Method == MethodToolsCall {
			// Nobody would see an answer, so nobody would see a refusal either; a server
			// that ran it anyway would have run a tool no hook judged.
			return nil, invalidRequest("tools/call needs an id")
		}
		return m, nil
	}
	res, rerr := v.Get("result"), v.Get("error")
	switch {
	case !id.Exists():
		return nil, invalidRequest(`a message needs "method" or "id"`)
	case res.Exists() == rerr.Exists():
		return nil, invalidRequest("a response carries exactly one of result and error")
	case res.Exists():
		m.Kind, m.Result = KindResponse, json.RawMessage(res.Raw)
	default:
		code, msg := rerr.Get("code"), rerr.Get("message")
		if !rerr.IsObject() || code.Type != gjson.Number || msg.Type != gjson.String {
			return nil, invalidRequest("an error needs an integer code and a message")
		}
		m.Kind, m.Err = KindResponse, &Error{Code: int(code.Int()), Message: msg.Str}
	}
	return m, nil
}

// caseVariant returns the first member of obj whose name equals one of keys ignoring case
// without being that key, or "".
func caseVariant(obj gjson.Result, keys []string) string {
	bad := ""
	obj.ForEach(func(k, _ gjson.Result) bool {
		name := k.String()
		for _, want := range keys {
			if name != want && strings.EqualFold(name, want) {
				bad = name
				return false
			}
		}
		return true
	})
	return bad
}

// CheckJSON validates raw as one JSON value with no duplicate object key at any depth and
// a bounded nesting. Duplicates matter because gjson reads a member's first occurrence and
// most other parsers its last: a policy would inspect one value while the server (or the
// client) acts on another. Keys are compared unescaped, so "a" and "\u0061" collide. One
// iterative pass (jsontext.Check): a hostile nesting cannot exhaust the stack.
func CheckJSON(raw []byte) error {
	err := jsontext.Check(raw, maxDepth)
	if err == nil {
		return nil
	}
	var ce *jsontext.CheckError
	errors.As(err, &ce)
	switch ce.Kind {
	case jsontext.ErrDepth:
		return invalidRequest("JSON nested deeper than %d levels", maxDepth)
	case jsontext.ErrDuplicateKey:
		return invalidRequest("duplicate object key %q", ce.Key)
	}
	return &Error{Code: CodeParseError, Message: fmt.Sprintf("parse error: the body is not valid JSON: %s at byte %d", ce.Msg, ce.Offset)}
}

// nullID is the id of an answer to a message whose id could not be read.
var nullID = json.RawMessage("null")

// ResultResponse renders a JSON-RPC response carrying result.
func ResultResponse(id json.RawMessage, result []byte) []byte {
	if len(id) == 0 {
		id = nullID
	}
	out := make([]byte, 0, len(result)+len(id)+32)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	return append(out, '}')
}

// ErrorResponse renders a JSON-RPC error response. data may be nil. A nil id renders as
// null (the id of a body that could not be read).
func ErrorResponse(id json.RawMessage, code int, message string, data json.RawMessage) []byte {
	if len(id) == 0 {
		id = nullID
	}
	out := make([]byte, 0, len(message)+len(id)+64)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":{"code":`...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, `,"message":`...)
	out = appendString(out, message)
	if len(data) > 0 {
		out = append(out, `,"data":`...)
		out = append(out, data...)
	}
	return append(out, "}}"...)
}

// appendString appends s as a JSON string literal. HTML characters stay as they are: the
// text is for an agent, not for a browser (jsontext.AppendString, as every codec writes).
func appendString(dst []byte, s string) []byte { return jsontext.AppendString(dst, s) }
