package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// Translator converts one native request/response API (for example OpenAI chat
// completions) to canonical content and back. Implementations are stateless and safe for
// concurrent use; per-request state lives in Request and Response.
type Translator interface {
	// Provider is the model.provider value ("openai", "anthropic").
	Provider() string
	// ToolPath is the event path of tool calls seen through this API
	// ("hookproxy.openai.chat", "hookproxy.anthropic.messages", ...).
	ToolPath() string

	// DecodeRequest parses a native request body. A malformed body is a *BadRequest.
	DecodeRequest(body []byte) (*Request, error)
	// EncodeRequest renders the effective canonical list onto the original request body.
	// When items equal req.Items the original bytes are returned unchanged.
	EncodeRequest(req *Request, items []ahp.Message) ([]byte, error)

	// DecodeResponse parses a complete (non-streamed or assembled) native response body.
	DecodeResponse(body []byte) (*Response, error)
	// EncodeResponse renders the effective assistant messages and finish reason onto the
	// original response body. Tool calls are the tool_call parts of items (see ToolCall).
	EncodeResponse(resp *Response, items []ahp.Message, finishReason string) ([]byte, error)
	// SynthesizeResponse builds a complete native response for a request that was answered
	// without calling the upstream (a supplied result or a flow stop).
	SynthesizeResponse(req *Request, items []ahp.Message, finishReason string) ([]byte, error)

	// NewAssembler returns a stream assembler that reads the provider's SSE events and
	// yields the equivalent complete native response body.
	NewAssembler() Assembler
	// WriteStream re-emits a complete native response body as the provider's own SSE
	// stream, flushing as it goes when w is an http.Flusher.
	WriteStream(w io.Writer, body []byte) error

	// ErrorBody renders an error in the provider's own error format (used for refusals,
	// 400, 413 and 502 answers). code may be "".
	ErrorBody(status int, errType, code, message string) []byte
	// Stop reasons: the native finish reason for a turn that ended normally, and the one
	// to use when hookproxy removed every tool call or stopped the flow.
	TerminalFinishReason() string
}

// Assembler accumulates an SSE stream. Feed it every byte read from the upstream (in any
// chunking); Body returns the complete native response once the stream has ended.
type Assembler interface {
	Write(p []byte) (int, error)
	// Body returns the assembled response. err is a *UpstreamError when the stream carried
	// an error event, and a plain error when the stream was malformed or incomplete.
	Body() ([]byte, error)
}

// Request is a decoded native model request.
type Request struct {
	Model  string
	Stream bool
	// Params is every top-level native field except the message-bearing ones, as an opaque
	// object (model, max_tokens, tools, ...).
	Params json.RawMessage
	// Items is the canonical message list the model will see (system/developer first). It
	// is read-only, the list and its parts alike: a codec may share it with the decodes it
	// remembers and with later requests (the Anthropic codec's resumed decodes do). A
	// caller that changes it replaces messages and parts in a copy of its own.
	Items []ahp.Message
	// Gaps lists content the canonical view could not carry (server-held history, ...).
	Gaps []ahp.Gap
	// ToolResults are the tool results present in Items, in order. Read-only, as Items.
	ToolResults []ToolResult
	// PromptStart is the index in Items where a trailing new user prompt begins, or -1 when
	// the request does not end with a user prompt (for example it ends with tool results).
	PromptStart int
	// SessionHint is a native session identifier (metadata.user_id, user, ...) or "".
	SessionHint string

	// Original is the request body as received.
	Original []byte
	// Native is translator-private state (for example the raw JSON of each native message).
	Native any
	// BodyUnkept reports that nothing the decode returned or remembered points into the
	// body it decoded, except Original and Native, which the caller drops with the request:
	// once the request is over, the body's memory may hold another request's. False
	// (the safe answer) when the translator keeps the body (a decode later requests
	// resume) or does not say.
	BodyUnkept bool
}

// BodyReleaser is a Translator whose decodes may leave their body unkept
// (Request.BodyUnkept): its caller reads request bodies into buffers it can reuse, which
// costs nothing for a body that turns out to be kept.
type BodyReleaser interface {
	Translator
	// ReleasesBodies marks the translator; it is never called.
	ReleasesBodies()
}

// ToolResult is one tool result found in a request, joined with the tool call it answers
// when that call is in the same request's history.
type ToolResult struct {
	CallID    string
	ItemIndex int             // index of the role-tool message in Request.Items
	ToolName  string          // from the matching call, "" if not found
	Input     json.RawMessage // the call's arguments object, nil if not found
	IsError   bool
	CallFound bool
}

// Response is a decoded native model response.
type Response struct {
	ID           string
	Model        string
	Items        []ahp.Message // assistant output: text, reasoning and tool_call parts
	FinishReason string
	Usage        *ahp.Usage
	// HostedCalls are the tools the provider ran itself while answering (Responses
	// web_search_call and the like, Anthropic server_tool_use): already executed, so they
	// can only be observed (tool.after), never prevented by a proxy.
	HostedCalls []HostedCall

	Original []byte
	Native   any
}

// RawArgumentsKey names the one member of a tool call's canonical input when the native
// arguments are not a JSON object: their raw text, so that policies judge what the client
// would run rather than an empty object.
const RawArgumentsKey = "raw_arguments"

// HostedCall is one tool call the provider ran.
type HostedCall struct {
	ID      string
	Name    string
	Input   json.RawMessage // a JSON object
	Result  string          // the result as the response carries it (JSON text), "" if none
	IsError bool
}

