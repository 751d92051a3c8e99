package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// Request side of a model boundary (DESIGN §2, SPEC-DIGEST §15.3 A): tool.after for each
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

func (x *exchange) requestSide() requestOutcome {
	// Deferred injections are taken before this request's boundaries run, so that a
	// next_turn effect accepted now is not delivered in this same request: "now" effects
	// accepted at the previous response's tool.before belong to this model call, next_turn
	// effects to the first call of a new prompt.
	if x.requestOnly {
		return x.requestOnlySide()
	}
	ps := x.req.PromptStart
	deliveries := x.s.store.Take(x.storeKey(deliverNextCall))
	var turnDeliveries []ahp.Message
	if ps >= 0 {
		turnDeliveries = x.s.store.Take(x.storeKey(deliverNextTurn))
	}
	// Rewrites settled at earlier requests of the conversation hold again before any
	// boundary sees the list (rewrites.go).
	x.recallRewrites()
	out := x.requestBoundaries(ps, append(deliveries, turnDeliveries...))
	x.commitRewrites(out.kind)
	if out.kind != outcomeForward && out.kind != outcomeSupplied {
		// Refused, stopped or interrupted: the model did not get them; keep them pending.
		x.s.store.Put(x.storeKey(deliverNextCall), deliveries)
		x.s.store.Put(x.storeKey(deliverNextTurn), turnDeliveries)
	}
	return out
}

