package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/hookproxy/hookproxy/mapping"
)

// Provider and tool path of this API (the manifest's toolPaths name them).
const (
	ProviderName = "anthropic"
	ToolPath     = "hookproxy.anthropic.messages"
)

// SynthesizedIDPrefix starts the id of every response hookproxy builds itself, so that such
// a response is recognisable downstream (DecodeResponse reports no usage for it).
const SynthesizedIDPrefix = "msg_hookproxy_"

// ErrReasoningImmutable is returned when an edit would change or invent the text of a
// thinking block. Anthropic signs thinking blocks and rejects altered ones, so the only
// honest edits are keeping or removing them.
var ErrReasoningImmutable = errors.New("anthropic: thinking blocks are signed by the provider and cannot be rewritten")

// Messages is the translator for POST /v1/messages. It is stateless and safe for
// concurrent use.
type Messages struct{}

var _ mapping.Translator = (*Messages)(nil)

// NewMessages returns the Anthropic Messages translator.
func NewMessages() *Messages { return &Messages{} }

// Provider is the model.provider value.
func (*Messages) Provider() string { return ProviderName }

// ToolPath is the event path of tool calls seen through this API.
func (*Messages) ToolPath() string { return ToolPath }

// ReleasesBodies marks Messages as a mapping.BodyReleaser: a decode that resumes a
// remembered one keeps nothing of its body (resume.go).
func (*Messages) ReleasesBodies() {}

// TerminalFinishReason is the stop reason of a turn that ended without pending tool calls.
func (*Messages) TerminalFinishReason() string { return "end_turn" }

// errorTypeForStatus is Anthropic's error type for an HTTP status, used when the caller
// names none and to give stream errors (which arrive under a 200) a status.
var errorTypeForStatus = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusInternalServerError:   "api_error",
	http.StatusBadGateway:            "api_error",
	http.StatusGatewayTimeout:        "timeout_error",
	529:                              "overloaded_error",
}

var statusForErrorType = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      529,
}

// ErrorBody renders an error as Anthropic does:
// {"type":"error","error":{"type":...,"message":...}}. Anthropic errors have no code
// field, so code is not rendered. An empty errType is derived from status.
func (*Messages) ErrorBody(status int, errType, code, message string) []byte {
	if errType == "" {
		errType = errorTypeForStatus[status]
		if errType == "" {
			errType = "api_error"
		}
	}
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{errType, message}}) // cannot fail: two strings
	return b
}

// upstreamError builds the mapping error for an Anthropic error object
// ({"type":"error","error":{...}} or the inner error object of a stream event).
func upstreamError(errType, message string) *mapping.UpstreamError {
	return &mapping.UpstreamError{Status: statusForErrorType[errType], Type: errType, Message: message}
}
