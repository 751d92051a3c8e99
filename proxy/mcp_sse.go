package proxy

import (
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
	rd    *mcp.EventReader
	out   bytes.Buffer
	check bool // results to check
	done  bool
	err   error
}

func newMCPStream(x *mcpExchange, src io.ReadCloser, check bool) *mcpStream {
	s := &mcpStream{x: x, src: src, rd: mcp.NewEventReader(src, x.h.env.Limits.MaxResponseBytes), check: check}
	// Answers hookproxy gave itself (calls of a batch) go first.
	for _, m := range x.local {
		mcp.WriteMessageEvent(&s.out, m)
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
	ev, err := s.rd.Next()
	if errors.Is(err, mcp.ErrEventTooLarge) {
		ev.Raw = nil // never relay part of an event: the client would misread the rest
	}
	if len(ev.Raw) > 0 {
		if perr := s.process(ev); perr != nil {
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
		mcp.WriteMessageEvent(&s.out, m)
	}
}

// process queues one event, rewritten when it carries a checked result. While results are
// checked, a message event hookproxy cannot read is dropped, not relayed: a client's more
// lenient parser (duplicate keys: the last one wins in JavaScript) could read a result in
// it; and a response that answers no request still waiting is left out (claim).
func (s *mcpStream) process(ev mcp.Event) error {
	if !s.check {
		s.out.Write(ev.Raw)
		return nil
	}
	data, ok := ev.MessageData()
	if !ok {
		s.out.Write(ev.Raw)
		return nil
	}
	body, err := mcp.ParseBody(data)
	if err != nil {
		s.x.h.log.Warn("mcp: dropped a message event of the server's stream that is not valid JSON-RPC",
			zap.String("route", s.x.h.prefix), zap.String("error", err.Error()))
		return nil
	}
	msgs, changed, err := s.x.results(body, true)
	switch {
	case err != nil:
		return err
	case !changed:
		s.out.Write(ev.Raw)
	case len(msgs) > 0:
		ev.WriteWithData(&s.out, body.Encode(msgs))
	}
	return nil
}
