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

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/state"
)

// Response side of a model boundary: model.response.after,
// then tool.before for every tool call in order, then turn.finish.before when no tool call
// remains; turn.end and model.error are observed.

// onUpstreamResponse runs as the reverse proxy's ModifyResponse: it holds the response
// when an interceptor must decide on it, taps it when only observers want it, and
// otherwise lets it stream through untouched.
func (x *exchange) onUpstreamResponse(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Upstream errors reach the client unchanged; their head is kept for model.error.
		if x.subs.any(ahp.EventModelError) {
			x.errTap = &bodyTap{rc: resp.Body, limit: maxErrorBodyTap, status: resp.StatusCode, start: x.upstreamStart}
			resp.Body = x.errTap
		}
		return nil
	}
	streaming := isEventStream(resp.Header.Get("Content-Type"))
	// The SDKs parse an answer as the request asked (a stream or not), whatever its
	// Content-Type; other clients go by the Content-Type. When the two disagree the body is
	// held whole and judged as what it is (holdResponse).
	mislabelled := x.req != nil && streaming != x.req.Stream
	switch {
	case x.holdsResponse():
		if se, ok := x.editsStream(streaming); ok && !mislabelled {
			if x.subs.any(ahp.EventModelResponseAfter) {
				x.responseAfterID = ahp.NewEventID()
			}
			x.editStream(resp, se)
			return nil
		}
		x.held = enforcement.HeldWhole
		return x.holdResponse(resp, streaming, mislabelled)
	case x.observesResponse() || streaming && x.subs.any(ahp.EventModelError):
		// Observers only: stream through untouched, keep a copy, observe at the end.
		x.held = enforcement.HeldNone
		x.tap = &bodyTap{rc: resp.Body, limit: x.s.limits.MaxResponseBytes, streaming: streaming, start: x.upstreamStart}
		resp.Body = x.tap
	}
	return nil
}

const maxErrorBodyTap = 64 << 10

