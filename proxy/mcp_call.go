package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping/mcp"
)

// Denial codes of refusals the MCP handler decides itself.
const (
	codeMCPInvalidReturn = "hookproxy.invalid_return" // a supplied result that is not a CallToolResult
	codeMCPRenderFailed  = "hookproxy.render_failed"  // an accepted edit that cannot be applied
)

// mcpExchange is the per-request scope of one POST that holds tools/call requests: the
// decoded body, what each call became, and the calls whose results are still expected
// from the server. It lives for one HTTP request.
type mcpExchange struct {
	h    *mcpHandler
	ctx  context.Context
	subs mcpSubs

	body    *mcp.Body
	entries []mcpEntry
	session *ahp.Session
	scope   string   // what keeps JSON-RPC ids of different MCP sessions apart in call ids
	secrets []string // the client's credentials and session id, scrubbed from server text
	// modifyInput is false when the request mirrors arguments in Mcp-Param-* headers
	// (MCP 2026-07-28): hookproxy cannot re-derive those headers from edited arguments, and
	// a server checks that they agree, so an edit would not be enforceable as the policy
	// meant it. It is then not advertised (AHP spec, capability-auth.md "Discovery and honest
	// capabilities").
	modifyInput bool
	approval    *ApprovalAudit // the approval of the call being audited next (approval_hold_mcp.go)
	// w and sseOK let a call held for approval turn the answer into an SSE stream that
	// carries progress notifications (mcp_held_stream.go); held is that stream once begun.
	w     http.ResponseWriter
	sseOK bool
	held  *mcpHeldStream

	outBody  []byte        // what goes upstream
	local    [][]byte      // answers hookproxy gives itself, in body order
	awaiting []*mcpAwaited // the requests that went to the server, in body order

	settlements []*chain.Settlement
	observing   sync.WaitGroup
}

// mcpEntry is one message of the body: forwarded (raw, possibly rewritten) or answered
// locally (answer).
type mcpEntry struct {
	raw    []byte
	answer []byte
	call   *mcpCallSt
}

// mcpCallSt is one tools/call and what happened to it.
type mcpCallSt struct {
	call     *mcp.ToolCall
	callID   string
	input    json.RawMessage // effective arguments
	beforeID string          // tool.before event id; "" when none was built
	batch    *ahp.Batch
}

// serveCalls handles a POST while a tool event is subscribed.
func (h *mcpHandler) serveCalls(w http.ResponseWriter, r *http.Request, subs mcpSubs) {
	limit := h.env.Limits.MaxRequestBytes
	if r.ContentLength > limit {
		h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, mcp.CodeInvalidRequest, h.tooLargeMessage())
		return
	}
	raw, err := readAllLimited(r.Body, limit, r.ContentLength)
	if err != nil {
		h.mcpReadError(w, r, err)
		return
	}
	if len(r.Header.Values("Content-Encoding")) > 0 {
		// The calls are judged in the decoded body, which is what the server then receives
		// (content_coding.go).
		if raw, err = decodeRequestBody(r.Header, raw, limit); err != nil {
			h.mcpCodingError(w, err)
			return
		}
		r.Header.Del("Content-Encoding")
	}
	body, err := mcp.ParseBody(raw)
	if err != nil {
		// No hook is called for a body nobody can read, and it is not forwarded: a server
		// that parsed it differently could run a call no hook saw.
		code, msg := mcp.CodeInvalidRequest, err.Error()
		var je *mcp.Error
		if errors.As(err, &je) {
			code, msg = je.Code, je.Message
		}
		h.writeRPCError(w, http.StatusBadRequest, nil, code, "hookproxy: "+msg)
		return
	}
	ctx := withPolicyBudget(r.Context(), h.env.Limits)
	x := &mcpExchange{h: h, ctx: ctx, subs: subs, body: body, modifyInput: true, w: w, sseOK: acceptsEventStream(r.Header)}
	// A hook call owns the observations it dispatched: they finish within the request.
	defer x.wait()
	x.session, x.scope = h.sessionOf(r)
	_, x.secrets = credentialsOf(r.Header)
	if v := r.Header.Get(mcpSessionHeader); v != "" {
		x.secrets = append(x.secrets, v)
	}
	for name := range r.Header {
		if strings.HasPrefix(name, mcpParamHeaderPrefix) {
			x.modifyInput = false
		}
	}
	if err := x.decide(); err != nil {
		return // interrupted: the client went away
	}
	changed := false
	var out [][]byte
	for i, e := range x.entries {
		if e.answer != nil {
			x.local = append(x.local, e.answer)
			changed = true
			continue
		}
		out = append(out, e.raw)
		changed = changed || !bytes.Equal(e.raw, body.Messages[i].Raw)
	}
	if len(out) == 0 {
		// Everything was answered here: the server is not called.
		x.writeLocal(w)
		return
	}
	x.outBody = raw // unchanged: the client's bytes go out as they came
	if changed {
		x.outBody = body.Encode(out)
	}
	fwd := r.WithContext(context.WithValue(r.Context(), mcpStateKey{}, &mcpState{x: x}))
	if x.held != nil {
		// The answer is already an SSE stream (a call waited for approval with progress
		// notifications): the server's answer, checked as always, goes out on it.
		rw := x.held.relay(x)
		h.rp.ServeHTTP(rw, fwd)
		rw.finish()
		return
	}
	h.rp.ServeHTTP(w, fwd)
}

