package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/state"
)

// Request side of a model boundary: tool.after for each
// new tool result, turn.start for a new prompt, then model.request.before with the whole
// effective list. Each settlement is enforced before the next boundary is built.

type outcomeKind int

const (
	outcomeForward     outcomeKind = iota // call the upstream with outBody
	outcomeRefused                        // answer err (403 refusal or local failure)
	outcomeSupplied                       // answer from a supplied result, no upstream call
	outcomeStopped                        // flow stop: synthetic final answer, no upstream call
	outcomeInterrupted                    // the client went away
)

type requestOutcome struct {
	kind       outcomeKind
	err        *httpError
	supplied   []ahp.Message
	stopReason string
}

func (x *lifecycle) requestSide() requestOutcome {
	// Deferred injections are taken before this request's boundaries run, so that a
	// next_turn effect accepted now is not delivered in this same request: "now" effects
	// accepted at the previous response's tool.before belong to this model call, next_turn
	// effects to the first call of a new prompt. The records of the conversation come in
	// the same store round trip.
	if x.requestOnly {
		return x.requestOnlySide()
	}
	ps := x.req.PromptStart
	take := []state.Deferral{state.NextCall}
	if ps >= 0 {
		take = append(take, state.NextTurn)
	}
	snap, stop := x.loadState(take...)
	if stop != nil {
		return *stop
	}
	// Rewrites settled at earlier requests of the conversation hold again before any
	// boundary sees the list (rewrites.go).
	x.applyRecords(snap.Records)
	out := x.requestBoundaries(ps, append(snap.NextCall, snap.NextTurn...))
	if err := x.commitRecords(out.kind); err != nil {
		out = requestOutcome{kind: outcomeRefused, err: err}
	}
	if out.kind != outcomeForward && out.kind != outcomeSupplied {
		// Refused, stopped or interrupted: the model did not get them; keep them pending.
		x.deferInjections(state.NextCall, snap.NextCall)
		x.deferInjections(state.NextTurn, snap.NextTurn)
	}
	return out
}

// requestOnlySide settles a request-only endpoint (count_tokens, embeddings, legacy
// completions): rewrites settled earlier in the conversation are put back (a redacted
// tool result stays redacted), what the store does not know is settled again, then
// model.request.before runs over the prompt. Injections waiting for the next model call
// stay waiting, and nothing this request settles is recorded: it is not a model call.
// A policy that answers or stops it refuses it (there is no answer to supply).
func (x *lifecycle) requestOnlySide() requestOutcome {
	snap, stop := x.loadState()
	if stop != nil {
		return *stop
	}
	x.applyRecords(snap.Records)
	out := x.requestBoundaries(-1, nil)
	if out.kind == outcomeSupplied || out.kind == outcomeStopped {
		reason := "Refused: the policy answered or stopped this request, and this endpoint has no answer to supply."
		if out.stopReason != "" {
			reason += " " + out.stopReason
		}
		return requestOutcome{kind: outcomeRefused, err: &httpError{status: http.StatusForbidden,
			body: x.rt.errorBody(http.StatusForbidden, mapping.DeniedType(x.rt.provider()), "", reason)}}
	}
	return out
}

func (x *lifecycle) requestBoundaries(ps int, deliveries []ahp.Message) requestOutcome {
	var now []ahp.Message // "now" injections, appended before model.request.before

	// (a) tool.after for each tool result and (b) turn.start for each prompt that the
	// conversation's records do not cover, in history order: the new ones (the results
	// after the last assistant message, the trailing prompt) and any older one the store
	// does not know (rewrites.go: fail-safe). A retried request's new content is known
	// already and not settled twice.
	toolAfter, turnStart := x.subs.any(ahp.EventToolAfter), x.subs.any(ahp.EventTurnStart)
	if toolAfter || turnStart {
		// A partial list (a Responses delta on server-held history) carries only new
		// content, with ids derived from positions that repeat from one delta to the next:
		// there a record cannot tell a retry from an identical new prompt or result, so the
		// new content is always settled, and not recorded (the provider keeps what the
		// model saw; the client does not re-send it).
		newFrom := len(x.req.Items)
		if listHasGaps(x.req.Gaps) {
			newFrom = lastRole(x.req.Items, ahp.RoleAssistant) + 1
			x.rw.partial, x.rw.newFrom = true, newFrom
		}
		lastAnswer := lastRole(x.req.Items, ahp.RoleAssistant)
		for u := range settlementUnits(x.req, ps) {
			if u.start < newFrom && x.rw.knownRun(u.start, u.end) {
				continue
			}
			// Content the model answered already that no record covers: forgotten, or
			// settled elsewhere (audited as resettled).
			x.rw.resettling = u.start < lastAnswer
			var out requestOutcome
			var done bool
			switch {
			case u.result != nil && toolAfter:
				out, done = x.toolAfter(*u.result, &now)
			case u.result == nil && turnStart:
				out, done = x.turnStart(u.start, u.end, &now)
			}
			if done {
				x.rw.resettling = false
				return out
			}
		}
		x.rw.resettling = false
	}

	if n := len(deliveries) + len(now); n > 0 {
		x.items = append(append(x.items, deliveries...), now...)
		x.changed = true
	}

	// (c) model.request.before — the whole effective list.
	if x.subs.any(ahp.EventModelRequestBefore) {
		if out, done := x.modelRequestBefore(); done {
			return out
		}
	}

	// Render edits only when something changed; otherwise the original bytes go out.
	body := x.req.Original
	if x.changed {
		var err error
		if body, err = x.tr.EncodeRequest(x.req, x.items); err != nil {
			// An accepted edit that cannot be rendered must not fall back to the original
			// bytes: those are exactly what a policy changed (fail closed).
			return requestOutcome{kind: outcomeRefused, err: x.rt.internalError(fmt.Errorf("render request: %w", err))}
		}
	}
	if len(x.paramReds) > 0 {
		var err error
		if body, _, err = mapping.RedactParams(body, x.req.Params, x.paramReds); err != nil {
			return requestOutcome{kind: outcomeRefused, err: x.rt.internalError(fmt.Errorf("redact request params: %w", err))}
		}
	}
	x.outBody = body
	return requestOutcome{kind: outcomeForward}
}