// holdResponse reads the whole response, settles the response-side boundaries and puts
// the effective response in place of the upstream's. A mislabelled answer (its
// Content-Type is not what the request asked for) is judged as what its body is: a JSON
// value holds no event an SSE reader dispatches (no line of it can begin with "data:"),
// and an event stream is no JSON value, so whichever way the client parses it, only the
// reading judged here can give it anything. It goes out labelled as what it is.
func (x *exchange) holdResponse(resp *http.Response, streaming, mislabelled bool) error {
	// The bytes are counted in limits.maxHeldBytes as they arrive, not once the whole body
	// is in memory: concurrent large answers meet the server's limit while they are read.
	hr := &heldReader{s: x.s, r: resp.Body}
	raw, err := readAllLimited(hr, x.s.limits.MaxResponseBytes, resp.ContentLength)
	resp.Body.Close()
	latency := time.Since(x.upstreamStart)
	x.heldResponse = hr.reserved // released when the exchange ends
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

// responseResult is the settled response side.
type responseResult struct {
	changed bool
	body    []byte // EncodeResponse output when changed
	err     error  // refusal (fail-closed), interruption or render failure
}

// responseSide settles the response-side boundaries over a decoded response. latency is
// nil for a supplied result (no fabricated usage or latency, AHP spec, execution-payloads.md).
func (x *exchange) responseSide(resp *mapping.Response, latency *time.Duration) responseResult {
	x.observeHosted(resp.HostedCalls)
	items := cloneMessages(resp.Items)
	finish := resp.FinishReason
	changed, stopped := false, false
	mraID := ""

	// model.response.after
	if x.subs.any(ahp.EventModelResponseAfter) {
		ev := x.responseAfterEvent(resp, latency)
		ev.Items = cloneMessages(items)
		mraID = ev.ID
		st := x.settle(ev, capsModelResponse())
		switch {
		case st.Interrupted || x.ctx.Err() != nil:
			x.audit(ev, st, DeliveryIntercept, enforcement.Refused, "", "")
			return responseResult{err: errInterrupted}
		case st.Refused(): // only a fail-closed failure can deny here
			x.audit(ev, st, DeliveryIntercept, enforcement.Refused, "", "")
			return responseResult{err: x.rt.refusal(st.Denial)}
		}
		action := enforcement.Forwarded
		if st.Modified && st.Event != nil {
			items = cloneMessages(st.Event.Items)
			changed = true
			action = enforcement.Rewritten
		}
		if st.Stopped() {
			// flow stop: strip every pending tool call; terminal finish reason.
			calls := mapping.ToolCalls(items)
			if len(calls) > 0 {
				items = x.removeCalls(items, calls, allCalls(len(calls)),
					"Stopped by policy: "+st.StopReason)
				for _, c := range calls {
					x.observeResolved(c.ToolCall, "", "cancelled", "flow stop")
				}
				finish = x.tr.TerminalFinishReason()
				changed = true
			}
			stopped = true
			action = enforcement.Stopped
		}
		x.audit(ev, st, DeliveryIntercept, action, "", "")
	}

	// tool.before, one per call, in order.
	if !stopped && x.subs.any(ahp.EventToolBefore) {
		var err error
		var c, s bool
		items, finish, c, s, err = x.toolBefores(items, finish, mraID)
		if err != nil {
			return responseResult{err: err}
		}
		changed, stopped = changed || c, s
	}

	// turn.finish.before, when the response holds no tool call (a final answer).
	hasCalls := len(mapping.ToolCalls(items)) > 0
	if !hasCalls && !stopped && x.subs.any(ahp.EventTurnFinishBefore) {
		ev := x.turnFinishEvent(items)
		st := x.settle(ev, capsTurnFinish())
		switch {
		case st.Interrupted || x.ctx.Err() != nil:
			x.audit(ev, st, DeliveryIntercept, enforcement.Refused, "", "")
			return responseResult{err: errInterrupted}
		case st.Refused():
			x.audit(ev, st, DeliveryIntercept, enforcement.Refused, "", "")
			return responseResult{err: x.rt.refusal(st.Denial)}
		}
		action := enforcement.Forwarded
		if st.Modified && st.Event != nil {
			// A tool call added here would reach the harness without its tool.before.
			items = stripToolCalls(cloneMessages(st.Event.Items))
			changed = true
			action = enforcement.Rewritten
		}
		if st.Stopped() {
			stopped = true // nothing is pending: the answer is already final
			action = enforcement.Stopped
		}
		x.audit(ev, st, DeliveryIntercept, action, "", "")
	}

	x.final = &finalResponse{items: items, hasToolCalls: len(mapping.ToolCalls(items)) > 0, stopped: stopped}
	if !changed {
		return responseResult{}
	}
	body, err := x.tr.EncodeResponse(resp, items, finish)
	if err != nil {
		// The edit cannot be rendered; the unedited response must not go out instead.
		return responseResult{err: x.rt.internalError(fmt.Errorf("render response: %w", err))}
	}
	return responseResult{changed: true, body: body}
}

// responseAfterEvent builds the model.response.after event of resp without its items.
// latency is nil for a supplied result (no fabricated usage or latency, AHP spec,
// execution-payloads.md).
func (x *exchange) responseAfterEvent(resp *mapping.Response, latency *time.Duration) *ahp.Event {
	ev := x.newEvent(ahp.EventModelResponseAfter)
	if x.responseAfterID != "" {
		ev.ID = x.responseAfterID // announced as the parent of streamed tool.before events
	}
	model, attempt := x.model, x.attempt
	if resp.Model != "" {
		model.ID = resp.Model
	}
	ev.Model, ev.Attempt = &model, &attempt
	ev.FinishReason = resp.FinishReason
	if ev.FinishReason == "" {
		ev.FinishReason = "unknown"
		ev.Gaps = append(ev.Gaps, ahp.Gap{Path: "finishReason", Reason: "the provider reported no finish reason"})
	}
	if latency == nil {
		ev.Execution = &ahp.Execution{Status: ahp.ExecutionSkipped, Reason: ahp.SkipSuppliedResult}
	} else {
		ev.Execution = &ahp.Execution{Status: ahp.ExecutionExecuted}
		ev.Usage = attemptUsage(resp.Usage)
		ms := float64(latency.Microseconds()) / 1000
		ev.LatencyMs = &ms
	}
	return ev
}

// observeResponseAfter delivers model.response.after of a stream whose tool calls were
// settled as they arrived: only observers subscribe then, and they get the upstream's
// assembled message once the stream has ended.
func (x *exchange) observeResponseAfter(resp *mapping.Response, latency time.Duration) {
	ev := x.responseAfterEvent(resp, &latency)
	ev.Items = cloneMessages(resp.Items)
	st := x.settle(ev, capsModelResponse())
	x.audit(ev, st, DeliveryIntercept, enforcement.Forwarded, "", "")
}

// turnFinishEvent builds turn.finish.before over a final answer.
func (x *exchange) turnFinishEvent(items []ahp.Message) *ahp.Event {
	ev := x.newEvent(ahp.EventTurnFinishBefore)
	ev.Outcome = "completed"
	zero := 0
	ev.ContinuationCount = &zero // no proxy-run continuation
	ev.Items = cloneMessages(items)
	if id := lastAssistant(items); id != "" {
		ev.LastAssistantItem = &ahp.ItemRef{ID: id}
	}
	return ev
}

// toolBefores settles tool.before for each tool call of items, in response order
// (sequential and deterministic, as AHP-COMP-001 asks of interceptors).
func (x *exchange) toolBefores(items []ahp.Message, finish, parentID string) (_ []ahp.Message, _ string, changed, stopped bool, _ error) {
	calls := mapping.ToolCalls(items)
	if len(calls) == 0 {
		return items, finish, false, false, nil
	}
	var batch *ahp.Batch
	if len(calls) > 1 {
		ids := make([]string, len(calls))
		for i, c := range calls {
			ids[i] = c.ID
		}
		batch = &ahp.Batch{ID: derive("bat_", append([]string{x.s.source}, ids...)...), CallIDs: ids, Synthesized: true}
	}
	removed := map[int]bool{}
	var notes []string
	for i, c := range calls {
		v, err := x.settleToolCall(c.ToolCall, parentID, batch)
		if err != nil {
			return nil, "", false, false, err
		}
		switch {
		case v.Stop:
			// flow stop: remove this call and every later one (never asked).
			for j := i; j < len(calls); j++ {
				removed[j] = true
				if j > i {
					x.observeResolved(calls[j].ToolCall, "", "cancelled", "flow stop")
				}
			}
			notes = append(notes, v.Note)
			stopped = true
		case v.Remove:
			removed[i] = true
			notes = append(notes, v.Note)
		case v.Input != nil:
			// modify(input): the harness receives the effective arguments.
			part := items[c.Item].Parts[c.Part]
			items[c.Item].Parts[c.Part] = mapping.ToolCallPart(part.ID,
				mapping.ToolCall{ID: c.ID, Name: c.Name, Input: v.Input})
			changed = true
		}
		if stopped {
			break
		}
	}
	if len(removed) > 0 {
		items = x.removeCalls(items, calls, removed, joinLines(notes))
		changed = true
		if len(mapping.ToolCalls(items)) == 0 {
			finish = x.tr.TerminalFinishReason()
		}
	}
	return items, finish, changed, stopped, nil
}

// settleToolCall settles the tool.before of one tool call and says how the call is to be
// enforced: removed (deny, fail-closed, flow stop) with the note the agent is told, given
// effective arguments (modify(input)), or passed on. Both the held path and the stream
// editor's decider use it, so a call is judged the same way whichever path carries it.
func (x *exchange) settleToolCall(c mapping.ToolCall, parentID string, batch *ahp.Batch) (mapping.CallVerdict, error) {
	ev := x.newEvent(ahp.EventToolBefore)
	ev.ID = toolEventID(x.s.source, ahp.EventToolBefore, x.session.ID, c)
	ev.ParentEventID = parentID
	ev.Call = &ahp.Call{ID: c.ID}
	input := c.Input
	switch {
	case !isJSONObject(input):
		input = json.RawMessage(`{}`)
		ev.Gaps = []ahp.Gap{{Path: "tool.input", Reason: "arguments not a JSON object"}}
	case rawArguments(input):
		ev.Gaps = []ahp.Gap{{Path: "tool.input", Reason: "arguments are not a JSON object: their raw text is under " + mapping.RawArgumentsKey}}
	}
	ev.Tool = &ahp.Tool{Name: c.Name, Input: input, Origin: ahp.OriginNative}
	ev.Path = x.tr.ToolPath()
	if batch != nil {
		b := *batch
		ev.Batch = &b
	}
	st := x.settle(ev, x.s.withAsk(capsToolBefore()))
	switch {
	case st.Interrupted || x.ctx.Err() != nil:
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c.ID, c.Name)
		return mapping.CallVerdict{}, errInterrupted
	case st.Refused():
		// deny: remove this call before the harness sees it; report it resolved.
		reason, _ := denialText(st.Denial)
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c.ID, c.Name)
		x.observeResolved(c, ev.ID, "denied", "")
		return mapping.CallVerdict{Remove: true, Note: "Tool call " + c.Name + " was blocked by policy: " + reason}, nil
	case st.Stopped():
		x.observeResolved(c, ev.ID, "cancelled", "flow stop")
		x.audit(ev, st, DeliveryIntercept, enforcement.Stopped, c.ID, c.Name)
		return mapping.CallVerdict{Remove: true, Stop: true,
			Note: "Tool call " + c.Name + " was not run: stopped by policy: " + st.StopReason}, nil
	}
	if st.Permission == ahp.PermissionAsk {
		if v, done, err := x.holdAsked(ev, st, c, x.wire); done {
			return v, err
		}
	}
	var v mapping.CallVerdict
	action := enforcement.Forwarded
	if st.Modified && st.Event != nil && st.Event.Tool != nil {
		v.Input = st.Event.Tool.Input
		action = enforcement.Rewritten
		// The agent will send this call back with the rewritten input: link the id its
		// tool.after will derive to this event.
		rewritten := mapping.ToolCall{ID: c.ID, Name: c.Name, Input: v.Input}
		x.recordLink(toolEventID(x.s.source, ahp.EventToolBefore, x.session.ID, rewritten), ev.ID)
	}
	if len(st.Injections) > 0 {
		// Both delivery times lie in a later request: "now" is the next model call
		// (the one carrying this call's result), next_turn the next prompt.
		now, next := x.injections(st, ev.ID)
		x.deferInjections(state.NextCall, now)
		x.deferInjections(state.NextTurn, next)
	}
	x.audit(ev, st, DeliveryIntercept, action, c.ID, c.Name)
	return v, nil
}

