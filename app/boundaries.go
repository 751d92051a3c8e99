package app

import (
	"context"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/metrics"
	"github.com/hookproxy/hookproxy/proxy"
)

// AuditRecord converts a settled boundary as the proxy enforced it into an audit record.
// The decision part goes through audit.FromSettlement, so the chain-to-audit mapping
// stays in one place; the identity and enforcement come from the proxy's record, which
// says what really happened to the traffic.
func AuditRecord(rec proxy.BoundaryRecord) audit.Record {
	out := audit.FromSettlement(&chain.Settlement{
		Event:      rec.Event,
		Permission: rec.Permission,
		Flow:       rec.Flow,
		Denial:     rec.Denial,
		Records:    rec.Records,
	})
	out.Time = rec.Time
	out.EventID = audit.Text(rec.EventID)
	out.EventType = audit.EventType(rec.EventType)
	out.Route = audit.Text(rec.Route)
	out.SessionID = audit.Text(rec.SessionID)
	out.TurnID = audit.Text(rec.TurnID)
	out.CallID = audit.Text(rec.CallID)
	out.Model = audit.Text(rec.Model)
	out.Tool = audit.Text(rec.ToolName)
	out.Enforcement = rec.Enforcement
	out.Reapplied = rec.Reapplied
	out.Resettled = rec.Resettled
	out.Held = rec.Held
	if a := rec.Approval; a != nil {
		out.Approval = &audit.Approval{ID: audit.Text(a.ID), Decision: audit.Text(a.Decision), By: audit.Text(a.By), WaitedMs: a.WaitedMs}
	}
	out.ToolDefinitions = rec.ToolDefinitions
	return out
}

// Boundaries is the proxy's Auditor in a running server: every settled boundary becomes
// an audit line, boundary and interceptor metrics, and request-scoped log lines.
type Boundaries struct {
	Audit   *audit.Writer    // nil or disabled: no audit log
	Metrics *metrics.Metrics // nil: no metrics
	Log     *zap.Logger
	// Decisions, when set, is told of every boundary last (the demo's decision printer).
	Decisions proxy.Auditor
	// Console, when set, keeps the console's window of recent decisions (ConsoleDecision);
	// Transports names each backend's transport there (nil: none named).
	Console    *admin.Window
	Transports *chain.Chain
}

var (
	_ proxy.Auditor = (*Boundaries)(nil)
	_ proxy.Metrics = (*metrics.Metrics)(nil) // what Runtime passes as proxy.Options.Metrics
)

// OnBoundary implements proxy.Auditor. It runs on the request path: the audit write is
// bounded by the writer's queue policy, everything else is in-memory.
func (b *Boundaries) OnBoundary(ctx context.Context, rec proxy.BoundaryRecord) {
	if b.Audit.Enabled() {
		// Not ctx: a client that hangs up must not cost the audit line of a decision
		// already enforced. The writer bounds the wait itself (audit.waitTimeout); a loss
		// is counted and logged there.
		_ = b.Audit.Write(context.Background(), AuditRecord(rec))
	}
	if b.Console != nil {
		b.Console.Add(ConsoleDecision(proxy.RequestID(ctx), rec, b.Transports))
	}
	if b.Decisions != nil {
		defer b.Decisions.OnBoundary(ctx, rec)
	}
	if rec.EventType == ahp.EventToolDefinitions {
		for _, c := range rec.ToolDefinitions {
			b.Metrics.ObserveToolDefinitionChange(c.Kind)
		}
		return // no boundary was settled
	}
	b.Metrics.ObserveBoundary(rec.EventType, rec.Enforcement)
	for i := range rec.Records {
		r := &rec.Records[i]
		switch r.Outcome {
		case chain.OutcomeNotCalled, chain.OutcomeObserved:
			continue // no interceptor call was made for this record at decision time
		}
		b.Metrics.ObserveInterceptor(r.BackendID, r.Latency, r.FailureKind)
		if r.Violation != "" {
			b.Metrics.ObserveInvalidReply(r.BackendID, r.Violation, r.OffendingEffect)
		}
		if r.Outcome == chain.OutcomeFailed && b.Log != nil {
			// One line per failed call, here only (the chain logs it at debug). A refused
			// reply says which rule it broke and which effect type was to blame; the
			// offending effect's type is the draft's vocabulary or "unknown", never the
			// backend's own text.
			msg := "interceptor call failed"
			fields := []zap.Field{
				zap.String("requestId", proxy.RequestID(ctx)), zap.String("eventId", rec.EventID),
				zap.String("event", rec.EventType), zap.String("route", rec.Route),
				zap.String("backend", r.BackendID), zap.Int("subscription", r.Subscription),
				zap.String("kind", string(r.FailureKind)), zap.String("policy", r.Policy),
				zap.Duration("latency", r.Latency),
			}
			if r.Violation != "" {
				msg = "interceptor reply refused: protocol violation by the backend"
				eff, _ := audit.EffectType(r.OffendingEffect).MarshalText()
				fields = append(fields, zap.String("violation", string(r.Violation)))
				if r.OffendingEffect != "" {
					fields = append(fields, zap.ByteString("offendingEffect", eff))
				}
			}
			b.Log.Warn(msg, fields...)
		}
	}
	if b.Log == nil {
		return
	}
	lvl := zap.DebugLevel
	if rec.Enforcement == enforcement.Refused || rec.Enforcement == enforcement.Stopped {
		lvl = zap.InfoLevel // what was refused is what a security team asks about first
	}
	if ce := b.Log.Check(lvl, "boundary settled"); ce != nil {
		fields := []zap.Field{
			zap.String("requestId", proxy.RequestID(ctx)), zap.String("eventId", rec.EventID),
			zap.String("event", rec.EventType), zap.String("route", rec.Route),
			zap.String("enforcement", string(rec.Enforcement)), zap.String("permission", rec.Permission),
			zap.String("flow", rec.Flow),
		}
		if rec.ToolName != "" {
			fields = append(fields, zap.String("tool", rec.ToolName), zap.String("callId", rec.CallID))
		}
		if d := rec.Denial; d != nil {
			// The code and backend, not the reason: reasons are backend-authored free text
			// and belong in the (scrubbed) audit log.
			fields = append(fields, zap.String("denialCode", d.Code), zap.String("denialBackend", d.BackendID),
				zap.Bool("failClosed", d.Synthetic))
		}
		ce.Write(fields...)
	}
}
