package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
)

// Incremental stream enforcement. When tool.before
// is the only response-side boundary that intercepts, a streamed response is not held
// whole: its head and every event without a tool call go to the client as they arrive,
// and the translator's StreamEditor holds each tool call until its tool.before settles.
// model.response.after and turn.finish.before interceptors can modify or deny the whole
// response, so they still hold it whole (holdResponse).

// editStream puts an editing reader in place of the upstream's streamed body.
func (x *lifecycle) editStream(resp *http.Response, se mapping.StreamEditing) {
	b := &editedBody{x: x, up: resp.Body, buf: copyBuffers.Get(), out: editOutputs.Get().(*bytes.Buffer)}
	d := &streamDecider{x: x}
	b.ed = se.NewStreamEditor(b.out, d)
	d.held = b.ed.Held
	x.wire = newStreamWire(b, x.client, x.tr, resp.Header.Get("Content-Type"))
	// Observers are served after the stream from assembled copies: the upstream's message
	// for model.response.after, the client's for turn.finish.before and turn.end. Nothing
	// is kept when nobody observes, so memory does not grow with the text.
	if x.subs.any(ahp.EventModelResponseAfter) || x.subs.any(ahp.EventModelError) {
		b.upstream = x.tr.NewAssembler()
	}
	if x.subs.any(ahp.EventTurnFinishBefore) || x.subs.any(ahp.EventTurnEnd) {
		b.client = x.tr.NewAssembler()
	}
	resp.Body = b
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
}

// editedBody is what the reverse proxy copies to the client: the StreamEditor's output,
// produced by reading the upstream on demand. Tool calls are settled inside Read, in the
// copying goroutine, so the decision is taken before anything after the call is sent.
type editedBody struct {
	x   *lifecycle
	up  io.ReadCloser
	ed  mapping.StreamEditor
	buf []byte
	out *bytes.Buffer // what the editor wrote and the client has not read (pooled)
	// assembled copies for observers (nil when nobody observes)
	upstream, client mapping.Assembler

	done   bool
	failed bool
	abort  error // the client went away: the copy ends with this error
}

func (b *editedBody) Read(p []byte) (int, error) {
	if b.out == nil {
		return 0, io.ErrClosedPipe // read after Close
	}
	for b.out.Len() == 0 {
		if b.abort != nil {
			return 0, b.abort
		}
		if b.done {
			return 0, io.EOF
		}
		b.step()
	}
	n, _ := b.out.Read(p)
	if b.client != nil {
		_, _ = b.client.Write(p[:n])
	}
	return n, nil
}

// step reads once from the upstream and feeds the editor.
func (b *editedBody) step() {
	n, err := b.up.Read(b.buf)
	if n > 0 {
		if b.upstream != nil {
			_, _ = b.upstream.Write(b.buf[:n])
		}
		if _, werr := b.ed.Write(b.buf[:n]); werr != nil {
			b.fail(werr)
			return
		}
		held := int64(b.ed.Held())
		if held > b.x.s.limits.MaxResponseBytes {
			b.fail(errHoldLimit)
			return
		}
		if !b.x.holdStream(held) {
			b.fail(errHeldFull)
			return
		}
	}
	switch {
	case err == io.EOF:
		if cerr := b.ed.Close(); cerr != nil {
			b.fail(cerr)
			return
		}
		b.done = true
		b.finish()
	case err != nil && b.x.ctx.Err() != nil:
		b.abort = errInterrupted
	case err != nil:
		b.fail(fmt.Errorf("reading the upstream stream failed: %w", err))
	}
}

var errHoldLimit = errors.New("a tool call in the upstream stream exceeds the proxy's hold limit")

// errHeldFull: what the stream editor holds would take the server past limits.maxHeldBytes.
var errHeldFull = errors.New("the bytes held in memory over all requests are at limits.maxHeldBytes")

// holdStream keeps what the stream editor holds (tool calls being settled and the events
// queued behind them) counted in the server's limits.maxHeldBytes, as a held whole body
// is: held is the editor's current total, the difference is reserved or released. false
// when the server's budget cannot take the growth; editedBody.Close releases the rest.
func (x *lifecycle) holdStream(held int64) bool {
	switch d := held - x.streamHeld; {
	case d > 0:
		if !x.s.hold(d) {
			return false
		}
	case d < 0:
		x.s.release(-d)
	}
	x.streamHeld = held
	return true
}