// removeCalls deletes the removed calls and appends the note (mapping.RemoveCalls).
func (x *exchange) removeCalls(items []ahp.Message, calls []mapping.LocatedCall, removed map[int]bool, note string) []ahp.Message {
	return mapping.RemoveCalls(items, calls, removed, note, derive("msg_", x.attempt.ID, "note"))
}

// observeResolved reports a call hookproxy removed: tool.after with outcome denied or
// cancelled, execution skipped by policy, no output.
func (x *exchange) observeResolved(c mapping.ToolCall, parentID, outcome, detail string) {
	if !x.subs.any(ahp.EventToolAfter) {
		return
	}
	ev := x.newEvent(ahp.EventToolAfter)
	ev.ID = toolEventID(x.s.source, ahp.EventToolAfter, x.session.ID, c)
	ev.ParentEventID = parentID
	ev.Call = &ahp.Call{ID: c.ID}
	input := c.Input
	if !isJSONObject(input) {
		input = json.RawMessage(`{}`)
	}
	ev.Tool = &ahp.Tool{Name: c.Name, Input: input, Origin: ahp.OriginNative}
	ev.Path = x.tr.ToolPath()
	ev.Outcome = outcome
	ev.Execution = &ahp.Execution{Status: ahp.ExecutionSkipped, Reason: ahp.SkipPolicy, Detail: detail}
	ev.Items = []ahp.Message{}
	x.observe(ev, c.ID, c.Name)
}

