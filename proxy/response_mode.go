package proxy

import (
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
)

// responseMode is how a request's lifecycle carries the upstream's answer to the client.
// It is chosen once, when the answer's head arrives (modeFor), from its status, its
// Content-Type, what the request asked for and what the subscriptions select; the
// upstream measurements (telemetry.go) and the response path read the same choice.
type responseMode uint8

const (
	// modeUndecided: no upstream answer yet (or none: a locally answered request).
	modeUndecided responseMode = iota
	// modePassed: the body reaches the client untouched and nothing of it is read.
	modePassed
	// modeTapped: the body reaches the client untouched while a copy is kept for
	// observers: a success body for the response-side observers, the head of an error
	// body for model.error.
	modeTapped
	// modeHeld: the body is read whole, the response-side boundaries settle, and the
	// effective response is sent (response_held.go).
	modeHeld
	// modeStreamedWithHolds: the stream goes to the client as it arrives and each tool
	// call is held until its tool.before settles (stream_edit.go).
	modeStreamedWithHolds
)

// modeFacts are, per mode, its name, its label in the stream metrics, and what the audit
// record says was held of the response (BoundaryRecord.Held).
var modeFacts = [...]struct {
	name   string
	stream enforcement.StreamMode
	held   enforcement.Held
}{
	// No upstream answer: a JSON answer, or a supplied one, is decided before it is sent.
	modeUndecided:         {"undecided", enforcement.StreamPassthrough, enforcement.HeldWhole},
	modePassed:            {"passed", enforcement.StreamPassthrough, enforcement.HeldWhole},
	modeTapped:            {"tapped", enforcement.StreamPassthrough, enforcement.HeldNone},
	modeHeld:              {"held", enforcement.StreamHeld, enforcement.HeldWhole},
	modeStreamedWithHolds: {"streamed-with-holds", enforcement.StreamToolCalls, enforcement.HeldToolCalls},
}

func (m responseMode) String() string { return modeFacts[m].name }

// streamMode is the mode's label in the stream metrics.
func (m responseMode) streamMode() enforcement.StreamMode { return modeFacts[m].stream }

// heldAs is what the audit record says was held of the response.
func (m responseMode) heldAs() enforcement.Held { return modeFacts[m].held }

// modeFor chooses the response mode of the upstream answer resp, once: the first caller
// (the metered transport, or the reverse proxy's ModifyResponse) decides, later callers
// read the choice. Both run in the goroutine that forwards the request.
func (x *lifecycle) modeFor(resp *http.Response) responseMode {
	if x.mode == modeUndecided {
		x.mode = x.chooseMode(resp.StatusCode, isEventStream(resp.Header.Get("Content-Type")))
		if x.s.log.Core().Enabled(zapcore.DebugLevel) {
			x.s.logAt(x.ctx, zapcore.DebugLevel, "response mode chosen", zap.String("route", x.rt.prefix),
				zap.Int("status", resp.StatusCode), zap.Stringer("mode", x.mode))
		}
	}
	return x.mode
}

func (x *lifecycle) chooseMode(status int, streaming bool) responseMode {
	if status < 200 || status > 299 {
		// Upstream errors reach the client unchanged; their head is kept for model.error.
		if x.subs.any(ahp.EventModelError) {
			return modeTapped
		}
		return modePassed
	}
	switch {
	case x.holdsResponse():
		if _, ok := x.editsStream(streaming); ok && !x.mislabelled(streaming) {
			return modeStreamedWithHolds
		}
		return modeHeld
	case x.observesResponse() || streaming && x.subs.any(ahp.EventModelError):
		return modeTapped
	}
	return modePassed
}

// mislabelled reports whether the answer's Content-Type disagrees with what the request
// asked for. The SDKs parse an answer as the request asked (a stream or not), whatever
// its Content-Type; other clients go by the Content-Type. When the two disagree the body
// is held whole and judged as what it is (holdResponse).
func (x *lifecycle) mislabelled(streaming bool) bool {
	return x.req != nil && streaming != x.req.Stream
}

// readsResponse reports whether any subscription needs the response content.
func (x *lifecycle) readsResponse() bool {
	for _, t := range [...]string{ahp.EventModelResponseAfter, ahp.EventToolBefore,
		ahp.EventTurnFinishBefore, ahp.EventTurnEnd, ahp.EventModelError} {
		if x.subs.any(t) {
			return true
		}
	}
	return false
}

// holdsResponse reports whether the response must be held until its chains settle
// (a tool call must be decided before the harness sees it).
func (x *lifecycle) holdsResponse() bool {
	return x.subs.intercepted(ahp.EventModelResponseAfter) || x.subs.intercepted(ahp.EventToolBefore) ||
		x.subs.intercepted(ahp.EventTurnFinishBefore)
}

// editsStream reports whether a streamed response is enforced incrementally: when
// tool.before is the only response-side boundary that intercepts, a stream is not held
// whole (model.response.after and turn.finish.before interceptors can modify or deny the
// whole response, so they hold it whole).
func (x *lifecycle) editsStream(streaming bool) (mapping.StreamEditing, bool) {
	if !streaming || x.subs.intercepted(ahp.EventModelResponseAfter) || x.subs.intercepted(ahp.EventTurnFinishBefore) {
		return nil, false
	}
	se, ok := x.tr.(mapping.StreamEditing)
	return se, ok
}

// onlyCallsMatter reports whether tool.before is the only response-side event a
// subscription selects, so that a response without a tool call builds no event at all
// (hosted tools are reported as tool.after, a final answer as turn.finish.before and
// turn.end).
func (x *lifecycle) onlyCallsMatter() bool {
	return !x.subs.any(ahp.EventModelResponseAfter) && !x.subs.any(ahp.EventTurnFinishBefore) &&
		!x.subs.any(ahp.EventTurnEnd) && !x.subs.any(ahp.EventToolAfter)
}

// observesResponse reports whether a streamed-through response must be tapped for
// observers.
func (x *lifecycle) observesResponse() bool {
	return x.subs.any(ahp.EventModelResponseAfter) || x.subs.any(ahp.EventToolBefore) ||
		x.subs.any(ahp.EventTurnFinishBefore) || x.subs.any(ahp.EventTurnEnd) ||
		x.subs.any(ahp.EventToolAfter) // the provider's hosted tools are reported as tool.after
}
