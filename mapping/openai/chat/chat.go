package chat

import (
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Provider is the model.provider value of every OpenAI translator.
const Provider = "openai"

// ChatToolPath is the event path of tool calls seen through Chat Completions.
const ChatToolPath = "hookproxy.openai.chat"

// Chat translates OpenAI Chat Completions (POST /v1/chat/completions). It is stateless and
// safe for concurrent use; per-request state lives in mapping.Request.Native and
// mapping.Response.Native.
type Chat struct{}

var _ mapping.Translator = (*Chat)(nil)

// NewChat returns the Chat Completions translator.
func NewChat() *Chat { return &Chat{} }

// Provider implements mapping.Translator.
func (*Chat) Provider() string { return Provider }

// ToolPath implements mapping.Translator.
func (*Chat) ToolPath() string { return ChatToolPath }

// TerminalFinishReason implements mapping.Translator: "stop" is what the SDKs treat as a
// finished turn with nothing left to execute.
func (*Chat) TerminalFinishReason() string { return "stop" }

// ErrorBody implements mapping.Translator with OpenAI's error envelope, so an unmodified
// SDK raises its usual API error (refusals are 403 with type "policy_denied").
func (*Chat) ErrorBody(status int, errType, code, message string) []byte {
	return oaiwire.ErrorBody(errType, code, message)
}