// lastRole is the index of the last message with role, or -1.
func lastRole(items []ahp.Message, role string) int {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Role == role {
			return i
		}
	}
	return -1
}

// settledRefusalOrStop enforces the outcomes shared by every request-side boundary:
// interruption, denial (explicit or fail-closed) and flow stop.
func (x *lifecycle) settledRefusalOrStop(ev *ahp.Event, st *chain.Settlement, callID, tool string) (requestOutcome, bool) {
	switch {
	case st.Interrupted || x.ctx.Err() != nil:
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, callID, tool)
		return requestOutcome{kind: outcomeInterrupted}, true
	case st.Refused(): // AHP-DEC-002: do not execute; report the denial
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, callID, tool)
		return requestOutcome{kind: outcomeRefused, err: x.rt.refusal(st.Denial)}, true
	case st.Stopped(): // flow stop: no further model work
		x.audit(ev, st, DeliveryIntercept, enforcement.Stopped, callID, tool)
		return requestOutcome{kind: outcomeStopped, stopReason: st.StopReason}, true
	}
	return requestOutcome{}, false
}

// toolAfter builds and settles the tool.after of one tool result.
func (x *lifecycle) toolAfter(r mapping.ToolResult, now *[]ahp.Message) (requestOutcome, bool) {
	idx := x.rw.at(r.ItemIndex) // r indexes the client's list
	orig := x.items[idx]
	ev := x.newEvent(ahp.EventToolAfter)
	call := ahp.Call{ID: r.CallID}
	if call.ID == "" {
		call = ahp.Call{ID: derive("call_", x.session.ID, orig.ID), Synthesized: true}
	}
	asCall := mapping.ToolCall{ID: call.ID, Name: r.ToolName, Input: r.Input}
	ev.ID = toolEventID(x.s.source, ahp.EventToolAfter, x.session.ID, asCall)
	if x.subs.any(ahp.EventToolBefore) {
		ev.ParentEventID = x.parentOf(toolEventID(x.s.source, ahp.EventToolBefore, x.session.ID, asCall))
	}
	var gaps []ahp.Gap
	name := r.ToolName
	if name == "" || !r.CallFound {
		if name == "" {
			name = "unknown"
		}
		gaps = append(gaps, ahp.Gap{Path: "tool.name", Reason: "the tool call answered by this result is not in the request history"})
	}
	input := r.Input
	if !isJSONObject(input) {
		input = json.RawMessage(`{}`)
		gaps = append(gaps, ahp.Gap{Path: "tool.input", Reason: "the arguments of the tool call are unknown or not a JSON object"})
	}
	ev.Call = &call
	ev.Tool = &ahp.Tool{Name: name, Input: input, Origin: ahp.OriginNative}
	ev.Path = x.tr.ToolPath()
	ev.Outcome = "ok"
	if r.IsError {
		ev.Outcome = "error"
		ev.Error = &ahp.ErrorInfo{Message: "tool reported an error", Class: "tool_error"}
	}
	ev.Execution = &ahp.Execution{Status: ahp.ExecutionExecuted}
	ev.Gaps = append(gaps, ahp.Gap{Path: "execution", Reason: "inferred from a tool result in the next model request"})
	ev.Items = cloneMessages([]ahp.Message{orig})

	st := x.settle(ev, capsToolAfter(), ahp.ExtRedactText)
	if out, done := x.settledRefusalOrStop(ev, st, call.ID, name); done {
		return out, true
	}
	action := enforcement.Forwarded
	if st.Modified && st.Event != nil {
		// modify(output): the result the model sees is the effective output.
		x.ownItems()
		x.items[idx] = toolMessage(orig, st.Event.Items)
		x.changed = true
		action = enforcement.Rewritten
		// The agent re-sends the original with every later request: hold the decision.
		x.noteSettled(r.ItemIndex, 1, x.items[idx:idx+1], ahp.EventToolAfter)
	} else {
		x.noteSettled(r.ItemIndex, 1, nil, ahp.EventToolAfter)
	}
	if x.takeInjections(st, ev.ID, now, state.NextTurn) {
		action = enforcement.Rewritten
	}
	x.audit(ev, st, DeliveryIntercept, action, call.ID, name)
	return requestOutcome{}, false
}

