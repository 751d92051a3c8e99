package proxy

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// The tapped mode (response_mode.go) and model.error: a body streamed through untouched
// is copied for observers, who get the response-side observations once it ends; an
// upstream error's head, or a failed upstream call, is observed as model.error.

// observeTapped decodes a streamed-through response and runs the response-side
// boundaries for their observers (no interceptor matched, so nothing can change).
func (x *lifecycle) observeTapped() {
	t := x.tap
	if !t.eof || t.overflow {
		if t.overflow {
			x.s.logAt(x.ctx, zapcore.WarnLevel, "response larger than maxResponseBytes was not observed", zap.String("route", x.rt.prefix))
		}
		return
	}
	native := t.buf.Bytes()
	if t.streaming {
		asm := x.tr.NewAssembler()
		_, _ = asm.Write(native)
		body, err := asm.Body()
		var ue *mapping.UpstreamError
		if errors.As(err, &ue) {
			x.streamErr, x.streamErrLatency = ue, t.latency
			return
		}
		if err != nil {
			x.s.logAt(x.ctx, zapcore.WarnLevel, "streamed response could not be assembled for observers", zap.String("route", x.rt.prefix), zap.Error(err))
			return
		}
		native = body
	}
	if !x.observesResponse() {
		return
	}
	resp, err := x.tr.DecodeResponse(native)
	if err != nil || resp == nil {
		x.s.logAt(x.ctx, zapcore.WarnLevel, "response could not be decoded for observers", zap.String("route", x.rt.prefix), zap.Error(err))
		return
	}
	latency := t.latency
	x.responseSide(resp, &latency)
}

// observeModelError observes an upstream error as model.error.
func (x *lifecycle) observeModelError(ue *mapping.UpstreamError, latency time.Duration) {
	if ue == nil || !x.subs.any(ahp.EventModelError) {
		return
	}
	ev := x.newEvent(ahp.EventModelError)
	model, attempt := x.model, x.attempt
	ev.Model, ev.Attempt = &model, &attempt
	ev.Execution = &ahp.Execution{Status: ahp.ExecutionExecuted}
	msg := x.scrub(ue.Message)
	if msg == "" {
		msg = "upstream answered HTTP " + strconv.Itoa(ue.Status)
	}
	ev.Error = &ahp.ErrorInfo{Message: msg, Class: "provider_http", Code: ue.Type}
	if ue.Status > 0 {
		ev.Error.Status = jsonStatus(ue.Status)
	}
	if latency > 0 {
		ms := float64(latency.Microseconds()) / 1000
		ev.LatencyMs = &ms
	}
	x.observe(ev, "", "")
}

// onForwardError observes a failed upstream call (no HTTP answer) as model.error.
func (x *lifecycle) onForwardError(err error) {
	var he *httpError
	if errors.As(err, &he) || errors.Is(err, errInterrupted) || x.ctx.Err() != nil {
		return
	}
	if !x.subs.any(ahp.EventModelError) {
		return
	}
	ev := x.newEvent(ahp.EventModelError)
	model, attempt := x.model, x.attempt
	ev.Model, ev.Attempt = &model, &attempt
	ev.Execution = &ahp.Execution{Status: ahp.ExecutionExecuted}
	ev.Error = &ahp.ErrorInfo{Message: "the upstream could not be reached", Class: "provider_connection"}
	x.observe(ev, "", "")
}

// bodyTap copies what a streamed-through body delivers (up to limit) while the client
// receives it unchanged.
type bodyTap struct {
	rc        io.ReadCloser
	buf       bytes.Buffer
	limit     int64
	streaming bool
	overflow  bool
	eof       bool
	status    int
	start     time.Time
	latency   time.Duration
}

func (t *bodyTap) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	if n > 0 && !t.overflow {
		if int64(t.buf.Len()+n) > t.limit {
			if t.status == 0 { // a success body: too large to observe
				t.overflow = true
				t.buf = bytes.Buffer{}
			} else { // an error body: keep its head
				t.buf.Write(p[:t.limit-int64(t.buf.Len())])
				t.overflow = true
			}
		} else {
			t.buf.Write(p[:n])
		}
	}
	if err == io.EOF && !t.eof {
		t.eof = true
		t.latency = time.Since(t.start)
	}
	return n, err
}

func (t *bodyTap) Close() error { return t.rc.Close() }
