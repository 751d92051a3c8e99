package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hookproxy/hookproxy/mapping"
)

// The held mode (response_mode.go): the upstream's answer is read whole, counted in
// limits.maxHeldBytes as it arrives, its response-side boundaries settle, and the
// effective answer replaces it.

// holdResponse reads the whole response, settles the response-side boundaries and puts
// the effective response in place of the upstream's. A mislabelled answer (its
// Content-Type is not what the request asked for) is judged as what its body is: a JSON
// value holds no event an SSE reader dispatches (no line of it can begin with "data:"),
// and an event stream is no JSON value, so whichever way the client parses it, only the
// reading judged here can give it anything. It goes out labelled as what it is.
func (x *lifecycle) holdResponse(resp *http.Response, streaming, mislabelled bool) error {
	// The bytes are counted in limits.maxHeldBytes as they arrive, not once the whole body
	// is in memory: concurrent large answers meet the server's limit while they are read.
	hr := &heldReader{s: x.s, r: resp.Body}
	raw, err := readAllLimited(hr, x.s.limits.MaxResponseBytes, resp.ContentLength)
	resp.Body.Close()
	latency := time.Since(x.upstreamStart)
	x.heldResponse = hr.reserved // released when the lifecycle ends
	switch {
	case errors.Is(err, errHeldFull):
		return x.rt.overloaded("bytes held in memory (limits.maxHeldBytes)")
	case err != nil && x.ctx.Err() != nil:
		return errInterrupted
	case errors.Is(err, errBodyTooLarge):
		// Interceptors must see what the client would get; what cannot be held is not
		// forwarded.
		return x.rt.upstreamFailure("upstream response exceeds the proxy's hold limit", err)
	case err != nil:
		return x.rt.upstreamFailure("reading the upstream response failed", err)
	}
	if mislabelled {
		streaming = !json.Valid(raw)
		if streaming {
			resp.Header.Set("Content-Type", "text/event-stream")
		} else {
			resp.Header.Set("Content-Type", "application/json")
		}
	}
	native := raw
	if streaming {
		asm := x.tr.NewAssembler()
		_, _ = asm.Write(raw)
		body, err := asm.Body()
		var ue *mapping.UpstreamError
		if errors.As(err, &ue) {
			// An SSE error event: the stream goes to the client unchanged up to that event.
			// What followed it was never judged, and a lenient client could read on.
			if c, ok := asm.(interface{ UpstreamEnd() int }); ok {
				if n := c.UpstreamEnd(); n >= 0 && n <= len(raw) {
					raw = raw[:n]
				}
			}
			x.streamErr = ue
			x.streamErrLatency = latency
			setBody(resp, raw, true)
			return nil
		}
		if err != nil {
			return x.rt.upstreamFailure("the upstream stream could not be decoded", err)
		}
		native = body
	}
	if x.onlyCallsMatter() {
		if sc, ok := x.tr.(mapping.CallScreen); ok && sc.NoToolCalls(native) {
			// No call, so no tool.before: nothing to settle, the response goes out as it came.
			setBody(resp, raw, streaming)
			return nil
		}
	}
	mresp, err := x.tr.DecodeResponse(native)
	if err != nil || mresp == nil {
		return x.rt.upstreamFailure("the upstream response could not be decoded", err)
	}
	res := x.responseSide(mresp, &latency)
	if res.err != nil {
		return res.err
	}
	if !res.changed {
		setBody(resp, raw, streaming)
		return nil
	}
	out := res.body
	if streaming {
		var buf bytes.Buffer
		if err := x.tr.WriteStream(&buf, out); err != nil {
			return x.rt.internalError(fmt.Errorf("render stream: %w", err))
		}
		out = buf.Bytes()
	}
	setBody(resp, out, streaming)
	return nil
}

// setBody replaces a held response's body. A JSON body gets its exact length; a stream
// is sent without one.
func setBody(resp *http.Response, b []byte, streaming bool) {
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if streaming {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		return
	}
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
}

// heldReader counts what is read through it in the server's limits.maxHeldBytes; Read
// fails with errHeldFull once the server's budget cannot take more.
type heldReader struct {
	s        *Server
	r        io.Reader
	reserved int64
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		if !h.s.hold(int64(n)) {
			return 0, errHeldFull
		}
		h.reserved += int64(n)
	}
	return n, err
}
