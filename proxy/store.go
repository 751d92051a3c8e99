package proxy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/state"
)

// The proxy's side of the conversation state (package state): which scope a request
// belongs to, and what a request does when the store fails. A failure is never a silent
// pass: it is counted (StoreMetrics), logged once per outage (StoreHealth), and then
// either everything the request carries is treated as unknown and settled again
// (state.onStoreFailure re-settle, the default; see rewrites.go for why that is safe), or
// the request is refused (fail-closed).

// StoreMetrics is the optional Metrics capability that counts store failures.
type StoreMetrics interface {
	// StoreFailure counts one failed store operation (op: load, record, defer) handled
	// under mode (re-settle or fail-closed).
	StoreFailure(op, mode string)
}

// StoreHealth tracks whether the state store is in an outage, so that an outage is
// logged once when it starts and once when it ends, not once per request. Share one
// across the servers of consecutive configuration generations.
type StoreHealth struct{ down atomic.Bool }

// Down reports whether the last store operation failed.
func (h *StoreHealth) Down() bool { return h.down.Load() }

// Store operations, as counted and logged.
const (
	storeOpLoad   = "load"
	storeOpRecord = "record"
	storeOpDefer  = "defer"
)

// scope is the lifecycle's state scope: its session under its tenant (the client's
// credential hash), so that two tenants whose synthesized session ids collide (same
// opening prompt) never receive each other's state.
func (x *lifecycle) scope() state.Scope {
	return state.Scope{Tenant: x.principal, Session: x.session.ID}
}

// failClosed reports whether a store failure refuses the request.
func (s *Server) failClosed() bool { return s.cfg.State.OnStoreFailure == config.StateFailClosed }

// storeFailed counts and (once per outage) logs a failed store operation.
func (s *Server) storeFailed(ctx context.Context, op string, err error) {
	mode := s.cfg.State.OnStoreFailure
	if mode == "" {
		mode = config.StateReSettle
	}
	if m, ok := s.metrics.(StoreMetrics); ok {
		m.StoreFailure(op, mode)
	}
	if s.health.down.CompareAndSwap(false, true) {
		what := "every tool result and prompt is settled again until it returns"
		if mode == config.StateFailClosed {
			what = "requests are refused until it returns"
		}
		s.logAt(ctx, zapcore.ErrorLevel, "state store unavailable: "+what,
			zap.String("op", op), zap.String("onStoreFailure", mode), zap.Error(err))
	}
}

// storeOK ends an outage.
func (s *Server) storeOK(ctx context.Context) {
	if s.health.down.Load() && s.health.down.CompareAndSwap(true, false) {
		s.logAt(ctx, zapcore.InfoLevel, "state store available again")
	}
}

// storeUnavailable is the fail-closed refusal: 503 in the provider's error format.
func (rt *route) storeUnavailable() *httpError {
	return &httpError{status: http.StatusServiceUnavailable, body: rt.errorBody(http.StatusServiceUnavailable,
		mapping.UpstreamFailureType(rt.provider()), "hookproxy.state_unavailable",
		"hookproxy cannot reach its conversation state store; retry later")}
}

