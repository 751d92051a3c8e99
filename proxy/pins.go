package proxy

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/pinning"
)

// Tool-definition pinning on both kinds of route (package pinning decides; these files
// apply its verdicts to the native bodies): MCP tools/list results (mcp_pins.go) and the
// tools of model requests (model_pins.go). What changed is reported once per new
// definition: an audit record and metric through the Auditor (EventType
// ahp.EventToolDefinitions, ToolDefinitions set), and the extension event to the
// backends that subscribed to it by name.

// codeToolDefinition is the denial code of a call refused because its tool's definition
// is not the pinned one (or is poisoned) under onChange/onPoison deny.
const codeToolDefinition = "hookproxy.tool_definition"

// pinsBackendID names pinning as the refusing party in denials and audit records.
const pinsBackendID = "hookproxy.pinning"

// pinEnv is what a route's pinning needs.
type pinEnv struct {
	pinner  *pinning.Pinner
	chain   *chain.Chain
	auditor Auditor
	log     *zap.Logger
	source  string
}

// report hands the changes that are not repeats to the auditor and to the observers of
// the extension event.
func (p *pinEnv) report(ctx context.Context, route, api, scope string, session *ahp.Session, changes []pinning.Change) {
	var fresh []ahp.ToolDefinitionChange
	for _, c := range changes {
		if c.Repeat {
			continue
		}
		fresh = append(fresh, ahp.ToolDefinitionChange{Tool: c.Tool, Kind: c.Kind, Like: c.Like, Digest: c.Digest,
			Pinned: c.Pinned, Poison: c.Poison, Action: c.Action})
		p.log.Warn("tool definition differs from its pin", zap.String("route", route), zap.String("scope", scope),
			zap.String("tool", c.Tool), zap.String("kind", c.Kind), zap.String("action", c.Action))
	}
	if len(fresh) == 0 {
		return
	}
	rep, _ := json.Marshal(ahp.ToolDefinitionReport{Route: route, API: api, Scope: scope, Changes: fresh})
	ev := &ahp.Event{ID: ahp.NewEventID(), Source: p.source, Type: ahp.EventToolDefinitions, Time: eventTime(),
		Session: session, Extensions: map[string]json.RawMessage{ahp.ExtToolDefinitions: rep}}
	if p.chain != nil {
		if _, ob := p.chain.Subscribed(ahp.EventToolDefinitions); ob {
			// Observation is owned by the request, like every other: delivered before the
			// request completes, bounded by the observe timeout.
			p.chain.Observe(ctx, ev)
		}
	}
	if p.auditor != nil {
		rec := BoundaryRecord{Time: time.Now().UTC(), Route: route, API: api, EventID: ev.ID,
			EventType: ahp.EventToolDefinitions, Delivery: DeliveryObserve, Enforcement: enforcement.Forwarded,
			Permission: ahp.PermissionNone, Flow: ahp.FlowNone, Event: ev, ToolDefinitions: fresh}
		if session != nil {
			rec.SessionID = session.ID
		}
		p.auditor.OnBoundary(ctx, rec)
	}
}

// pinCheckKey carries a model request's pin scope to its tool.before settlements.
type pinCheckKey struct{}

type pinCheck struct {
	env   *pinEnv
	scope string
}

func withPinCheck(ctx context.Context, c *pinCheck) context.Context {
	return context.WithValue(ctx, pinCheckKey{}, c)
}

// pinSettlement is the settlement of a tool.before whose tool pinning blocks, or nil when
// pinning has nothing to say. Refused (onChange deny or strip, onPoison deny or strip):
// decided before any interceptor is called, the call is refused whatever a backend would
// say, like a deny early in the chain. Asked (onChange ask): the chain settles as usual,
// and unless it refused or stopped the call, the call waits for a person's approval
// (permission ask, with pinning's reason for the person deciding).
func pinSettlement(ctx context.Context, ch *chain.Chain, ev *ahp.Event, caps ahp.Capabilities, ext ...string) *chain.Settlement {
	c, _ := ctx.Value(pinCheckKey{}).(*pinCheck)
	if c == nil || ev == nil || ev.Type != ahp.EventToolBefore || ev.Tool == nil {
		return nil
	}
	reason, ask, err := c.env.pinner.CallVerdict(ctx, c.scope, ev.Tool.Name)
	if err != nil {
		c.env.log.Warn("pinning: the pins could not be read; the call is judged without them", zap.String("error", safeError(err)))
		return nil
	}
	switch {
	case reason == "":
		return nil
	case !ask:
		return &chain.Settlement{Event: ev, Permission: ahp.PermissionDeny, Flow: ahp.FlowNone,
			Denial: &chain.Denial{Reason: reason, Code: codeToolDefinition, BackendID: pinsBackendID}}
	}
	var st *chain.Settlement
	if ch != nil {
		st = ch.Intercept(ctx, ev, caps, ext...)
	}
	st = settledOrNone(st, ev)
	if st.Refused() || st.Stopped() {
		return st
	}
	st.Permission = ahp.PermissionAsk
	b, _ := json.Marshal(map[string]string{"reason": reason})
	st.Extensions = append(st.Extensions, chain.ReplyExtension{BackendID: pinsBackendID, Key: ExtAskReason, Value: b})
	return st
}
