package responses

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// maxSSEEvent bounds one buffered SSE line or event. OpenAI sends small deltas, but a
// terminal event repeats the whole response; the bound only stops a broken upstream from
// growing memory without limit.
const maxSSEEvent = 64 << 20

// sseReader splits a byte stream, in any chunking, into server-sent events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines end in \n, \r\n
// or \r; the "data:" lines of one event are joined with \n; ":" lines are comments; a blank
// line dispatches the event.
type sseReader struct {
	line    []byte
	data    []byte
	hasData bool
	event   string
	skipLF  bool // the previous chunk ended in \r, so a leading \n belongs to that line end
	// dispatch receives each event; data is only valid during the call.
	dispatch func(event string, data []byte) error
}

// write feeds p and dispatches every event it completes.
func (r *sseReader) write(p []byte) error {
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
			if len(r.line)+len(p) > maxSSEEvent {
				return fmt.Errorf("SSE line longer than %d bytes", maxSSEEvent)
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

// close dispatches an event left open when the stream ended without its blank line.
func (r *sseReader) close() error {
	if len(r.line) > 0 {
		if err := r.processLine(r.line); err != nil {
			return err
		}
		r.line = r.line[:0]
	}
	return r.processLine(nil)
}

func (r *sseReader) processLine(line []byte) error {
	if len(line) == 0 {
		if !r.hasData {
			r.event = ""
			return nil
		}
		err := r.dispatch(r.event, r.data)
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
		if len(r.data)+len(value) > maxSSEEvent {
			return fmt.Errorf("SSE event larger than %d bytes", maxSSEEvent)
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.event = string(value)
	}
	return nil
}

// sseWriter writes SSE events and flushes after each when the writer can.
type sseWriter struct {
	w       io.Writer
	flusher http.Flusher
	buf     []byte
}

func newSSEWriter(w io.Writer) *sseWriter {
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, flusher: f}
}

// event writes one event with its name; data must be compact JSON (one line).
func (s *sseWriter) event(name string, data []byte) error {
	s.buf = append(s.buf[:0], "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}
