package mapping

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Incremental stream editing. When only tool.before intercepts the response
// side, a streamed response is not held whole: the translator's StreamEditor relays every
// event that carries no tool call to the client as it arrives, holds the events of each
// tool call until the call's arguments are complete, asks the proxy to settle that call's
// tool.before, and then emits the call (possibly with rewritten arguments) or removes it,
// keeping the indices the client relies on consistent. The message the client assembles
// from the edited stream is the one the held path (assemble, decode, RemoveCalls /
// ToolCallPart, EncodeResponse) would have produced for the same verdicts.

// StreamCall is one tool call of a streamed response whose arguments are complete.
type StreamCall struct {
	// ToolCall holds the call's id, name and input exactly as DecodeResponse of the
	// assembled response would put them in the call's tool_call part.
	ToolCall
	// Index is the call's position among the response's tool calls, in stream order,
	// counting every call the upstream sent (removed ones too), from 0.
	Index int
}

// CallVerdict is the settled tool.before of one streamed tool call.
type CallVerdict struct {
	// Remove: the call never reaches the client (deny, fail-closed failure or flow stop).
	Remove bool
	// Stop: flow stop. The call is removed (Remove is implied) and so is every later tool
	// call of the response, without a Decide for them (StreamDecider.Skipped reports each).
	Stop bool
	// Input, when not nil, is the effective arguments (modify(input)); the call is emitted
	// with them in place of the upstream's.
	Input json.RawMessage
	// Note is the text the agent is told about a removed call. The notes of one response
	// are joined with "\n" and emitted as assistant text just before the response's finish,
	// as RemoveCalls adds them on the held path.
	Note string
}

// StreamDecider settles the tool calls of one streamed response.
type StreamDecider interface {
	// Decide is called once per tool call, in stream order, as soon as the call is
	// complete, and before any event that followed the call in the upstream stream is
	// written. An error ends the editing: the editor writes nothing more of the upstream's
	// and its Write returns that error.
	Decide(call StreamCall) (CallVerdict, error)
	// Skipped reports a call removed unasked because an earlier call stopped the flow.
	Skipped(call StreamCall)
}

// StreamEditor relays one streamed response to the client, holding tool calls per call.
// Write and Close return an error that ends the response; the caller then writes Fail
// (the response head is already with the client) or closes the connection.
type StreamEditor interface {
	// Write feeds upstream bytes in any chunking. Every complete event that can go to the
	// client is written to the editor's output before Write returns; the events of a call
	// not yet complete, and the events that came after it, stay inside until it is decided.
	// Nothing after the stream's terminal event is relayed.
	Write(p []byte) (int, error)
	// Close marks the upstream's end. A stream that ended before its terminal event is an
	// error; a tool call still open then is dropped, never sent undecided.
	Close() error
	// Fail writes an in-stream error event in the provider's own stream format, as the
	// last thing the client reads. errType and code follow ErrorBody; code may be "".
	Fail(errType, code, message string) error
	// Held is the number of upstream bytes the editor holds right now (bounded by the
	// tool calls being held, never by the length of the text).
	Held() int
}

// HostedCallReporter is implemented by editors that can say, after the stream, which
// tools the provider ran itself (from the items they relayed), so that they are observed
// without keeping the whole stream.
type HostedCallReporter interface {
	HostedCalls() []HostedCall
}

// StreamEditing is implemented by translators whose streams can be edited incrementally.
type StreamEditing interface {
	NewStreamEditor(out io.Writer, d StreamDecider) StreamEditor
}

// RemoveCalls deletes the tool_call parts of the removed calls (removed[i] for calls[i])
// and appends an assistant text part carrying note, so the agent (and the model, next
// time) learns why. The note goes to the assistant message of the first removed call, or
// to a new assistant message with id noteMsgID when that message is not an assistant's.
// The held path and the stream editors' equivalence tests share it.
func RemoveCalls(items []ahp.Message, calls []LocatedCall, removed map[int]bool, note, noteMsgID string) []ahp.Message {
	drop := map[[2]int]bool{}
	noteItem := -1
	for i, c := range calls {
		if removed[i] {
			drop[[2]int{c.Item, c.Part}] = true
			if noteItem < 0 {
				noteItem = c.Item
			}
		}
	}
	out := make([]ahp.Message, len(items))
	for i, m := range items {
		out[i] = m
		parts := make([]ahp.Part, 0, len(m.Parts))
		for j, p := range m.Parts {
			if !drop[[2]int{i, j}] {
				parts = append(parts, p)
			}
		}
		out[i].Parts = parts
	}
	if note == "" {
		return out
	}
	if noteItem < 0 || out[noteItem].Role != ahp.RoleAssistant {
		out = append(out, ahp.Message{ID: noteMsgID, Role: ahp.RoleAssistant, Synthesized: true})
		noteItem = len(out) - 1
	}
	p := ahp.TextPart(out[noteItem].ID+".hookproxy."+strconv.Itoa(len(out[noteItem].Parts)), note)
	p.Synthesized = true
	out[noteItem].Parts = append(out[noteItem].Parts, p)
	return out
}
