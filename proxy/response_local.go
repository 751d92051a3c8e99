package proxy

import (
	"fmt"
	"net/http"
	"strconv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// A request the upstream never sees: answered from a supplied result or after a flow
// stop, with the response-side boundaries still run over a supplied answer.

// answerLocally answers a request the upstream never saw: a supplied result (return) or
// a synthetic final answer after flow stop, as JSON or as the provider's SSE stream.
func (x *lifecycle) answerLocally(w http.ResponseWriter, r *http.Request, out requestOutcome) {
	terminal := x.tr.TerminalFinishReason()
	var msgs []ahp.Message
	if out.kind == outcomeSupplied {
		msgs = out.supplied
	} else {
		id := derive("msg_", x.attempt.ID, "stop")
		msgs = []ahp.Message{{ID: id, Role: ahp.RoleAssistant, Synthesized: true,
			Parts: []ahp.Part{ahp.TextPart(id+".0", "Stopped by policy: "+out.stopReason)}}}
	}
	finish := terminal
	if len(mapping.ToolCalls(msgs)) > 0 {
		finish = "" // the translator picks its tool-call finish reason; tool.before follows
	}
	body, err := x.tr.SynthesizeResponse(x.req, msgs, finish)
	if err != nil {
		x.s.writeError(w, r, x.rt, x.rt.internalError(fmt.Errorf("synthesize response: %w", err)))
		return
	}
	if out.kind == outcomeSupplied {
		// A supplied result skips only the provider call; the response-side controls
		// still run, with execution skipped/supplied_result.
		resp, err := x.tr.DecodeResponse(body)
		if err != nil || resp == nil {
			x.s.writeError(w, r, x.rt, x.rt.internalError(fmt.Errorf("decode synthesized response: %w", err)))
			return
		}
		res := x.responseSide(resp, nil)
		if res.err != nil {
			x.s.writeError(w, r, x.rt, res.err)
			return
		}
		if res.changed {
			body = res.body
		}
	} else {
		x.final = &finalResponse{items: msgs, stopped: true}
	}
	h := w.Header()
	if x.req.Stream {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if err := x.tr.WriteStream(w, body); err != nil {
			x.s.logAt(x.ctx, zapcore.DebugLevel, "writing a synthesized stream failed", zap.String("route", x.rt.prefix), zap.Error(err))
			return
		}
	} else {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}
	x.afterDelivery()
}
