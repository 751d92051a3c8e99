package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// One streamed tool call takes one path through a stream editor:
//
//	its events → the codec's call decoder → CallSettler.Judge: CanonicalCall → Settle
//	(StreamDecider.Decide) → the kept call as it came, or patched by the codec's call
//	writer with a modify's input → the editor emits its events
//
// The codec reads the call with the same function its DecodeResponse reads a call with, so
// the StreamCall carries exactly the id, name and input the held path's tool_call part
// does, and no native document is built around the call to be decoded (or re-encoded)
// whole.

// CallSettler is the bookkeeping every stream editor shares when it settles its calls:
// they are numbered in stream order, and after a flow stop every later call is removed
// unasked (StreamDecider.Skipped). Each editor keeps where its notes and kept calls go.
type CallSettler struct {
	D       StreamDecider
	decided int
	stopped bool
}

// Settlement is the settled tool.before of one streamed call, as its editor acts on it.
type Settlement struct {
	// Kept: the call goes to the client.
	Kept bool
	// Input, for a kept call, is the effective input of a modify(input) as the held path's
	// tool_call part carries it (compacted, as ToolCallPart writes it); nil when the call
	// goes out as the upstream sent it.
	Input json.RawMessage
	// Note is the text the agent is told about a removed call ("" for none).
	Note string
}

// Settle settles one complete call, read by the codec's call decoder (CanonicalCall).
func (s *CallSettler) Settle(call ToolCall) (Settlement, error) {
	sc := StreamCall{ToolCall: call, Index: s.decided}
	s.decided++
	if s.stopped {
		s.D.Skipped(sc)
		return Settlement{}, nil
	}
	v, err := s.D.Decide(sc)
	if err != nil {
		return Settlement{}, err
	}
	if v.Remove || v.Stop {
		s.stopped = s.stopped || v.Stop
		return Settlement{Note: v.Note}, nil
	}
	if v.Input == nil {
		return Settlement{Kept: true}, nil
	}
	return Settlement{Kept: true, Input: compactInput(string(v.Input))}, nil
}

// Judged is a streamed call settled and, when kept, rendered for the client.
type Judged struct {
	Kept bool
	// Out is the kept call's native form as the client gets it.
	Out string
	// Note is the text the agent is told about a removed call ("" for none).
	Note string
}

// ErrCallUnreadable is a complete call its codec's decoder reads as no call (an empty id
// or name, which ParseToolCall refuses).
var ErrCallUnreadable = errors.New("streamed tool call could not be read")

// Judge is the one path of a streamed call once the codec's call decoder has read it (id,
// name and normalized input; raw is the call's native form): the call as the held path's
// tool_call part carries it (CanonicalCall), settled (Settle), and for a kept call its
// native form as the client gets it — raw as it came when the input stands, else write's
// rendering of the call with the effective input of a modify. An error of write is
// wrapped as a rewritten call's.
func (s *CallSettler) Judge(id, name, input, raw string, write func(ToolCall) (string, error)) (Judged, error) {
	call, ok := CanonicalCall(id, name, input)
	if !ok {
		return Judged{}, ErrCallUnreadable
	}
	v, err := s.Settle(call)
	if err != nil || !v.Kept {
		return Judged{Note: v.Note}, err
	}
	if v.Input == nil || bytes.Equal(v.Input, call.Input) {
		return Judged{Kept: true, Out: raw}, nil
	}
	out, err := write(ToolCall{ID: call.ID, Name: call.Name, Input: v.Input})
	if err != nil {
		return Judged{}, fmt.Errorf("rewritten tool call: %w", err)
	}
	return Judged{Kept: true, Out: out}, nil
}

// Decided is the number of calls settled so far (the next call's StreamCall.Index).
func (s *CallSettler) Decided() int { return s.decided }

// CallDecodeHook, when not nil, is called once each time a tool call's native arguments
// are decoded into a canonical input (by a codec's call decoder) and each time a tool_call
// part's text is parsed back (ParseToolCall). Tests set it to count the decodes one
// streamed call costs; it is nil otherwise, and never set while requests are served.
var CallDecodeHook func()

// NoteCallDecode reports one decode of a call to CallDecodeHook.
func NoteCallDecode() {
	if CallDecodeHook != nil {
		CallDecodeHook()
	}
}

// CanonicalCall is the ToolCall a tool_call part built from id, name and input (a JSON
// object, as the codec's call decoder normalized it) reads back as through ParseToolCall:
// the input compacted, invalid UTF-8 in the strings replaced as the part's JSON text
// replaces it. It does so without building and parsing the text, but for strings that
// are not valid UTF-8 (rare; then the part is built and read back, which is exact by
// construction). ok is false where ParseToolCall finds no call: an empty id or name.
func CanonicalCall(id, name, input string) (ToolCall, bool) {
	if !utf8.ValidString(id) || !utf8.ValidString(name) {
		p := ToolCallPart("", ToolCall{ID: id, Name: name, Input: json.RawMessage(input)})
		return ParseToolCall(&p)
	}
	if id == "" || name == "" {
		return ToolCall{}, false
	}
	return ToolCall{ID: id, Name: name, Input: compactInput(input)}, true
}

// compactInput is input as appendToolCall writes it into a tool_call part.
func compactInput(input string) json.RawMessage {
	if len(input) == 0 {
		return json.RawMessage(`{}`)
	}
	if jsontext.IsCompact(input) {
		return json.RawMessage(input)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(input)); err != nil {
		return json.RawMessage(`{}`)
	}
	return b.Bytes()
}
