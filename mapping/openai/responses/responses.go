package responses

import (
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Provider is the model.provider value of the translator.
const Provider = "openai"

// ToolPath is the event path of tool calls seen through the Responses API.
const ToolPath = "hookproxy.openai.responses"

// Translator translates the OpenAI Responses API (POST /v1/responses). It is stateless and
// safe for concurrent use; per-request state lives in mapping.Request.Native and
// mapping.Response.Native.
type Translator struct{}

var _ mapping.Translator = (*Translator)(nil)

// New returns the Responses API translator.
func New() *Translator { return &Translator{} }

// Provider implements mapping.Translator.
func (*Translator) Provider() string { return Provider }

// ToolPath implements mapping.Translator.
func (*Translator) ToolPath() string { return ToolPath }

// TerminalFinishReason implements mapping.Translator. The Responses API has no separate
// stop reason: a response whose status is "completed" and that holds no call item is
// what an agent loop treats as a finished turn, so that is the terminal value. It is
// written back as status "completed" (EncodeResponse, SynthesizeResponse).
func (*Translator) TerminalFinishReason() string { return "completed" }

// ErrorBody implements mapping.Translator with OpenAI's error envelope (the same as Chat
// Completions), so an unmodified SDK raises its usual API error (refusals are 403 with
// type "policy_denied").
func (*Translator) ErrorBody(status int, errType, code, message string) []byte {
	return oaiwire.ErrorBody(errType, code, message)
}
