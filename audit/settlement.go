package audit

import (
	"time"

	"github.com/hookproxy/hookproxy/chain"
)

// FromSettlement fills the decision part of a Record from a settled boundary: the event's
// identity and correlation ids, one Interceptor per chain.Record, the settled permission
// and flow, the denial, and the effective content (kept only if the Writer is configured
// to include content). The caller adds what only it knows: Route and Enforcement. Time is
// stamped by Write when left zero.
//
// Keeping this conversion here means the proxy never maps audit fields by hand, so a new
// chain field is added to the log in one place.
func FromSettlement(s *chain.Settlement) Record {
	rec := Record{Interceptors: []Interceptor{}}
	if s == nil {
		return rec
	}
	if ev := s.Event; ev != nil {
		rec.EventID = Text(ev.ID)
		rec.EventType = EventType(ev.Type)
		if ev.Session != nil {
			rec.SessionID = Text(ev.Session.ID)
		}
		if ev.Turn != nil {
			rec.TurnID = Text(ev.Turn.ID)
		}
		if ev.Call != nil {
			rec.CallID = Text(ev.Call.ID)
		}
		if ev.Model != nil {
			rec.Model = Text(ev.Model.ID)
		}
		var content Content
		content.Items = ev.Items
		if ev.Tool != nil {
			rec.Tool = Text(ev.Tool.Name)
			content.ToolInput = ev.Tool.Input
		}
		if len(content.Items) > 0 || len(content.ToolInput) > 0 {
			rec.Content = &content
		}
	}
	rec.Interceptors = Interceptors(s.Records)
	rec.Permission = Permission(s.Permission)
	rec.Flow = Flow(s.Flow)
	rec.Denial = DenialOf(s.Denial)
	return rec
}

// Interceptors converts the chain's per-subscription records. The chain's local
// diagnostic text (Record.Detail) is deliberately not carried: it may quote backend
// output, and the failure kind already says what went wrong.
func Interceptors(recs []chain.Record) []Interceptor {
	out := make([]Interceptor, 0, len(recs))
	for _, r := range recs {
		effects := make([]EffectType, len(r.Effects))
		for i, e := range r.Effects {
			effects[i] = EffectType(e)
		}
		out = append(out, Interceptor{
			BackendID:       Text(r.BackendID),
			Subscription:    r.Subscription,
			LatencyMs:       Millis(r.Latency),
			Outcome:         r.Outcome,
			Effects:         effects,
			FailureKind:     r.FailureKind,
			Violation:       r.Violation,
			OffendingEffect: EffectType(r.OffendingEffect),
			FailurePolicy:   FailurePolicy(r.Policy),
		})
	}
	return out
}

// DenialOf converts a chain denial; nil stays nil.
func DenialOf(d *chain.Denial) *Denial {
	if d == nil {
		return nil
	}
	return &Denial{Reason: Text(d.Reason), Code: Text(d.Code), BackendID: Text(d.BackendID), Synthetic: d.Synthetic}
}

// Millis renders a duration as milliseconds with microsecond precision.
func Millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
