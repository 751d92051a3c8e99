package proxy

import (
	"bytes"
	"errors"
	"io"

	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// mcpEventFilter relays an MCP server's SSE answer event by event: each complete event
// goes to each, which writes what the client gets of it (the event unchanged, rewritten,
// or nothing). An event past the size limit is never relayed in part.
type mcpEventFilter struct {
	src  io.ReadCloser
	rd   *mcp.EventReader
	each func(ev mcp.Event, out *bytes.Buffer)
	out  bytes.Buffer
	done bool
	err  error
}

func newMCPEventFilter(src io.ReadCloser, limit int64, each func(mcp.Event, *bytes.Buffer)) *mcpEventFilter {
	return &mcpEventFilter{src: src, rd: mcp.NewEventReader(src, limit), each: each}
}

func (s *mcpEventFilter) Read(p []byte) (int, error) {
	for s.out.Len() == 0 {
		if s.done {
			return 0, s.err
		}
		ev, err := s.rd.Next()
		if errors.Is(err, mcp.ErrEventTooLarge) {
			ev.Raw = nil // never relay part of an event
		}
		if len(ev.Raw) > 0 {
			s.each(ev, &s.out)
		}
		if err != nil {
			s.done, s.err = true, io.EOF
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
		}
	}
	return s.out.Read(p)
}

func (s *mcpEventFilter) Close() error { return s.src.Close() }