// sessionOf returns session.id and the call-id scope. The Mcp-Session-Id value is hashed,
// never put into events or logs as is: the server hands it out as the session's only
// credential, so anyone holding it could act in that session. Its hash still correlates
// the events of one session. Without any session the call ids get a random scope, since
// JSON-RPC ids repeat across clients and AHP call identities must not collide.
func (h *mcpHandler) sessionOf(r *http.Request) (*ahp.Session, string) {
	mcpSession := r.Header.Get(mcpSessionHeader)
	scope := "nonce:" + randomHex()
	if mcpSession != "" {
		scope = derive("", "mcp-session", mcpSession)
	}
	if v := strings.TrimSpace(r.Header.Get(SessionHeader)); v != "" {
		return &ahp.Session{ID: v}, scope
	}
	if mcpSession != "" {
		return &ahp.Session{ID: derive("ses_", h.serverID, "mcp-session", mcpSession), Synthesized: true}, scope
	}
	return nil, scope // AHP: never fabricate a session
}

// decide classifies every message and settles tool.before for each tools/call, in body
// order (sequential, so decisions are deterministic). It returns errInterrupted when the
// client went away.
func (x *mcpExchange) decide() error {
	var calls []*mcpCallSt
	x.entries = make([]mcpEntry, len(x.body.Messages))
	for i := range x.body.Messages {
		m := &x.body.Messages[i]
		x.entries[i].raw = m.Raw
		call, isCall, err := mcp.ToolCallOf(m)
		switch {
		case !isCall:
		case err != nil:
			// A tools/call nobody can judge is answered here and never forwarded.
			var je *mcp.Error
			if !errors.As(err, &je) {
				je = &mcp.Error{Code: mcp.CodeInvalidParams, Message: err.Error()}
			}
			x.entries[i].answer = mcp.ErrorResponse(m.ID, je.Code, "hookproxy: "+je.Message, nil)
		default:
			c := &mcpCallSt{call: call, input: call.Arguments,
				callID: derive("call_", x.h.serverID, x.scope, mcp.IDKey(call.ID))}
			x.entries[i].call = c
			calls = append(calls, c)
		}
	}
	if len(calls) > 1 {
		ids := make([]string, len(calls))
		for i, c := range calls {
			ids[i] = c.callID
		}
		b := &ahp.Batch{ID: derive("bat_", append([]string{x.h.serverID, x.scope}, ids...)...), CallIDs: ids, Synthesized: true}
		for _, c := range calls {
			c.batch = b
		}
	}
	for i := range x.entries {
		e := &x.entries[i]
		if e.call == nil {
			continue
		}
		if err := x.toolBefore(e); err != nil {
			return err
		}
	}
	for i, e := range x.entries {
		if m := &x.body.Messages[i]; e.answer == nil && m.Kind == mcp.KindRequest {
			x.awaiting = append(x.awaiting, &mcpAwaited{exact: mcp.IDKey(m.ID), loose: mcp.LooseIDKey(m.ID), call: e.call})
		}
	}
	return nil
}

// newEvent starts a tool event of call c.
func (x *mcpExchange) newEvent(typ string, c *mcpCallSt) *ahp.Event {
	ev := &ahp.Event{ID: ahp.NewEventID(), Source: x.h.env.Source, Type: typ, Time: eventTime(),
		Call: &ahp.Call{ID: c.callID, Synthesized: true}, Path: mcp.ToolPath}
	if x.session != nil {
		s := *x.session
		ev.Session = &s
	}
	ev.Tool = &ahp.Tool{Name: c.call.Name, Input: c.input, Origin: ahp.OriginMCP, MCP: &ahp.MCPTool{
		Server:     ahp.MCPServer{ID: x.h.serverID},
		ToolName:   c.call.Name,
		Provenance: "runtime", // seen on the wire, not inferred
		Connection: ahp.MCPConnection{Transport: "http", URL: x.h.connURL},
	}}
	if c.batch != nil {
		b := *c.batch
		ev.Batch = &b
	}
	return ev
}

