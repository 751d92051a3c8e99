package mapping

import (
	"bytes"
	"fmt"
)

// SSESplitter cuts a server-sent event stream, in any chunking, into event blocks while
// keeping each block's exact bytes, so that a stream editor can relay an event it does
// not change byte for byte. Lines end in \n, \r\n or \r; ":" lines are comments; the
// "data:" lines of a block are joined with \n; a blank line ends the block; a UTF-8
// byte-order mark that starts the stream is not part of its first line
// (https://html.spec.whatwg.org/multipage/server-sent-events.html). The SDKs that decode
// with TextDecoder (openai-node, anthropic-sdk-typescript, the MCP TypeScript SDK) drop
// it and read the first event; a stream editor must read that event as they do. The assemblers read
// through it too, with SSEReader.
type SSESplitter struct {
	// Dispatch receives each block: raw is its bytes through the blank line that ended it
	// (comment lines included), name its "event:" field, data its joined data lines and
	// hasData whether it had any. A block of comments only is dispatched too (hasData
	// false), so that keep-alives can be relayed. The slices, and name, which shares the
	// splitter's memory, are valid only during the call.
	Dispatch func(raw []byte, name string, data []byte, hasData bool) error
	// MaxEvent bounds one block (16 MiB when zero): a broken upstream cannot grow memory
	// without limit.
	MaxEvent int

	raw     []byte // the current block so far
	line    int    // where the current, unterminated line starts in raw
	data    []byte
	hasData bool
	name    []byte
	skipLF  bool // raw ended in \r: a leading \n belongs to that line end
	began   bool // the stream's first line was processed
}

// bom is the UTF-8 byte-order mark.
const bom = "\xef\xbb\xbf"

const defaultMaxSSEBlock = 16 << 20

// Buffered is the number of bytes of the block not yet dispatched.
func (s *SSESplitter) Buffered() int { return len(s.raw) + len(s.data) }

// Write feeds p and dispatches every block it completes.
func (s *SSESplitter) Write(p []byte) error {
	max := s.MaxEvent
	if max <= 0 {
		max = defaultMaxSSEBlock
	}
	for len(p) > 0 {
		if s.skipLF {
			s.skipLF = false
			if p[0] == '\n' {
				s.raw = append(s.raw, '\n')
				s.line = len(s.raw)
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			if len(s.raw)+len(p) > max {
				return fmt.Errorf("SSE event larger than %d bytes", max)
			}
			s.raw = append(s.raw, p...)
			return nil
		}
		if len(s.raw)+i+2 > max {
			return fmt.Errorf("SSE event larger than %d bytes", max)
		}
		s.raw = append(s.raw, p[:i]...)
		line := s.raw[s.line:]
		end := i + 1
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					end++
				}
			} else {
				s.skipLF = true
			}
		}
		lineLen := len(line)
		s.raw = append(s.raw, p[i:end]...)
		p = p[end:]
		if err := s.processLine(s.raw[s.line : s.line+lineLen]); err != nil {
			return err
		}
		s.line = len(s.raw)
	}
	return nil
}

// Close dispatches a block left open when the stream ended without its blank line. It
// reports whether there was one (a stream cut inside an event).
func (s *SSESplitter) Close() (partial bool, err error) {
	if s.line < len(s.raw) {
		if err := s.processLine(s.raw[s.line:]); err != nil {
			return true, err
		}
		s.line = len(s.raw)
	}
	if len(s.raw) == 0 {
		return false, nil
	}
	partial = s.hasData
	return partial, s.dispatch()
}

func (s *SSESplitter) processLine(line []byte) error {
	if !s.began {
		s.began = true
		line = bytes.TrimPrefix(line, []byte(bom)) // raw keeps it: relayed as it came
	}
	if len(line) == 0 {
		return s.dispatch()
	}
	if line[0] == ':' {
		return nil
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(field) {
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.name = append(s.name[:0], value...)
	}
	return nil
}

func (s *SSESplitter) dispatch() error {
	err := s.Dispatch(s.raw, BytesString(s.name), s.data, s.hasData)
	s.raw, s.line, s.data, s.hasData, s.name = s.raw[:0], 0, s.data[:0], false, s.name[:0]
	return err
}
