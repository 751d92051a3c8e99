package proxy

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// A request body on the fast path (pass-through and MCP bodies over 16 KiB, or of unknown
// length) is streamed: the transport's writer reads it from the client while the handler
// relays the answer. An upstream may answer before it has read all of it (a 401 to a large
// upload, an MCP server asking for authorization), and then net/http's HTTP/1 server races
// the transport for the body:
//
//   - writing the answer's headers makes the server discard what is left of an unread body
//     (when the connection is to be kept), concurrently with the transport's reads. The
//     transport's next read fails, and it closes the upstream connection the answer is
//     still arriving on: the client gets the answer cut short.
//   - once the handler returns, the server reads the connection again. A transport read
//     still in flight then races it, and a read after it reads a closed body.
//
// So an answer that starts while the body is still being sent says "Connection: close"
// (relayWriter), which turns the discard off: the connection ends with this exchange, as
// Go's own server ends it when a handler answers before reading a large body. (Full duplex
// would turn the discard off too, but it leaves the server to race the transport after the
// handler returns: golang/go#68560.) And relayBody's Close (the transport's when it is done
// with the body, or finish's when the handler is) lets a read in flight return, waits for
// it, and no read starts after it. A client still uploading sends its next bytes at once;
// for one that has stopped, the connection's read deadline is brought forward to
// relayDrainWait (through the rate guard, which then does not count the timeout as a slow
// body). What is left of the client's body is then net/http's, as for any handler that
// leaves its body unread: it stops reading and half-closes the connection after the
// answer, so that the client can read all of it.

// relayDrainWait is how long a relay that is over waits for a client that has stopped
// sending its body.
const relayDrainWait = time.Second

var errRelayClosed = errors.New("request body read after its answer was relayed")

type relayBody struct {
	rc      io.ReadCloser
	w       *relayWriter
	guard   *rateBody // nil when the connection has no deadlines (in-process writers)
	mu      sync.Mutex
	idle    sync.Cond
	reading bool
	sent    bool // the transport has read the whole body
	closed  bool
}

// streamRelay makes rc the outbound body of a streamed forward. The reverse proxy must be
// given the returned writer and body, and finish must be called before the handler
// returns.
func streamRelay(w http.ResponseWriter, r *http.Request, rc io.ReadCloser) (http.ResponseWriter, *relayBody) {
	g, _ := r.Context().Value(bodyGuardKey{}).(*rateBody)
	b := &relayBody{rc: rc, guard: g}
	b.idle.L = &b.mu
	// HTTP/2 has no such race, and there "Connection: close" would end every stream of the
	// connection.
	b.w = &relayWriter{ResponseWriter: w, body: b, started: r.ProtoMajor != 1}
	return b.w, b
}

func (b *relayBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, errRelayClosed
	}
	b.reading = true
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.reading = false
	if err == io.EOF {
		b.sent = true
	}
	if b.closed {
		b.idle.Broadcast()
	}
	b.mu.Unlock()
	return n, err
}

// Close returns once no read is in flight; the client's body itself is left to net/http.
func (b *relayBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.reading {
		if b.guard != nil {
			b.guard.interrupt(relayDrainWait)
			defer b.guard.resume()
		}
		for b.reading {
			b.idle.Wait()
		}
	}
	return nil
}

// finish ends the relay: no read in flight, and none to come.
func (b *relayBody) finish() {
	b.mu.Lock()
	waits := b.reading && !b.closed
	b.mu.Unlock()
	if waits && b.w.wrote {
		// The client has the whole answer while the relay waits for its body.
		_ = http.NewResponseController(b.w.ResponseWriter).Flush()
	}
	_ = b.Close()
}

// unsent reports whether the body has not been read to its end.
func (b *relayBody) unsent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.sent
}

// relayWriter is the response writer of a streamed forward: an answer (the upstream's or
// hookproxy's own error) that starts while the body is still being sent closes the
// connection after it.
type relayWriter struct {
	http.ResponseWriter
	body    *relayBody
	started bool // the final status is decided (or, over HTTP/2, nothing to decide)
	wrote   bool // a final status was written
}

func (w *relayWriter) WriteHeader(code int) {
	if code >= 200 {
		if !w.started && w.body.unsent() {
			w.Header().Set("Connection", "close")
		}
		w.started, w.wrote = true, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *relayWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (flushes, deadlines) reach the connection.
func (w *relayWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