// capsMCPToolBefore is what hookproxy enforces at an MCP tool.before: deny and flow stop
// (the caller gets an error result, the server is not called), modify(input) (the server
// receives the effective arguments) and return (the caller gets the supplied result, the
// server is not called). Not allow or ask (there is no permission prompt to suppress or
// raise), not message (no user channel), not inject (no model request to carry it).
func capsMCPToolBefore(modifyInput bool) ahp.Capabilities {
	c := ahp.Capabilities{
		Effects: []string{ahp.EffectDeny, ahp.EffectReturn, ahp.EffectFlow},
		Flow:    &ahp.FlowCaps{Operations: []string{ahp.OpStop}},
	}
	if modifyInput {
		c.Effects = append(c.Effects, ahp.EffectModify)
		c.Modify = map[string]ahp.ModifyOps{ahp.TargetInput: {Replace: true, Merge: true}}
	}
	return c
}

// capsMCPToolAfter: modify(output) rewrites the result before the caller sees it.
func capsMCPToolAfter() ahp.Capabilities {
	return ahp.Capabilities{
		Effects: []string{ahp.EffectModify},
		Modify:  map[string]ahp.ModifyOps{ahp.TargetOutput: {Replace: true, Merge: true}},
	}
}

// toolBefore settles and enforces tool.before of one call.
func (x *mcpExchange) toolBefore(e *mcpEntry) error {
	c := e.call
	if !x.subs.before {
		return nil
	}
	ev := x.newEvent(ahp.EventToolBefore, c)
	c.beforeID = ev.ID
	st := x.settle(ev, withAsk(x.h.env.Approvals, capsMCPToolBefore(x.modifyInput)))
	switch {
	case st.Interrupted || x.ctx.Err() != nil:
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
		return errInterrupted
	case st.Refused():
		reason, _ := denialText(st.Denial)
		e.answer = mcp.ResultResponse(c.call.ID, mcp.DenialResult(reason))
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
		x.observeResolved(c, "denied", ahp.SkipPolicy, "", nil)
		return nil
	case st.Stopped():
		reason := st.StopReason
		if reason == "" {
			reason = "Stopped by policy."
		}
		e.answer = mcp.ResultResponse(c.call.ID, mcp.DenialResult(reason))
		x.audit(ev, st, DeliveryIntercept, enforcement.Stopped, c)
		x.observeResolved(c, "cancelled", ahp.SkipPolicy, "flow stop", nil)
		return nil
	}
	if st.Event != nil && st.Event.Tool != nil {
		c.input = st.Event.Tool.Input
	}
	if st.Permission == ahp.PermissionAsk && x.holdAsked(e, ev, st) {
		return nil
	}
	if st.Candidate != nil {
		return x.supplied(e, ev, st)
	}
	action := enforcement.Forwarded
	if st.Modified {
		out, err := mcp.WithArguments(e.raw, c.input)
		if err != nil {
			// An accepted edit that cannot be applied must not fall back to the original
			// arguments: those are exactly what the policy changed.
			x.h.log.Error("mcp: applying modify(input) failed", zap.Error(err))
			x.refuseCall(e, ev, st, "hookproxy could not apply a policy edit to the tool arguments.",
				"policy edit could not be applied", "a policy edit to the arguments could not be applied", codeMCPRenderFailed)
			return nil
		}
		e.raw = out
		action = enforcement.Rewritten
	}
	x.audit(ev, st, DeliveryIntercept, action, c)
	return nil
}

// refuseCall answers a call whose settled decision hookproxy cannot carry out with a
// denial the client reads (text): it is audited as refused and observed as an error
// (reason, and detail with code), never forwarded as it was — that is what the policy
// meant to change.
func (x *mcpExchange) refuseCall(e *mcpEntry, ev *ahp.Event, st *chain.Settlement, text, reason, detail, code string) {
	c := e.call
	e.answer = mcp.ResultResponse(c.call.ID, mcp.DenialResult(text))
	x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c)
	x.observeResolved(c, "error", ahp.SkipOther, reason, &ahp.ErrorInfo{Message: detail, Class: "hookproxy", Code: code})
}