// turnStart builds and settles turn.start over the prompt req.Items[start:end] (the
// trailing prompt, or an earlier one the store does not know), as it stands in the
// effective list.
func (x *lifecycle) turnStart(start, end int, now *[]ahp.Message) (requestOutcome, bool) {
	es, ee := x.rw.at(start), x.rw.at(end)
	if es > ee || ee > len(x.items) {
		return requestOutcome{}, false
	}
	ev := x.newEvent(ahp.EventTurnStart)
	// The same prompt settled again (a retry, or content the store forgot) is the same
	// event: its id is derived from the prompt's messages, so a backend can treat it as a
	// duplicate (AHP-CORE-004).
	ids := make([]string, 0, 4+end-start)
	ids = append(ids, x.s.source, ahp.EventTurnStart, x.session.ID)
	for _, m := range x.req.Items[start:end] {
		ids = append(ids, m.ID)
	}
	ev.ID = derive("evt_", ids...)
	if end < len(x.req.Items) {
		// An earlier prompt: its own turn, as its requests named it.
		turn := turnFor(x.session.ID, x.req.Items[:end])
		ev.Turn = &turn
	}
	ev.Trigger = "user"
	ev.Items = ahp.ShareMessages(x.items[es:ee]) // parts shared: never written in place
	st := x.settle(ev, capsTurnStart(), ahp.ExtRedactText)
	if out, done := x.settledRefusalOrStop(ev, st, "", ""); done {
		return out, true
	}
	action := enforcement.Forwarded
	if st.Modified && st.Event != nil {
		// modify(prompt): the effective prompt replaces the prompt's messages, and is
		// held for the rest of the conversation, keyed by the client's prompt messages.
		effective := cloneMessages(st.Event.Items)
		x.splice(start, end-start, effective)
		action = enforcement.Rewritten
		x.noteSettled(start, end-start, effective, ahp.EventTurnStart)
	} else {
		x.noteSettled(start, end-start, nil, ahp.EventTurnStart)
	}
	if x.takeInjections(st, ev.ID, now, state.NextTurn) {
		action = enforcement.Rewritten
	}
	x.audit(ev, st, DeliveryIntercept, action, "", "")
	return requestOutcome{}, false
}

// modelRequestBefore builds and settles model.request.before over the whole effective
// list and enforces it.
func (x *lifecycle) modelRequestBefore() (requestOutcome, bool) {
	ev := x.newEvent(ahp.EventModelRequestBefore)
	model, attempt := x.model, x.attempt
	ev.Model, ev.Attempt = &model, &attempt
	ev.Params = x.req.Params
	if len(ev.Params) == 0 {
		ev.Params = json.RawMessage(`{}`)
	}
	// The event shares the list (no message of it is written in place after this point,
	// and the chain never writes an event's) and its parts (never written in place).
	ev.Items = x.items[:len(x.items):len(x.items)]
	if ev.Items == nil {
		ev.Items = []ahp.Message{} // the event's list is never absent (an unmapped body has none)
	}
	if n := len(x.req.Gaps) + len(x.modelGaps); n > 0 {
		ev.Gaps = append(append(make([]ahp.Gap, 0, n), x.req.Gaps...), x.modelGaps...)
	}
	caps := capsModelRequest(listHasGaps(x.req.Gaps))
	// hookproxy.redact_text: the list is rendered by patching only the messages that
	// changed, so a policy can take text out of it even where a whole-list replace is
	// withheld (chain/redact_text.go).
	ext := []string{ahp.ExtRedactText}
	if mapping.IsOpaque(x.tr) {
		caps, ext = capsOpaqueRequest(), nil
	}
	st := x.settle(ev, caps, ext...)
	if out, done := x.settledRefusalOrStop(ev, st, "", ""); done {
		return out, true
	}
	if st.Candidate != nil {
		// return: answer with the supplied result; the upstream is not called
		// (here the value is a canonical message list).
		var msgs []ahp.Message
		if err := json.Unmarshal(st.Candidate.Value, &msgs); err != nil {
			x.audit(ev, st, DeliveryIntercept, enforcement.Refused, "", "")
			return requestOutcome{kind: outcomeRefused, err: x.rt.internalError(fmt.Errorf("supplied result: %w", err))}, true
		}
		var discard []ahp.Message
		x.takeInjections(st, ev.ID, &discard, state.NextTurn) // next_turn still applies
		x.audit(ev, st, DeliveryIntercept, enforcement.Supplied, "", "")
		return requestOutcome{kind: outcomeSupplied, supplied: msgs}, true
	}
	action := enforcement.Forwarded
	if x.paramReds = x.paramsRedactions(st); len(x.paramReds) > 0 {
		action = enforcement.Rewritten
	}
	if st.Modified && st.Event != nil {
		// modify(request): the effective list is what the model sees.
		x.items = cloneMessages(st.Event.Items)
		x.changed = true
		action = enforcement.Rewritten
	}
	var now []ahp.Message
	if x.takeInjections(st, ev.ID, &now, state.NextTurn) {
		action = enforcement.Rewritten
	}
	if len(now) > 0 {
		x.items = append(x.items, now...)
		x.changed = true
	}
	if x.rw.applied > 0 && action == enforcement.Forwarded {
		// Remembered rewrites were re-applied: what goes upstream is not the client's
		// body, and this is the one record of the request that can say so.
		action = enforcement.Rewritten
	}
	x.audit(ev, st, DeliveryIntercept, action, "", "")
	return requestOutcome{}, false
}

