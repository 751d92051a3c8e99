package mapping

import (
	"fmt"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// CallSettler is the bookkeeping every stream editor shares when it settles its calls:
// they are numbered in stream order, and after a flow stop every later call is removed
// unasked (StreamDecider.Skipped). Each editor keeps where its notes and kept calls go.
type CallSettler struct {
	D       StreamDecider
	decided int
	stopped bool
}

// Settle decodes the one tool call of single — a complete native response holding only
// that call, so that the codec's own DecodeResponse reads it exactly as it reads the call
// inside the assembled response —, settles it, and says whether it is kept. A kept call
// comes back as rendered: single itself, or single re-encoded by the codec with the
// effective arguments of a modify(input), as the held path renders them. note is the text
// the agent is told about a removed call ("" for none).
func (s *CallSettler) Settle(tr Translator, single []byte) (kept bool, rendered []byte, note string, err error) {
	resp, err := tr.DecodeResponse(single)
	if err != nil {
		return false, nil, "", fmt.Errorf("streamed tool call: %w", err)
	}
	located := ToolCalls(resp.Items)
	if len(located) != 1 {
		return false, nil, "", fmt.Errorf("streamed tool call could not be read")
	}
	call := StreamCall{ToolCall: located[0].ToolCall, Index: s.decided}
	s.decided++
	if s.stopped {
		s.D.Skipped(call)
		return false, nil, "", nil
	}
	v, err := s.D.Decide(call)
	if err != nil {
		return false, nil, "", err
	}
	if v.Remove || v.Stop {
		s.stopped = s.stopped || v.Stop
		return false, nil, v.Note, nil
	}
	if v.Input == nil {
		return true, single, "", nil
	}
	items := ahp.CloneMessages(resp.Items)
	lc := located[0]
	p := items[lc.Item].Parts[lc.Part]
	items[lc.Item].Parts[lc.Part] = ToolCallPart(p.ID, ToolCall{ID: lc.ID, Name: lc.Name, Input: v.Input})
	body, err := tr.EncodeResponse(resp, items, "")
	if err != nil {
		return false, nil, "", fmt.Errorf("rewritten tool call: %w", err)
	}
	return true, body, "", nil
}

// Decided is the number of calls settled so far (the next call's StreamCall.Index).
func (s *CallSettler) Decided() int { return s.decided }
