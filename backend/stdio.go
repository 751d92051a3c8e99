package backend

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// stdioConcurrency bounds the messages handled at once. A harness keeps at most one
// intercept outstanding per persistent backend (AHP spec, base/transports/stdio.md "Persistent
// lifecycle"), but observations may arrive meanwhile and must not queue behind it.
const stdioConcurrency = 16

// ServeStdio is the stdio binding of the backend (AHP-STDIO-001): it reads one JSON-RPC
// message per line from r and writes each response as one line to w. Nothing else is
// ever written to w; diagnostics go to the logger (stderr in `hookproxy backend`).
//
// A line that is not JSON is answered with a -32700 error (id null); a line over the frame
// limit with a -32600 error (id null) after the rest of the line is discarded — it is
// never truncated and parsed. Blank lines are ignored. Notifications get no line.
// Responses are written as they complete, so their order may differ from the requests';
// the harness routes them by id.
//
// ServeStdio returns nil at end of input once every response is written, ctx.Err() when
// ctx ends (after the messages in progress are answered), or the first write error. A
// read blocked in r when ctx ends is left to the process exit: an io.Reader cannot be
// interrupted.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lines := make(chan stdioLine)
	go s.readLines(ctx, r, lines)

	var (
		wg       sync.WaitGroup
		wmu      sync.Mutex
		writeErr error
	)
	write := func(frame []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		if writeErr != nil {
			return
		}
		// frame is compact JSON from encoding/json: it holds no raw newline.
		if _, err := w.Write(append(frame, '\n')); err != nil {
			writeErr = fmt.Errorf("backend: writing a response: %w", err)
			cancel()
		}
	}
	sem := make(chan struct{}, stdioConcurrency)

	var readErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			switch {
			case l.err != nil:
				readErr = l.err
				break loop
			case l.oversized:
				write(replyError(nil, ahp.CodeInvalidRequest, fmt.Sprintf("Invalid Request: the message exceeds the %d-byte limit", s.maxFrame), nil).reply)
				continue
			case len(bytes.TrimSpace(l.data)) == 0:
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break loop
			}
			wg.Add(1)
			go func(frame []byte) {
				defer wg.Done()
				defer func() { <-sem }()
				if out := s.respond(ctx, frame); out.reply != nil {
					write(out.reply)
				}
			}(l.data)
		}
	}
	wg.Wait()

	wmu.Lock()
	defer wmu.Unlock()
	switch {
	case writeErr != nil:
		return writeErr
	case readErr != nil:
		return readErr
	}
	return ctx.Err()
}

// stdioLine is one line read from the harness, without its newline.
type stdioLine struct {
	data      []byte
	oversized bool
	err       error
}

// readLines splits r into lines of at most maxFrame bytes and sends them until end of
// input, a read error or ctx's end. It closes lines when it stops.
func (s *Server) readLines(ctx context.Context, r io.Reader, lines chan<- stdioLine) {
	defer close(lines)
	send := func(l stdioLine) bool {
		select {
		case lines <- l:
			return true
		case <-ctx.Done():
			return false
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf      []byte
		overflow bool
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if !overflow {
			n := len(buf) + len(chunk)
			if bytes.HasSuffix(chunk, []byte("\n")) {
				n-- // the newline is framing, not message
			}
			if int64(n) > s.maxFrame {
				overflow, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		complete := err == nil
		if complete || (errors.Is(err, io.EOF) && (len(buf) > 0 || overflow)) {
			l := stdioLine{oversized: overflow}
			if !overflow {
				l.data = bytes.TrimSuffix(buf, []byte("\n"))
			}
			if !send(l) {
				return
			}
			buf, overflow = nil, false
		}
		if err != nil && !complete {
			if !errors.Is(err, io.EOF) {
				send(stdioLine{err: fmt.Errorf("backend: reading stdin: %w", err)})
			}
			return
		}
	}
}
