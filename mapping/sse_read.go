package mapping

import (
	"errors"
	"strings"
)

// DefaultMaxSSEEvent is the bound of an SSEReader whose MaxEvent is zero.
const DefaultMaxSSEEvent = 64 << 20

// SSEReader reads a server-sent event stream, in any chunking, as events: their names and
// data. It is what the assemblers read a stream with; it splits with the SSESplitter the
// stream editors use (the one place that knows SSE lines) and leaves out what only an
// editor needs: the raw bytes and blocks without data. Set the fields before the first
// Write.
type SSEReader struct {
	// Dispatch receives each event; data is only valid during the call. An error stops
	// the reader: Write returns it.
	Dispatch func(event string, data []byte) error
	// MaxEvent bounds one event, its lines included (DefaultMaxSSEEvent when zero). It
	// only stops a broken upstream from growing memory without limit.
	MaxEvent int
	// Dataless also dispatches a block that has no data line (with empty data) when it
	// named an event: Anthropic's assembler reads a bare "event: error" as the upstream's
	// error. By the SSE standard such a block dispatches nothing.
	Dataless bool
	// Stop, when set, is asked after each event: true stops the reader there (Write and
	// Close return errStopped), and Offset stays at that event's end.
	Stop func() bool

	sp      SSESplitter
	name    string // the last event name dispatched, the reader's own copy
	off     int    // stream bytes of the blocks dispatched
	stopped bool
}

var errStopped = errors.New("SSE reader stopped")

// Offset is the number of stream bytes up to the end of the last event dispatched (after a
// Stop, the event it stopped at).
func (r *SSEReader) Offset() int { return r.off }

// Write feeds p and dispatches every event it completes.
func (r *SSEReader) Write(p []byte) error {
	if r.sp.Dispatch == nil {
		r.sp.Dispatch = r.block
		r.sp.MaxEvent = r.MaxEvent
		if r.sp.MaxEvent <= 0 {
			r.sp.MaxEvent = DefaultMaxSSEEvent
		}
	}
	return r.sp.Write(p)
}

// Close dispatches an event left open when the stream ended without its blank line.
func (r *SSEReader) Close() error {
	if r.sp.Dispatch == nil {
		return nil // nothing was written
	}
	_, err := r.sp.Close()
	return err
}

func (r *SSEReader) block(raw []byte, name string, data []byte, hasData bool) error {
	if r.stopped {
		return errStopped
	}
	r.off += len(raw)
	if !hasData && (!r.Dataless || name == "") {
		return nil
	}
	// name shares the splitter's memory (string(name) would not copy it), and the
	// assemblers may keep the event's name: it is copied, once per run of events of one name
	// (a stream's deltas come in runs).
	if name != r.name {
		r.name = strings.Clone(name)
	}
	err := r.Dispatch(r.name, data)
	if r.Stop != nil && r.Stop() {
		r.stopped = true
		if err == nil {
			err = errStopped
		}
	}
	return err
}

// AssemblerInput is the input side of every assembler: the SSE reader the stream goes into,
// the first malformed-stream error and the upstream's error event. Once Err or Upstream is
// set, the rest of the stream is dropped; a Dispatch that sets one may return any error to
// stop reading at once (Write keeps the first).
type AssemblerInput struct {
	SSE      SSEReader
	Err      error
	Upstream *UpstreamError
}

// Write implements Assembler's Write. It never fails, so an assembler teed beside the
// client's stream cannot break that stream; problems are reported by Body.
func (in *AssemblerInput) Write(p []byte) (int, error) {
	if in.SSE.Stop == nil {
		in.SSE.Stop = func() bool { return in.Err != nil || in.Upstream != nil }
	}
	if in.Err == nil && in.Upstream == nil {
		if err := in.SSE.Write(p); err != nil && in.Err == nil && in.Upstream == nil {
			in.Err = err
		}
	}
	return len(p), nil
}

// UpstreamEnd is, once the stream carried the upstream's error, the number of stream bytes
// through the event that carried it: what a client that reads past an error could still
// find after it was never judged, so it is not relayed. -1 otherwise.
func (in *AssemblerInput) UpstreamEnd() int {
	if in.Upstream == nil {
		return -1
	}
	return in.SSE.Offset()
}