// requestOnlySide settles a request-only endpoint (count_tokens, embeddings, legacy
// completions): rewrites settled earlier in the
// conversation are put back (a redacted tool result stays redacted), then
// model.request.before runs over the prompt. Injections waiting for the next model call
// stay waiting, and nothing this request settles is remembered: it is not a model call.
// A policy that answers or stops it refuses it (there is no answer to supply).
func (x *exchange) requestOnlySide() requestOutcome {
	x.recallRewrites()
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

func (x *exchange) requestBoundaries(ps int, deliveries []ahp.Message) requestOutcome {
	var now []ahp.Message // "now" injections, appended before model.request.before

	// (a) tool.after — one per tool result the model has not seen yet.
	if x.subs.any(ahp.EventToolAfter) {
		for _, tr := range newToolResults(x.req) {
			if x.rw.isSettled(tr.ItemIndex) {
				continue // a retried request: decided before, its rewrite re-applied
			}
			if out, done := x.toolAfter(tr, &now); done {
				return out
			}
		}
	}

	// (b) turn.start — the request ends with a new user prompt (not one whose turn.start
	// was settled and remembered already: a retried request).
	if ps >= 0 && x.subs.any(ahp.EventTurnStart) && !x.rw.settledFrom(ps, len(x.req.Items)) {
		if eps := x.rw.at(ps); eps <= len(x.items) {
			if out, done := x.turnStart(eps, &now); done {
				return out
			}
		}
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

// newToolResults returns the tool results the model has not answered yet: those after
// the last assistant message. Earlier results were resolved by an earlier request of the
// loop; a tool.after is emitted once per resolved call (SPEC-DIGEST §3.2, §15.3 A.2).
func newToolResults(req *mapping.Request) []mapping.ToolResult {
	last := -1
	for i := len(req.Items) - 1; i >= 0; i-- {
		if req.Items[i].Role == ahp.RoleAssistant {
			last = i
			break
		}
	}
	var out []mapping.ToolResult
	for _, tr := range req.ToolResults {
		if tr.ItemIndex > last && tr.ItemIndex < len(req.Items) {
			out = append(out, tr)
		}
	}
	return out
}

// settledRefusalOrStop enforces the outcomes shared by every request-side boundary:
// interruption, denial (explicit or fail-closed) and flow stop.
func (x *exchange) settledRefusalOrStop(ev *ahp.Event, st *chain.Settlement, callID, tool string) (requestOutcome, bool) {
	switch {
	case st.Interrupted || x.ctx.Err() != nil:
		x.audit(ev, st, DeliveryIntercept, EnforceRefused, callID, tool)
		return requestOutcome{kind: outcomeInterrupted}, true
	case st.Refused(): // SPEC-DIGEST §8.4: do not execute; report the denial
		x.audit(ev, st, DeliveryIntercept, EnforceRefused, callID, tool)
		return requestOutcome{kind: outcomeRefused, err: x.rt.refusal(st.Denial)}, true
	case st.Stopped(): // §8.4: no further model work
		x.audit(ev, st, DeliveryIntercept, EnforceStopped, callID, tool)
		return requestOutcome{kind: outcomeStopped, stopReason: st.StopReason}, true
	}
	return requestOutcome{}, false
}

// toolAfter builds and settles the tool.after of one tool result (SPEC-DIGEST §15.3 A.2).
func (x *exchange) toolAfter(r mapping.ToolResult, now *[]ahp.Message) (requestOutcome, bool) {
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
		ev.ParentEventID = toolEventID(x.s.source, ahp.EventToolBefore, x.session.ID, asCall)
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

	st := x.settle(ev, capsToolAfter())
	if out, done := x.settledRefusalOrStop(ev, st, call.ID, name); done {
		return out, true
	}
	enforcement := EnforceForwarded
	if st.Modified && st.Event != nil {
		// modify(output): the result the model sees is the effective output.
		x.items[idx] = toolMessage(orig, st.Event.Items)
		x.changed = true
		enforcement = EnforceRewritten
		// The agent re-sends the original with every later request: hold the decision.
		x.noteRewrite(r.ItemIndex, 1, x.items[idx:idx+1], ahp.EventToolAfter)
	}
	if x.takeInjections(st, ev.ID, now, deliverNextTurn) {
		enforcement = EnforceRewritten
	}
	x.audit(ev, st, DeliveryIntercept, enforcement, call.ID, name)
	return requestOutcome{}, false
}

// turnStart builds and settles turn.start over the trailing prompt (items[ps:], ps an
// index of the effective list).
func (x *exchange) turnStart(ps int, now *[]ahp.Message) (requestOutcome, bool) {
	ev := x.newEvent(ahp.EventTurnStart)
	ev.Trigger = "user"
	ev.Items = shareMessages(x.items[ps:])
	st := x.settle(ev, capsTurnStart())
	if out, done := x.settledRefusalOrStop(ev, st, "", ""); done {
		return out, true
	}
	enforcement := EnforceForwarded
	if st.Modified && st.Event != nil {
		// modify(prompt): the effective prompt replaces the trailing prompt messages.
		x.items = append(x.items[:ps:ps], cloneMessages(st.Event.Items)...)
		x.changed = true
		enforcement = EnforceRewritten
		// Held for the rest of the conversation, keyed by the client's prompt messages.
		if ops := x.req.PromptStart; ops >= 0 {
			x.noteRewrite(ops, len(x.req.Items)-ops, x.items[ps:], ahp.EventTurnStart)
		}
	}
	if x.takeInjections(st, ev.ID, now, deliverNextTurn) {
		enforcement = EnforceRewritten
	}
	x.audit(ev, st, DeliveryIntercept, enforcement, "", "")
	return requestOutcome{}, false
}

// modelRequestBefore builds and settles model.request.before over the whole effective
// list and enforces it (SPEC-DIGEST §15.3 A.3).
func (x *exchange) modelRequestBefore() (requestOutcome, bool) {
	ev := x.newEvent(ahp.EventModelRequestBefore)
	model, attempt := x.model, x.attempt
	ev.Model, ev.Attempt = &model, &attempt
	ev.Params = x.req.Params
	if len(ev.Params) == 0 {
		ev.Params = json.RawMessage(`{}`)
	}
	ev.Items = shareMessages(x.items)
	if n := len(x.req.Gaps) + len(x.modelGaps); n > 0 {
		ev.Gaps = append(append(make([]ahp.Gap, 0, n), x.req.Gaps...), x.modelGaps...)
	}
	caps := capsModelRequest(listHasGaps(x.req.Gaps))
	if mapping.IsOpaque(x.tr) {
		caps = capsOpaqueRequest()
	}
	st := x.settle(ev, caps)
	if out, done := x.settledRefusalOrStop(ev, st, "", ""); done {
		return out, true
	}
	if st.Candidate != nil {
		// return: answer with the supplied result; the upstream is not called
		// (SPEC-DIGEST §5.5: the value is a canonical message list).
		var msgs []ahp.Message
		if err := json.Unmarshal(st.Candidate.Value, &msgs); err != nil {
			x.audit(ev, st, DeliveryIntercept, EnforceRefused, "", "")
			return requestOutcome{kind: outcomeRefused, err: x.rt.internalError(fmt.Errorf("supplied result: %w", err))}, true
		}
		var discard []ahp.Message
		x.takeInjections(st, ev.ID, &discard, deliverNextTurn) // next_turn still applies
		x.audit(ev, st, DeliveryIntercept, EnforceSupplied, "", "")
		return requestOutcome{kind: outcomeSupplied, supplied: msgs}, true
	}
	enforcement := EnforceForwarded
	if x.paramReds = x.paramsRedactions(st); len(x.paramReds) > 0 {
		enforcement = EnforceRewritten
	}
	if st.Modified && st.Event != nil {
		// modify(request): the effective list is what the model sees.
		x.items = cloneMessages(st.Event.Items)
		x.changed = true
		enforcement = EnforceRewritten
	}
	var now []ahp.Message
	if x.takeInjections(st, ev.ID, &now, deliverNextTurn) {
		enforcement = EnforceRewritten
	}
	if len(now) > 0 {
		x.items = append(x.items, now...)
		x.changed = true
	}
	if x.rw.applied > 0 && enforcement == EnforceForwarded {
		// Remembered rewrites were re-applied: what goes upstream is not the client's
		// body, and this is the one record of the request that can say so.
		enforcement = EnforceRewritten
	}
	x.audit(ev, st, DeliveryIntercept, enforcement, "", "")
	return requestOutcome{}, false
}

// takeInjections appends a settlement's "now" injections to now and stores its
// next_turn injections under the given delivery kind. It reports whether any was taken.
func (x *exchange) takeInjections(st *chain.Settlement, eventID string, now *[]ahp.Message, later string) bool {
	if len(st.Injections) == 0 {
		return false
	}
	n, next := x.injections(st, eventID)
	*now = append(*now, n...)
	if len(next) > 0 {
		x.s.store.Put(x.storeKey(later), next)
	}
	return len(n)+len(next) > 0
}

// toolMessage renders an edited tool output back into the single role-tool message the
// native request has room for: the original message id and role, the effective text
// parts joined, and the original attachments that the effective output kept.
func toolMessage(orig ahp.Message, effective []ahp.Message) ahp.Message {
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