// fail ends the client's stream after an error once the head is sent: the refusal goes
// inside the stream in the provider's own error form (a status can no longer be sent).
func (b *editedBody) fail(err error) {
	b.done, b.failed = true, true
	x := b.x
	if errors.Is(err, errInterrupted) || x.ctx.Err() != nil {
		b.abort = errInterrupted
		return
	}
	msg := "the upstream stream could not be relayed: " + err.Error()
	if errors.Is(err, errHoldLimit) {
		msg = "upstream response exceeds the proxy's hold limit"
	}
	if errors.Is(err, errHeldFull) {
		msg = "hookproxy is at its limit of bytes held in memory (limits.maxHeldBytes); retry later"
	}
	var ue *mapping.UpstreamError
	if errors.As(err, &ue) {
		msg = "the upstream stream could not be relayed"
	}
	x.s.logAt(x.ctx, zapcore.WarnLevel, "streamed response ended with an in-stream error",
		zap.String("route", x.rt.prefix), zap.Error(err))
	if ferr := b.ed.Fail(mapping.UpstreamFailureType(x.rt.provider()), "hookproxy.stream_failed", msg); ferr != nil {
		b.abort = ferr
	}
}

func (b *editedBody) Close() error {
	b.x.holdStream(0) // what the editor held is no longer held
	copyBuffers.Put(b.buf)
	b.buf = nil
	if b.out != nil && b.out.Cap() <= maxPooledEditOutput {
		b.out.Reset()
		editOutputs.Put(b.out)
	}
	b.out = nil
	return b.up.Close()
}

// editOutputs pools the editors' output buffers: each holds about one upstream read, so a
// stream does not grow a fresh one by doubling (measured: ~100 KB per stream otherwise).
var editOutputs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledEditOutput keeps a buffer grown by one large event out of the pool.
const maxPooledEditOutput = 1 << 20

// finish runs the observers of a stream that reached its end: the response-side
// boundaries whose interceptors did not hold it, over the assembled messages.
func (b *editedBody) finish() {
	x := b.x
	latency := time.Since(x.upstreamStart)
	var upResp *mapping.Response
	if b.upstream != nil {
		body, err := b.upstream.Body()
		var ue *mapping.UpstreamError
		switch {
		case errors.As(err, &ue):
			x.streamErr, x.streamErrLatency = ue, latency
		case err == nil:
			upResp, _ = x.tr.DecodeResponse(body)
		}
	}
	var clientItems []ahp.Message
	haveClient := false
	if b.client != nil {
		if body, err := b.client.Body(); err == nil {
			if r, err := x.tr.DecodeResponse(body); err == nil && r != nil {
				clientItems, haveClient = r.Items, true
			}
		}
	}
	if upResp != nil && x.subs.any(ahp.EventModelResponseAfter) {
		x.observeResponseAfter(upResp, latency)
	}
	switch r, ok := b.ed.(mapping.HostedCallReporter); {
	case upResp != nil:
		x.observeHosted(upResp.HostedCalls)
	case ok:
		x.observeHosted(r.HostedCalls())
	}
	if !haveClient {
		return
	}
	hasCalls := len(mapping.ToolCalls(clientItems)) > 0
	if !hasCalls && !x.streamStopped && x.subs.any(ahp.EventTurnFinishBefore) {
		ev := x.turnFinishEvent(clientItems)
		st := x.settle(ev, capsTurnFinish()) // observers only: it settles at once
		x.audit(ev, st, DeliveryIntercept, enforcement.Forwarded, "", "")
	}
	x.final = &finalResponse{items: clientItems, hasToolCalls: hasCalls, stopped: x.streamStopped}
}

// streamDecider settles each streamed tool call's tool.before as the editor completes it.
type streamDecider struct {
	x    *lifecycle
	held func() int // the editor's Held
}

func (d *streamDecider) Decide(c mapping.StreamCall) (mapping.CallVerdict, error) {
	x := d.x
	// A call that arrived whole within one read is over the limit here, before anything
	// of it is judged or sent; one that grows across reads is caught by step.
	if d.held != nil && int64(d.held()) > x.s.limits.MaxResponseBytes {
		return mapping.CallVerdict{}, errHoldLimit
	}
	// It stays held while its tool.before settles: counted in limits.maxHeldBytes.
	if d.held != nil && !x.holdStream(int64(d.held())) {
		return mapping.CallVerdict{}, errHeldFull
	}
	v, err := x.settleToolCall(c.ToolCall, x.responseAfterID, nil)
	if err != nil {
		return mapping.CallVerdict{}, err
	}
	if v.Stop {
		x.streamStopped = true
	}
	return v, nil
}

func (d *streamDecider) Skipped(c mapping.StreamCall) {
	d.x.observeResolved(c.ToolCall, "", "cancelled", "flow stop")
}