// loadState reads the records of the conversation and takes its deferred injections, in
// one store round trip. When the store fails, the request either goes on with an empty
// snapshot (re-settle: everything is unknown, so every hook runs again) or is refused.
// A non-nil outcome ends the request.
func (x *lifecycle) loadState(take ...state.Deferral) (state.Snapshot, *requestOutcome) {
	// Records are keyed by the id of the first message they cover: only the request's own
	// messages can have one that matters.
	buf := idLists.Get().(*[]string)
	ids := slices.Grow((*buf)[:0], len(x.req.Items)+len(x.req.ToolResults))
	for i := range x.req.Items {
		ids = append(ids, x.req.Items[i].ID)
	}
	defer func() {
		// A store keeps nothing of ids (state.Store.Load): the list serves the next
		// request, emptied so that it keeps no id alive.
		clear(ids)
		*buf = ids[:0]
		idLists.Put(buf)
	}()
	// And the links of the tool.before ids its new tool results (those after the last
	// assistant message) will name as parents. Older results are settled again only when
	// forgotten, and then the link is likely gone too: their ids are not hashed on every
	// request of a long conversation.
	var links []string
	if x.subs.any(ahp.EventToolAfter) && x.subs.any(ahp.EventToolBefore) {
		last := lastRole(x.req.Items, ahp.RoleAssistant)
		for _, r := range x.req.ToolResults {
			if r.ItemIndex > last && r.CallFound && r.CallID != "" {
				id := toolEventID(x.s.source, ahp.EventToolBefore, x.session.ID, mapping.ToolCall{ID: r.CallID, Name: r.ToolName, Input: r.Input})
				links = append(links, id)
				ids = append(ids, state.LinkID(id))
			}
		}
	}
	snap, err := x.s.state.Load(x.ctx, x.scope(), ids, take...)
	if err != nil {
		if x.ctx.Err() != nil {
			return state.Snapshot{}, &requestOutcome{kind: outcomeInterrupted}
		}
		x.s.storeFailed(x.ctx, storeOpLoad, err)
		if x.s.failClosed() {
			return state.Snapshot{}, &requestOutcome{kind: outcomeRefused, err: x.rt.storeUnavailable()}
		}
		return state.Snapshot{}, nil
	}
	x.s.storeOK(x.ctx)
	if len(links) > 0 && slices.ContainsFunc(snap.Records, isLinkRecord) {
		// The store's list is read-only (it may be shared): the link records are
		// filtered into a copy.
		recs := make([]state.Record, 0, len(snap.Records))
		for _, r := range snap.Records {
			if isLinkRecord(r) {
				if x.parents == nil {
					x.parents = make(map[string]string, len(links))
				}
				x.parents[strings.TrimPrefix(r.ID, state.LinkID(""))] = r.Parent
				continue
			}
			recs = append(recs, r)
		}
		snap.Records = recs
	}
	return snap, nil
}

// idLists are the id lists loadState hands the store, one per request in flight: a list
// the length of the history, which would otherwise be allocated on every request.
var idLists = sync.Pool{New: func() any { return new([]string) }}

// isLinkRecord reports whether r is a link record (state.Record.Parent).
func isLinkRecord(r state.Record) bool { return r.Parent != "" && r.Count == 0 }

// parentOf is the event id a derived tool.before id stands for: the id itself, or the
// original tool.before when a hook rewrote that call's input (links).
func (x *lifecycle) parentOf(derived string) string {
	if p, ok := x.parents[derived]; ok {
		return p
	}
	return derived
}

// recordLink records that the tool.before id derived from a call as the agent will send
// it back stands for event id parent. Losing it (an outage, an eviction) costs only the
// parent link of that call's tool.after.
func (x *lifecycle) recordLink(derived, parent string) {
	if derived == parent {
		return
	}
	rec := state.Record{ID: state.LinkID(derived), Event: ahp.EventToolBefore, Parent: parent}
	if err := x.s.state.Record(context.WithoutCancel(x.ctx), x.scope(), []state.Record{rec}); err != nil && !errors.Is(err, state.ErrTooLarge) {
		x.s.storeFailed(x.ctx, storeOpRecord, err)
	}
}

// deferInjections queues msgs for a later model call of the conversation. A failure is
// counted and logged: the injection is lost (never delivered twice), which is what an
// outage of the store can cost.
func (x *lifecycle) deferInjections(kind state.Deferral, msgs []ahp.Message) {
	if len(msgs) == 0 {
		return
	}
	// A deferral outlives the client's request: it is written even if the client left.
	err := x.s.state.Defer(context.WithoutCancel(x.ctx), x.scope(), kind, msgs)
	switch {
	case err == nil:
		x.s.storeOK(x.ctx)
	case errors.Is(err, state.ErrTooLarge):
		x.s.logAt(x.ctx, zapcore.WarnLevel, "deferred injection too large for the state store; not delivered", zap.String("deliverAt", string(kind)))
	default:
		x.s.storeFailed(x.ctx, storeOpDefer, err)
	}
}
