package mapping

import (
	"encoding/json"
	"fmt"
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

// EditState is where a stream editor stands. It is the editor's one end state: the
// transitions are made in StreamFeed alone (to), and the editors ask it rather than keep
// flags of their own.
//
//	Relaying ──Push──▶ HoldingCall ──Drain empties the queue──▶ Relaying
//	Relaying, HoldingCall ──the upstream's terminal event or end──▶ Draining
//	Relaying, HoldingCall, Draining ──Finish──▶ Done
//	any but Done ──an error──▶ Failed
//
// Done and Failed are final. A flow stop is not a stream state: the stream goes on and
// the settler removes every later call (CallSettler).
type EditState uint8

const (
	// Relaying: nothing is held; each complete event goes to the client as it arrives.
	Relaying EditState = iota
	// HoldingCall: a tool call is open or undecided; it and everything after it wait in
	// the hold queue until it is settled (AHP-DEC-002).
	HoldingCall
	// Draining: the upstream's stream ended (its terminal event, or its end); what is
	// held is settled and written, and the editor writes the stream's end.
	Draining
	// Done: the last event (terminal, an upstream error event, or Fail's) was written;
	// further input is read and dropped, as a client drops it.
	Done
	// Failed: an error ended the editing; Write and Close return it and nothing more of
	// the upstream's is written.
	Failed
)

var editStateNames = [...]string{"relaying", "holdingCall", "draining", "done", "failed"}

func (s EditState) String() string {
	if int(s) < len(editStateNames) {
		return editStateNames[s]
	}
	return "EditState(" + strconv.Itoa(int(s)) + ")"
}

// StreamFeed is what every stream editor shares: the SSE splitter the upstream's bytes go
// into, the hold queue of entries T behind the first undecided call, and the editor's
// state. Name prefixes its errors ("openai chat stream").
type StreamFeed[T any] struct {
	SSE   SSESplitter
	Name  string
	queue HoldQueue[T]
	state EditState
	err   error
}

// to is the one place the state changes. Done and Failed are final; once Draining, the
// editor only settles what is left and ends; and an editor that holds something is
// HoldingCall, not Relaying.
func (f *StreamFeed[T]) to(s EditState) {
	switch f.state {
	case Done, Failed:
		return
	case Draining:
		if s == Relaying || s == HoldingCall {
			return
		}
	}
	if s == Relaying && f.queue.Len() > 0 {
		s = HoldingCall
	}
	f.state = s
}

// State is where the editor stands.
func (f *StreamFeed[T]) State() EditState { return f.state }

// Ended reports that the editor writes nothing more of the upstream's (Done or Failed).
func (f *StreamFeed[T]) Ended() bool { return f.state == Done || f.state == Failed }

// Failed ends the editing with err (state Failed) and returns it; once Failed, the first
// error stays and is returned. An editor already Done stays Done (err is returned only).
func (f *StreamFeed[T]) Failed(err error) error {
	switch f.state {
	case Failed:
		return f.err
	case Done:
		return err
	}
	f.err = err
	f.to(Failed)
	return err
}

// Write feeds upstream bytes to the splitter, which dispatches each complete event.
func (f *StreamFeed[T]) Write(p []byte) (int, error) {
	switch f.state {
	case Failed:
		return 0, f.err
	case Done:
		return len(p), nil
	}
	if err := f.SSE.Write(p); err != nil {
		return 0, f.Failed(fmt.Errorf("%s: %w", f.Name, err))
	}
	return len(p), nil
}

// Drain marks the upstream's stream ended: what is held is settled next (Draining).
func (f *StreamFeed[T]) Drain() { f.to(Draining) }

// Finish writes last, the last bytes the client reads (the terminal event, an upstream
// error event, or the error event of the editor's Fail), and the editor is Done.
func (f *StreamFeed[T]) Finish(out io.Writer, last []byte) error {
	f.to(Done)
	_, err := out.Write(last)
	return err
}

// CloseInput ends the input: an event cut off before its blank line is still dispatched,
// as the assemblers (and the SDKs) read it. It returns the editor's error, if any.
func (f *StreamFeed[T]) CloseInput() error {
	if f.state == Failed {
		return f.err
	}
	if f.state != Done {
		if _, err := f.SSE.Close(); err != nil && f.state != Failed {
			return f.Failed(fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	if f.state == Failed {
		return f.err
	}
	return nil
}

// Held is the number of upstream bytes the editor holds: its queue and a partial event.
func (f *StreamFeed[T]) Held() int { return f.queue.Held() + f.SSE.Buffered() }

// Holding reports whether anything waits behind an undecided call (an event that comes
// now must queue behind it).
func (f *StreamFeed[T]) Holding() bool { return f.queue.Len() > 0 }

// Push queues an entry that holds size bytes behind the first undecided call.
func (f *StreamFeed[T]) Push(it T, size int) {
	f.queue.Push(it, size)
	f.to(HoldingCall)
}

// Grow counts n more bytes held by an entry already queued (a held call's fragment).
func (f *StreamFeed[T]) Grow(n int) { f.queue.Grow(n) }

// Queued are the entries waiting, front first. The slice is the queue's own.
func (f *StreamFeed[T]) Queued() []T { return f.queue.Entries() }

// Release hands the queue to step, front first (HoldQueue.Drain); the editor relays
// again once nothing is held.
func (f *StreamFeed[T]) Release(step func(T) (size int, take bool, err error)) error {
	err := f.queue.Drain(step)
	if f.queue.Len() == 0 {
		f.to(Relaying)
	}
	return err
}
