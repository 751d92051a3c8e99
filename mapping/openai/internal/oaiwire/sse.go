package oaiwire

import (
	"bytes"
	"io"
	"net/http"
)

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