// rawArguments reports whether a canonical input is the raw-text form of arguments that
// did not parse (mapping.RawArgumentsKey its only member).
func rawArguments(in json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil || len(m) != 1 {
		return false
	}
	_, ok := m[mapping.RawArgumentsKey]
	return ok
}

// observeHosted reports the tools the provider ran itself while answering (a web search,
// a code interpreter, a provider-side MCP call): tool.after observations with their
// results. They ran before the response existed, so no tool.before can prevent them;
// an observer still sees what was run and what came back.
func (x *exchange) observeHosted(calls []mapping.HostedCall) {
	if len(calls) == 0 || !x.subs.any(ahp.EventToolAfter) {
		return
	}
	for _, c := range calls {
		ev := x.newEvent(ahp.EventToolAfter)
		call := ahp.Call{ID: c.ID}
		if call.ID == "" {
			call = ahp.Call{ID: derive("call_", x.attempt.ID, c.Name, string(c.Input)), Synthesized: true}
		}
		ev.ID = toolEventID(x.s.source, ahp.EventToolAfter, x.session.ID, mapping.ToolCall{ID: call.ID, Name: c.Name, Input: c.Input})
		ev.Call = &call
		name := c.Name
		if name == "" {
			name = "unknown"
		}
		input := c.Input
		if !isJSONObject(input) {
			input = json.RawMessage(`{}`)
		}
		ev.Tool = &ahp.Tool{Name: name, Input: input, Origin: ahp.OriginNative, Kind: "hosted"}
		ev.Path = x.tr.ToolPath()
		ev.Outcome = "ok"
		if c.IsError {
			ev.Outcome = "error"
			ev.Error = &ahp.ErrorInfo{Message: "the provider's tool reported an error", Class: "tool_error"}
		}
		ev.Execution = &ahp.Execution{Status: ahp.ExecutionExecuted}
		ev.Gaps = []ahp.Gap{{Path: "execution", Reason: "run by the provider while answering: observed only, a proxy cannot prevent it"}}
		msgID := derive("msg_", ev.ID)
		ev.Items = []ahp.Message{{ID: msgID, Role: ahp.RoleTool, Synthesized: true, Parts: []ahp.Part{ahp.TextPart(msgID+".p0", x.scrub(c.Result))}}}
		x.observe(ev, call.ID, name)
	}
}

