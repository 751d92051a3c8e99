package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// SSE framing of Streamable HTTP: a server may answer a POST with an event stream whose
// "message" events each carry one JSON-RPC message (or batch) in their data lines. The
// proxy relays such a stream event by event; these are the framing rules it needs: cut
// the stream into events keeping their exact bytes, find an event's message, and write
// an event back with a new message but every other field kept.

// ErrEventTooLarge is returned by EventReader.Next for an event beyond the reader's limit.
var ErrEventTooLarge = errors.New("an SSE event exceeds the proxy's response limit")

// Event is one SSE event: Raw is every byte of it including the blank line that ends it
// (and blank lines before it), Lines its field lines without line endings.
type Event struct {
	Raw   []byte
	Lines [][]byte
}

// EventReader reads an SSE stream event by event, bounding each event to limit bytes.
type EventReader struct {
	rd    *bufio.Reader
	limit int64
	began bool // the stream's first line was read
}

// bom is the UTF-8 byte-order mark. One that starts the stream is not part of its first
// line (https://html.spec.whatwg.org/multipage/server-sent-events.html): the MCP
// TypeScript SDK decodes with TextDecoderStream, which drops it, and reads the first event.
const bom = "\xef\xbb\xbf"

// NewEventReader reads events from src; no event may exceed limit bytes.
func NewEventReader(src io.Reader, limit int64) *EventReader {
	return &EventReader{rd: bufio.NewReaderSize(src, 32<<10), limit: limit}
}

// Next reads one SSE event. At the end of the stream a last unterminated event is
// returned with the error. With ErrEventTooLarge the event is incomplete and must not be
// relayed: the client would misread the rest.
func (r *EventReader) Next() (Event, error) {
	var ev Event
	for {
		var line []byte
		for {
			chunk, rerr := r.rd.ReadSlice('\n')
			line = append(line, chunk...)
			if int64(len(ev.Raw)+len(line)) > r.limit {
				return ev, ErrEventTooLarge
			}
			if errors.Is(rerr, bufio.ErrBufferFull) {
				continue
			}
			if rerr != nil {
				ev.Raw = append(ev.Raw, line...)
				if l := r.firstLine(trimEOL(line)); len(l) > 0 {
					ev.Lines = append(ev.Lines, l)
				}
				return ev, rerr
			}
			break
		}
		ev.Raw = append(ev.Raw, line...)
		l := r.firstLine(trimEOL(line))
		if len(l) == 0 {
			if len(ev.Lines) == 0 {
				continue // blank lines between events dispatch nothing; relay them with the next
			}
			return ev, nil
		}
		ev.Lines = append(ev.Lines, l)
	}
}

// firstLine drops a byte-order mark from the stream's first line; Raw keeps it.
func (r *EventReader) firstLine(l []byte) []byte {
	if r.began {
		return l
	}
	r.began = true
	return bytes.TrimPrefix(l, []byte(bom))
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// MessageData returns the event's data lines joined with "\n" when it is a message event
// (no event name, or "message") with data; ok is false for any other event.
func (e Event) MessageData() (data []byte, ok bool) {
	var (
		name    string
		lines   [][]byte
		hasData bool
	)
	for _, l := range e.Lines {
		field, value := sseField(l)
		switch field {
		case "event":
			name = string(value)
		case "data":
			lines, hasData = append(lines, value), true
		}
	}
	if !hasData || (name != "" && name != "message") {
		return nil, false
	}
	return bytes.Join(lines, []byte("\n")), true
}

// WriteWithData writes the event to b with its data lines replaced by payload, written
// where the first data line was; every other field (id for resumption, event type) is
// kept in order.
func (e Event) WriteWithData(b *bytes.Buffer, payload []byte) {
	wroteData := false
	for _, l := range e.Lines {
		if field, _ := sseField(l); field == "data" {
			if !wroteData {
				writeSSEData(b, payload)
				wroteData = true
			}
			continue
		}
		b.Write(l)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

// WriteMessageEvent writes one JSON-RPC message as a complete SSE message event.
func WriteMessageEvent(b *bytes.Buffer, msg []byte) {
	b.WriteString("event: message\n")
	writeSSEData(b, msg)
	b.WriteByte('\n')
}

// sseField splits an SSE line into field name and value (one leading space of the value
// removed). Comment lines have the field name "".
func sseField(l []byte) (string, []byte) {
	if len(l) > 0 && l[0] == ':' {
		return "", nil
	}
	name, value, found := bytes.Cut(l, []byte(":"))
	if !found {
		return string(l), nil
	}
	return string(name), bytes.TrimPrefix(value, []byte(" "))
}

// writeSSEData writes payload as data lines (one per line of payload).
func writeSSEData(b *bytes.Buffer, payload []byte) {
	for _, l := range bytes.Split(payload, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(trimEOL(l))
		b.WriteByte('\n')
	}
}
