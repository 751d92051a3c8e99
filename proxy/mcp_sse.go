package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// mcpStream relays the server's SSE answer to a POST event by event. Events pass through
// byte for byte as soon as they are complete (progress notifications, log messages,
// server requests), except the responses that carry a checked tools/call result: those
// are held only until their tool.after settles and are re-emitted with the effective
// result, keeping the event's other fields (id for resumption, event type).
type mcpStream struct {
	x     *mcpExchange
	src   io.ReadCloser
	rd    *bufio.Reader
	out   bytes.Buffer
	check bool // results to check
	limit int64
	done  bool
	err   error
}

var errMCPEventTooLarge = errors.New("an SSE event exceeds the proxy's response limit")

func newMCPStream(x *mcpExchange, src io.ReadCloser, check bool) *mcpStream {
	s := &mcpStream{x: x, src: src, rd: bufio.NewReaderSize(src, 32<<10), check: check, limit: x.h.env.Limits.MaxResponseBytes}
	// Answers hookproxy gave itself (calls of a batch) go first.
	for _, m := range x.local {
		writeSSEMessage(&s.out, m)
	}
	return s
}

func (s *mcpStream) Read(p []byte) (int, error) {
	for s.out.Len() == 0 {
		if s.done {
			return 0, s.err
		}
		s.step()
	}
	return s.out.Read(p)
}

func (s *mcpStream) Close() error { return s.src.Close() }

// step reads one event and queues what the caller receives for it.
func (s *mcpStream) step() {
	raw, lines, err := s.readEvent()
	if errors.Is(err, errMCPEventTooLarge) {
		raw = nil // never relay part of an event: the client would misread the rest
	}
	if len(raw) > 0 {
		if perr := s.process(raw, lines); perr != nil {
			s.done, s.err = true, perr // interrupted: the client went away
			return
		}
	}
	if err == nil {
		return
	}
	s.done, s.err = true, io.EOF
	if s.x.ctx.Err() != nil {
		s.err = s.x.ctx.Err()
		return
	}
	if !errors.Is(err, io.EOF) {
		s.x.h.log.Warn("mcp: the server's stream failed", zap.String("route", s.x.h.prefix), zap.String("error", safeError(err)))
	}
	s.finish()
}

// finish runs when the server's stream ends. A call whose result never came would be left
// for the client to fetch by resuming the stream (GET with Last-Event-ID), past every
// tool.after interceptor; when one is subscribed the call is failed instead, so no
// unchecked result can reach the caller this way.
func (s *mcpStream) finish() {
	if !s.check || !s.x.subs.afterIntercept {
		return
	}
	for _, m := range s.x.failPending("the MCP server's stream ended before the tools/call result") {
		writeSSEMessage(&s.out, m)
	}
}

// readEvent reads one SSE event: raw is every byte of it including the blank line that
// ends it, lines its field lines without line endings. At the end of the stream a last
// unterminated event is returned with the error.
func (s *mcpStream) readEvent() (raw []byte, lines [][]byte, err error) {
	for {
		var line []byte
		for {
			chunk, rerr := s.rd.ReadSlice('\n')
			line = append(line, chunk...)
			if int64(len(raw)+len(line)) > s.limit {
				return raw, lines, errMCPEventTooLarge
			}
			if errors.Is(rerr, bufio.ErrBufferFull) {
				continue
			}
			if rerr != nil {
				raw = append(raw, line...)
				if l := trimEOL(line); len(l) > 0 {
					lines = append(lines, l)
				}
				return raw, lines, rerr
			}
			break
		}
		raw = append(raw, line...)
		l := trimEOL(line)
		if len(l) == 0 {
			if len(lines) == 0 {
				continue // blank lines between events dispatch nothing; relay them with the next
			}
			return raw, lines, nil
		}
		lines = append(lines, l)
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// process queues one event, rewritten when it carries a checked result.
func (s *mcpStream) process(raw []byte, lines [][]byte) error {
	if !s.check || len(s.x.pending) == 0 {
		s.out.Write(raw)
		return nil
	}
	var (
		name    string
		data    [][]byte
		hasData bool
	)
	for _, l := range lines {
		field, value := sseField(l)
		switch field {
		case "event":
			name = string(value)
		case "data":
			data, hasData = append(data, value), true
		}
	}
	if !hasData || (name != "" && name != "message") {
		s.out.Write(raw)
		return nil
	}
	body, err := mcp.ParseBody(bytes.Join(data, []byte("\n")))
	if err != nil {
		// Not a message hookproxy can read, so not one of the results it waits for.
		s.out.Write(raw)
		return nil
	}
	msgs := make([][]byte, 0, len(body.Messages))
	changed := false
	for i := range body.Messages {
		m := &body.Messages[i]
		c := s.x.take(m)
		if c == nil {
			msgs = append(msgs, m.Raw)
			continue
		}
		out, ch, err := s.x.resolve(c, m)
		if err != nil {
			return err
		}
		msgs = append(msgs, out)
		changed = changed || ch
	}
	if !changed {
		s.out.Write(raw)
		return nil
	}
	payload := body.Encode(msgs)
	wroteData := false
	for _, l := range lines {
		if field, _ := sseField(l); field == "data" {
			if !wroteData {
				writeSSEData(&s.out, payload)
				wroteData = true
			}
			continue
		}
		s.out.Write(l)
		s.out.WriteByte('\n')
	}
	s.out.WriteByte('\n')
	return nil
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

// writeSSEMessage writes one JSON-RPC message as a complete SSE event.
func writeSSEMessage(b *bytes.Buffer, msg []byte) {
	b.WriteString("event: message\n")
	writeSSEData(b, msg)
	b.WriteByte('\n')
}