// ownItems makes the effective list this request's own before a message of it is
// replaced in place: until then it may be the codec's list, which a codec may share with
// other requests (mapping.Request.Items).
func (x *lifecycle) ownItems() {
	if !x.itemsOwned {
		x.items = slices.Clone(x.items)
		x.itemsOwned = true
	}
}

// takeInjections appends a settlement's "now" injections to now and stores its
// next_turn injections under the given delivery kind. It reports whether any was taken.
func (x *lifecycle) takeInjections(st *chain.Settlement, eventID string, now *[]ahp.Message, later state.Deferral) bool {
	if len(st.Injections) == 0 {
		return false
	}
	n, next := x.injections(st, eventID)
	*now = append(*now, n...)
	x.deferInjections(later, next)
	return len(n)+len(next) > 0
}

// toolMessage renders an edited tool output back into the single role-tool message the
// native request has room for: the original message id and role, the effective text
// parts joined, and the original attachments that the effective output kept.
func toolMessage(orig ahp.Message, effective []ahp.Message) ahp.Message {
	if len(effective) == 1 && samePartIDs(orig.Parts, effective[0].Parts) {
		// An edit in place (hookproxy.redact_text, or a replace that kept every part):
		// the parts keep their order, so text beside an image stays where it was.
		m := orig
		m.Parts = slices.Clone(effective[0].Parts)
		return m
	}
	origAttachments := map[string]bool{}
	for _, p := range orig.Parts {
		if p.Kind == ahp.KindAttachment {
			origAttachments[p.ID] = true
		}
	}
	var texts []string
	var attachments []ahp.Part
	for _, m := range effective {
		for _, p := range m.Parts {
			switch {
			case p.Kind == ahp.KindText && p.Text != nil:
				texts = append(texts, *p.Text)
			case p.Kind == ahp.KindAttachment && origAttachments[p.ID]:
				attachments = append(attachments, p)
			}
		}
	}
	partID, category := orig.ID+".0", ahp.CategoryToolResult
	if len(orig.Parts) > 0 && orig.Parts[0].Kind == ahp.KindText {
		partID = orig.Parts[0].ID
		if orig.Parts[0].Category != "" {
			category = orig.Parts[0].Category
		}
	}
	text := ahp.TextPart(partID, strings.Join(texts, "\n"))
	text.Category = category
	return ahp.Message{ID: orig.ID, Role: ahp.RoleTool, Parts: append([]ahp.Part{text}, attachments...),
		Synthesized: orig.Synthesized}
}

// listHasGaps reports whether the message list itself is incomplete (a gap under
// "items"): only then is a whole-list replace withheld. A gap elsewhere (tool
// declarations carried natively) leaves the list whole.
func listHasGaps(gaps []ahp.Gap) bool {
	for _, g := range gaps {
		if g.Path == "items" || strings.HasPrefix(g.Path, "items") {
			return true
		}
	}
	return false
}

// samePartIDs reports whether a and b hold the same parts, by id and kind, in the same order.
func samePartIDs(a, b []ahp.Part) bool {
	return slices.EqualFunc(a, b, func(x, y ahp.Part) bool { return x.ID == y.ID && x.Kind == y.Kind })
}
