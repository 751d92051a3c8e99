package mapping

import (
	"bytes"
	"fmt"
)

// DefaultMaxSSEEvent is the bound of an SSEReader whose MaxEvent is zero.
const DefaultMaxSSEEvent = 64 << 20

// SSEReader splits a byte stream, in any chunking, into server-sent events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines end in \n, \r\n
// or \r; the "data:" lines of one event are joined with \n; ":" lines are comments; a blank
// line dispatches the event. It is what the assemblers read a stream with: it keeps only
// each event's name and data. The stream editors, which relay events they leave alone byte
// for byte, split with SSESplitter instead.
type SSEReader struct {
	// Dispatch receives each event; data is only valid during the call. An error stops
	// the reader: Write returns it.
	Dispatch func(event string, data []byte) error
	// MaxEvent bounds one buffered line or the data of one event (DefaultMaxSSEEvent when
	// zero). It only stops a broken upstream from growing memory without limit.
	MaxEvent int
	// Dataless also dispatches a block that has no data line (with empty data) when it
	// named an event: Anthropic's assembler reads a bare "event: error" as the upstream's
	// error. By the SSE standard such a block dispatches nothing.
	Dataless bool

	line    []byte
	data    []byte
	hasData bool
	event   string
	skipLF  bool // the previous chunk ended in \r, so a leading \n belongs to that line end
}

func (r *SSEReader) max() int {
	if r.MaxEvent > 0 {
		return r.MaxEvent
	}
	return DefaultMaxSSEEvent
}

// Write feeds p and dispatches every event it completes.
func (r *SSEReader) Write(p []byte) error {
	for len(p) > 0 {
		if r.skipLF {
			r.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			if len(r.line)+len(p) > r.max() {
				return fmt.Errorf("SSE line longer than %d bytes", r.max())
			}
			r.line = append(r.line, p...)
			return nil
		}
		line := p[:i]
		if len(r.line) > 0 {
			r.line = append(r.line, p[:i]...)
			line = r.line
		}
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					i++
				}
			} else {
				r.skipLF = true
			}
		}
		p = p[i+1:]
		err := r.processLine(line)
		r.line = r.line[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// Close dispatches an event left open when the stream ended without its blank line.
func (r *SSEReader) Close() error {
	if len(r.line) > 0 {
		if err := r.processLine(r.line); err != nil {
			return err
		}
		r.line = r.line[:0]
	}
	return r.processLine(nil)
}

func (r *SSEReader) processLine(line []byte) error {
	if len(line) == 0 {
		if !r.hasData && (!r.Dataless || r.event == "") {
			r.event = ""
			return nil
		}
		err := r.Dispatch(r.event, r.data)
		r.data, r.hasData, r.event = r.data[:0], false, ""
		return err
	}
	field, value, ok := sseField(line)
	if !ok {
		return nil // comment / keep-alive
	}
	switch string(field) {
	case "data":
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		if len(r.data)+len(value) > r.max() {
			return fmt.Errorf("SSE event larger than %d bytes", r.max())
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.event = string(value)
	}
	return nil
}

// sseField cuts a non-empty line into its field name and value (one leading space of the
// value dropped); ok is false for a comment line (":" first).
func sseField(line []byte) (field, value []byte, ok bool) {
	if line[0] == ':' {
		return nil, nil, false
	}
	field, value, _ = bytes.Cut(line, []byte(":"))
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return field, value, true
}
