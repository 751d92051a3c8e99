package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/state"
)

// Response side of a model boundary: model.response.after,
// then tool.before for every tool call in order, then turn.finish.before when no tool call
// remains; turn.end and model.error are observed.

// responseResult is the settled response side.
type responseResult struct {
	changed bool
	body    []byte // EncodeResponse output when changed
	err     error  // refusal (fail-closed), interruption or render failure
}

// responseSide settles the response-side boundaries over a decoded response. latency is
// nil for a supplied result (no fabricated usage or latency, AHP spec, execution-payloads.md).
func (x *lifecycle) responseSide(resp *mapping.Response, latency *time.Duration) responseResult {
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
func (x *lifecycle) responseAfterEvent(resp *mapping.Response, latency *time.Duration) *ahp.Event {
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
func (x *lifecycle) observeResponseAfter(resp *mapping.Response, latency time.Duration) {
	ev := x.responseAfterEvent(resp, &latency)
	ev.Items = cloneMessages(resp.Items)
	st := x.settle(ev, capsModelResponse())
	x.audit(ev, st, DeliveryIntercept, enforcement.Forwarded, "", "")
}

// turnFinishEvent builds turn.finish.before over a final answer.
func (x *lifecycle) turnFinishEvent(items []ahp.Message) *ahp.Event {
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
func (x *lifecycle) toolBefores(items []ahp.Message, finish, parentID string) (_ []ahp.Message, _ string, changed, stopped bool, _ error) {
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
func (x *lifecycle) settleToolCall(c mapping.ToolCall, parentID string, batch *ahp.Batch) (mapping.CallVerdict, error) {
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
func (x *lifecycle) removeCalls(items []ahp.Message, calls []mapping.LocatedCall, removed map[int]bool, note string) []ahp.Message {
	return mapping.RemoveCalls(items, calls, removed, note, derive("msg_", x.attempt.ID, "note"))
}

// observeResolved reports a call hookproxy removed: tool.after with outcome denied or
// cancelled, execution skipped by policy, no output.
func (x *lifecycle) observeResolved(c mapping.ToolCall, parentID, outcome, detail string) {
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
	// Without the key's bytes and without a \u escape (the only JSON escape that can spell
	// a letter or "_"), no member is named so: the common case, answered without decoding
	// every call's input.
	if !bytes.Contains(in, rawArgumentsKey) && !bytes.Contains(in, unicodeEscape) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil || len(m) != 1 {
		return false
	}
	_, ok := m[mapping.RawArgumentsKey]
	return ok
}

var rawArgumentsKey, unicodeEscape = []byte(mapping.RawArgumentsKey), []byte(`\u`)

// observeHosted reports the tools the provider ran itself while answering (a web search,
// a code interpreter, a provider-side MCP call): tool.after observations with their
// results. They ran before the response existed, so no tool.before can prevent them;
// an observer still sees what was run and what came back.
func (x *lifecycle) observeHosted(calls []mapping.HostedCall) {
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
