package proxy

import (
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// holdAsked holds an MCP tools/call whose tool.before settled with permission ask until a
// person decides; the server is not called meanwhile. Approved: false, and the call goes
// on exactly as judged (a supplied result, if any, still applies: approval gates it too).
// Otherwise true: the caller gets an error result naming the decider or the timeout.
// When the request carries a progressToken and the client accepts SSE, the answer becomes
// an SSE stream now and the wait is reported with notifications/progress at least every
// approvalKeepAlive (mcp_held_stream.go); without one the client hears nothing until the
// decision, as a JSON answer.
func (x *mcpExchange) holdAsked(e *mcpEntry, ev *ahp.Event, st *chain.Settlement) bool {
	c := e.call
	a := x.h.env.Approvals
	deny := func(text string) bool {
		e.answer = mcp.ResultResponse(c.call.ID, mcp.DenialResult(text))
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
		x.observeResolved(c, "denied", ahp.SkipPolicy, "", nil)
		return true
	}
	if a == nil {
		return deny("Tool call " + c.call.Name + " needs approval, and this proxy has no approval path, so it is refused.")
	}
	session := ""
	if ev.Session != nil {
		session = ev.Session.ID
	}
	var tick func()
	if token := mcp.ProgressToken(c.call.Meta); token != nil && x.sseOK && x.w != nil {
		// The client asked for progress on this call and reads SSE: it learns at once,
		// and then at every keep-alive tick, that the call waits for a person
		// (notifications/progress; the answer follows on the same stream).
		if x.held == nil {
			x.held = startHeldStream(x.w)
		}
		x.held.notifyProgress(token)
		tick = func() { x.held.notifyProgress(token) }
	}
	o := a.Service.Hold(x.ctx, approvals.Ask{Route: x.h.prefix, Session: session, Tool: c.call.Name, Input: c.input,
		Generation: a.Generation, AskedBy: askedBy(st), Reasons: askReasons(st)}, approvalKeepAlive, tick)
	x.approval = &ApprovalAudit{ID: o.Record.ID, Decision: o.Decision, By: o.By, WaitedMs: float64(o.Waited.Microseconds()) / 1000}
	x.h.log.Info("held MCP tool call decided", zap.String("approval", o.Record.ID), zap.String("tool", c.call.Name),
		zap.String("decision", o.Decision), zap.String("by", o.By), zap.Duration("waited", o.Waited))
	if o.Approved {
		return false
	}
	return deny(o.Note(c.call.Name))
}