// answerLocally answers a request the upstream never saw: a supplied result (return) or
// a synthetic final answer after flow stop, as JSON or as the provider's SSE stream.
func (x *exchange) answerLocally(w http.ResponseWriter, r *http.Request, out requestOutcome) {
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

// afterDelivery dispatches what is observed once the client has the response: the
// response-side observations of a streamed-through response, model.error, and turn.end.
// Nothing is started once the client went away (interruption, AHP spec,
// base/failure.md "Deadlines").
func (x *exchange) afterDelivery() {
	if x.ctx.Err() != nil {
		return
	}
	if x.errTap != nil && x.errTap.eof {
		x.observeModelError(mapping.UpstreamErrorFromBody(x.errTap.status, x.errTap.buf.Bytes()), x.errTap.latency)
	}
	if x.tap != nil {
		x.observeTapped()
	}
	if x.streamErr != nil {
		x.observeModelError(x.streamErr, x.streamErrLatency)
	}
	if x.final != nil && !x.final.hasToolCalls && x.subs.any(ahp.EventTurnEnd) {
		ev := x.newEvent(ahp.EventTurnEnd)
		ev.Outcome = "completed"
		if x.final.stopped {
			ev.Outcome = "cancelled"
		}
		zero := 0
		ev.ContinuationCount = &zero
		ev.Items = cloneMessages(x.final.items)
		if id := lastAssistant(x.final.items); id != "" {
			ev.LastAssistantItem = &ahp.ItemRef{ID: id}
		}
		x.observe(ev, "", "")
	}
}

// observeTapped decodes a streamed-through response and runs the response-side
// boundaries for their observers (no interceptor matched, so nothing can change).
func (x *exchange) observeTapped() {
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
func (x *exchange) observeModelError(ue *mapping.UpstreamError, latency time.Duration) {
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
func (x *exchange) onForwardError(err error) {
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

func allCalls(n int) map[int]bool {
	m := make(map[int]bool, n)
	for i := 0; i < n; i++ {
		m[i] = true
	}
	return m
}

// stripToolCalls removes every tool_call part.
func stripToolCalls(items []ahp.Message) []ahp.Message {
	for i := range items {
		parts := items[i].Parts[:0:0]
		for j := range items[i].Parts {
			if _, ok := mapping.ParseToolCall(&items[i].Parts[j]); !ok {
				parts = append(parts, items[i].Parts[j])
			}
		}
		items[i].Parts = parts
	}
	return items
}

func lastAssistant(items []ahp.Message) string {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Role == ahp.RoleAssistant {
			return items[i].ID
		}
	}
	return ""
}

func joinLines(lines []string) string {
	var b bytes.Buffer
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

// attemptUsage completes provider usage as attempt usage (AHP spec, execution-payloads.md). Missing
// counts stay missing: unknown is not zero.
func attemptUsage(u *ahp.Usage) *ahp.Usage {
	if u == nil {
		return nil
	}
	c := *u
	if c.Kind == "" {
		c.Kind = "amount"
	}
	if c.Scope == "" {
		c.Scope = "attempt"
	}
	if c.Completeness == "" {
		c.Completeness = "complete"
	}
	if c.Provenance == "" {
		c.Provenance = "provider"
	}
	return &c
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
