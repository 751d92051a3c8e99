package oaiwire

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/hookproxy/hookproxy/mapping"
)

// DefaultMaxSSEEvent is the bound of an SSEReader whose MaxEvent is zero.
const DefaultMaxSSEEvent = 64 << 20

// SSEReader splits a byte stream, in any chunking, into server-sent events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines end in \n, \r\n
// or \r; the "data:" lines of one event are joined with \n; ":" lines are comments; a blank
// line dispatches the event.
type SSEReader struct {
	// Dispatch receives each event; data is only valid during the call.
	Dispatch func(event string, data []byte) error
	// MaxEvent bounds one buffered line or the data of one event (DefaultMaxSSEEvent when
	// zero). It only stops a broken upstream from growing memory without limit.
	MaxEvent int

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
		if !r.hasData {
			r.event = ""
			return nil
		}
		err := r.Dispatch(r.event, r.data)
		r.data, r.hasData, r.event = r.data[:0], false, ""
		return err
	}
	if line[0] == ':' {
		return nil // comment / keep-alive
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
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

// SSEWriter writes SSE events and flushes after each when the writer can.
type SSEWriter struct {
	w       io.Writer
	flusher http.Flusher
	buf     []byte
}

// NewSSEWriter returns a writer of events to w.
func NewSSEWriter(w io.Writer) *SSEWriter {
	f, _ := w.(http.Flusher)
	return &SSEWriter{w: w, flusher: f}
}

// Event writes one event: an "event:" line when name is not empty, then one "data:" line
// per line of data (callers pass compact JSON, so normally one).
func (s *SSEWriter) Event(name string, data []byte) error {
	s.buf = s.buf[:0]
	if name != "" {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, name...)
		s.buf = append(s.buf, '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		s.buf = append(s.buf, "data: "...)
		s.buf = append(s.buf, bytes.TrimSuffix(line, []byte("\r"))...)
		s.buf = append(s.buf, '\n')
		if !more {
			break
		}
		data = rest
	}
	return s.flush()
}

// NamedEvent writes one event with its name and data as they are, in a single "data:"
// line; data must be compact JSON (one line).
func (s *SSEWriter) NamedEvent(name string, data []byte) error {
	s.buf = append(s.buf[:0], "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, '\n')
	return s.flush()
}

// flush ends the buffered event with its blank line and writes it.
func (s *SSEWriter) flush() error {
	s.buf = append(s.buf, '\n')
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// AssemblerInput is the input side of the chat and responses assemblers: the SSE reader
// the stream goes into, the first malformed-stream error, and the upstream's error event.
// Once Err or Upstream is set, the rest of the stream is dropped.
type AssemblerInput struct {
	SSE      SSEReader
	Err      error
	Upstream *mapping.UpstreamError
}

// Write implements mapping.Assembler's Write. It never fails, so an assembler teed beside
// the client's stream cannot break that stream; problems are reported by Body.
func (in *AssemblerInput) Write(p []byte) (int, error) {
	if in.Err == nil && in.Upstream == nil {
		if err := in.SSE.Write(p); err != nil && in.Err == nil && in.Upstream == nil {
			in.Err = err
		}
	}
	return len(p), nil
}