// supplied answers a call from a return effect: the server is not called, and the
// supplied result still passes tool.after.
func (x *mcpExchange) supplied(e *mcpEntry, ev *ahp.Event, st *chain.Settlement) error {
	c := e.call
	res, err := mcp.ParseSupplied(st.Candidate.Value)
	if err != nil {
		// The engine checks only that the value is JSON; an MCP client could not decode
		// this one, and forwarding instead would run what the policy meant to replace.
		x.h.log.Warn("mcp: a supplied tool result is not a CallToolResult", zap.Error(err))
		x.refuseCall(e, ev, st, "hookproxy refused the call: a policy supplied a result that is not an MCP CallToolResult.",
			"supplied result is not a CallToolResult", "the supplied result is not an MCP CallToolResult", codeMCPInvalidReturn)
		return nil
	}
	x.audit(ev, st, DeliveryIntercept, enforcement.Supplied, c)
	final, err := x.toolAfter(c, res, ahp.Execution{Status: ahp.ExecutionSkipped, Reason: ahp.SkipSuppliedResult})
	if err != nil {
		return err
	}
	e.answer = mcp.ResultResponse(c.call.ID, final)
	return nil
}

// settle runs one boundary through the chain.
func (x *mcpExchange) settle(ev *ahp.Event, caps ahp.Capabilities) *chain.Settlement {
	st := settledOrNone(traceIntercept(x.ctx, x.h.env.Tracer, x.h.env.Chain, ev, caps), ev)
	x.settlements = append(x.settlements, st)
	return st
}

// observeResolved reports a call that did not produce a server result the caller sees:
// tool.after with no items, delivered to observers (as the model routes report removed
// calls). errInfo is required iff outcome is "error".
func (x *mcpExchange) observeResolved(c *mcpCallSt, outcome, reason, detail string, errInfo *ahp.ErrorInfo) {
	if !x.subs.after {
		return
	}
	ev := x.newEvent(ahp.EventToolAfter, c)
	ev.ParentEventID = c.beforeID
	ev.Outcome = outcome
	ev.Execution = &ahp.Execution{Status: ahp.ExecutionSkipped, Reason: reason, Detail: detail}
	if reason == "" {
		ev.Execution = &ahp.Execution{Status: ahp.ExecutionExecuted}
	}
	ev.Error = errInfo
	ev.Items = []ahp.Message{}
	action := enforcement.Forwarded
	if outcome == "denied" || outcome == "cancelled" {
		action = enforcement.Refused
	}
	addTraceContext(x.ctx, ev)
	x.observing.Go(func() { x.h.env.Chain.Observe(x.ctx, ev) })
	x.audit(ev, nil, DeliveryObserve, action, c)
}

// wait returns once every delivery this request started has completed or reached its
// bounded deadline.
func (x *mcpExchange) wait() {
	for _, st := range x.settlements {
		st.Wait()
	}
	x.observing.Wait()
}

// audit hands one boundary to the Auditor.
func (x *mcpExchange) audit(ev *ahp.Event, st *chain.Settlement, delivery string, action enforcement.Action, c *mcpCallSt) {
	a := x.h.env.Auditor
	if a == nil {
		return
	}
	rec := BoundaryRecord{
		Time: time.Now().UTC(), Route: x.h.prefix, API: config.APIMCP,
		EventID: ev.ID, EventType: ev.Type, ParentID: ev.ParentEventID,
		CallID: c.callID, ToolName: c.call.Name,
		Delivery: delivery, Enforcement: action, Event: ev,
		Permission: ahp.PermissionNone, Flow: ahp.FlowNone,
	}
	if ev.Session != nil {
		rec.SessionID = ev.Session.ID
	}
	if st != nil && st.Event != nil && st.Event != ev {
		rec.Original = ev // the chain copies on write: ev is the event as it was judged first
	}
	rec.settled(st)
	rec.Approval, x.approval = x.approval, nil
	a.OnBoundary(x.ctx, rec)
}

// writeLocal answers a POST that the server never sees: every request in it was answered
// by hookproxy (HTTP 200, JSON, in the body's own single or batch shape; one SSE message
// event when a held call already made the answer a stream).
func (x *mcpExchange) writeLocal(w http.ResponseWriter) {
	body := x.body.Encode(x.local)
	if x.held != nil {
		x.held.message(body) // the answer is already an SSE stream: one message event
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// prepareOutbound sets the body that goes upstream (reverse proxy Rewrite).
func (x *mcpExchange) prepareOutbound(out *http.Request) {
	setOutboundBody(out, x.outBody, x.readsResponse())
}

// readsResponse reports whether the server's answer must be read: results to check, or
// local answers to merge into it.
func (x *mcpExchange) readsResponse() bool {
	// A held stream relays the answer into an SSE stream it framed itself, which must not
	// carry bytes in a Content-Encoding the client never sees announced.
	return (x.subs.after && x.callsPending()) || len(x.local) > 0 || x.held != nil
}

// scrub removes the client's credentials and session id, and anything shaped like an API
// key, from server-supplied text before it enters an event: a server may echo them in an
// error message, and hook events never carry credentials.
func (x *mcpExchange) scrub(s string) string {
	for _, sec := range x.secrets {
		if len(sec) >= 8 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}