// ToolCall is the decoded text of a tool_call part, hookproxy's convention for structure
// serialized into text (AHP-CONTENT-001): a serialized {"id","name","input"} object in a
// text part with category "tool_call".
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolCallPart builds the canonical part for a tool call.
func ToolCallPart(partID string, call ToolCall) ahp.Part {
	b, _ := appendToolCall(make([]byte, 0, len(call.ID)+len(call.Name)+len(call.Input)+32), call.ID, call.Name, BytesString(call.Input))
	p := ahp.TextPart(partID, string(b))
	p.Category = ahp.CategoryToolCall
	return p
}

// appendToolCall appends the text of a tool_call part (as ToolCallPart writes it) to dst;
// inputAt is where the (compacted) input starts in the result. It runs once per tool call
// of every assistant message of every request, so it is written by hand rather than by
// encoding/json, which would cost a reflective encoder per call. The output is the same:
// the strings escaped as encoding/json escapes them except that there is no HTML escaping
// (policies scan this text, and "\u0026\u0026" would hide a shell "&&"), and the input
// compacted.
func appendToolCall(dst []byte, id, name, input string) (b []byte, inputAt int) {
	if len(input) == 0 {
		input = `{}`
	}
	b = append(dst, `{"id":`...)
	b = jsontext.AppendStringJS(b, id)
	b = append(b, `,"name":`...)
	b = jsontext.AppendStringJS(b, name)
	b = append(b, `,"input":`...)
	inputAt = len(b) - len(dst)
	if jsontext.IsCompact(input) {
		b = append(b, input...)
	} else {
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, []byte(input)); err != nil { // callers pass valid JSON
			buf.Truncate(len(b))
			buf.WriteString(`{}`)
		}
		b = buf.Bytes()
	}
	return append(b, '}'), inputAt
}

// ParseToolCall decodes a tool_call part. ok is false for any other part.
func ParseToolCall(p *ahp.Part) (ToolCall, bool) {
	if p.Category != ahp.CategoryToolCall || p.Text == nil {
		return ToolCall{}, false
	}
	NoteCallDecode()
	c, ok := writtenCall(*p.Text)
	if !ok {
		// Not in the form the codecs write (a policy's edit, escapes in the id): what
		// encoding/json reads, which the fast form agrees with (FuzzParseToolCall).
		c = ToolCall{}
		if err := json.Unmarshal([]byte(*p.Text), &c); err != nil {
			return ToolCall{}, false
		}
	}
	if c.ID == "" || c.Name == "" {
		return ToolCall{}, false
	}
	return c, true
}

// writtenCall reads a tool_call part's text written as appendToolCall writes it —
// {"id":"…","name":"…","input":…} with id and name free of escapes and control bytes and
// valid UTF-8, and a valid input — without encoding/json's reflection, which costs more
// than the rest of the call's handling. ok is false for anything else.
func writtenCall(s string) (c ToolCall, ok bool) {
	const idKey, nameKey, inputKey = `{"id":"`, `,"name":"`, `,"input":`
	plain := func(from int) (string, int, bool) {
		end := jsontext.StringEnd(s, from-1)
		if end >= len(s)-1 || s[end] != '"' {
			return "", 0, false
		}
		v := s[from:end]
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] == '\\' {
				return "", 0, false
			}
		}
		return v, end + 1, utf8.ValidString(v)
	}
	if !strings.HasPrefix(s, idKey) || s[len(s)-1] != '}' {
		return ToolCall{}, false
	}
	id, i, ok := plain(len(idKey))
	if !ok || !strings.HasPrefix(s[i:], nameKey) {
		return ToolCall{}, false
	}
	name, i, ok := plain(i + len(nameKey))
	if !ok || !strings.HasPrefix(s[i:], inputKey) {
		return ToolCall{}, false
	}
	input := s[i+len(inputKey) : len(s)-1]
	if input == "" || jsontext.SkipSpace(input, 0) != 0 || strings.TrimRight(input, " \t\r\n") != input ||
		(jsontext.CheckOptions{}).CheckString(input) != nil {
		return ToolCall{}, false
	}
	return ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}, true
}

// LocatedCall is a tool call with its position in a message list.
type LocatedCall struct {
	ToolCall
	Item, Part int
}

// ToolCalls lists the tool calls in items, in order.
func ToolCalls(items []ahp.Message) []LocatedCall {
	var out []LocatedCall
	for i := range items {
		for j := range items[i].Parts {
			if c, ok := ParseToolCall(&items[i].Parts[j]); ok {
				out = append(out, LocatedCall{ToolCall: c, Item: i, Part: j})
			}
		}
	}
	return out
}

// BadRequest is a client body the translator cannot parse. The proxy answers 400 in the
// provider's format and calls no hook.
type BadRequest struct{ Reason string }

func (e *BadRequest) Error() string { return "bad request: " + e.Reason }

// UpstreamError is an error the upstream reported (an HTTP error body or an SSE error
// event). The proxy passes it to the client unchanged and observes it as model.error.
type UpstreamError struct {
	Status  int
	Type    string
	Message string
}

func (e *UpstreamError) Error() string { return "upstream error: " + e.Type + ": " + e.Message }

// ErrMalformed is wrapped by decode errors for upstream bodies that are not the
// provider's JSON (the proxy answers 502).
var ErrMalformed = errors.New("malformed upstream body")
