package shadow

import (
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/policies"
)

// TestOnSettledWithoutAudit: each shadow settlement reaches OnSettled (the console's
// window) with the live outcome, with no audit log configured: a model the shadow's
// policy refuses is a disagreement with its diff and the shadow's denial; an allowed one
// (the control) is told too, agreeing.
func TestOnSettledWithoutAudit(t *testing.T) {
	doc, _, err := registration.Parse([]byte(`{"protocolVersion":"draft","hooks":[{"id":"org.example.strict","transport":{"type":"in_process","policy":"models","config":{"allow":["gpt-other"]}},`+
		`"subscriptions":[{"events":["model.request.before"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`),
		registration.Options{Policies: map[string]bool{"models": true}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chain.New(doc, chain.Options{Policies: policies.Factories(), ObserveTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	type told struct {
		rec  audit.Record
		live enforcement.Action
	}
	got := make(chan told, 2)
	tap := New(Options{Chain: ch, Workers: 1, OnSettled: func(rec audit.Record, live enforcement.Action) { got <- told{rec, live} }})
	defer tap.Close()

	caps := ahp.Capabilities{Effects: []string{ahp.EffectDeny}}
	for _, model := range []string{"gpt-4o", "gpt-other"} {
		ev := &ahp.Event{ID: "ev-" + model, Source: "urn:t", Type: ahp.EventModelRequestBefore, Time: "2026-01-01T00:00:00Z",
			Session: &ahp.Session{ID: "ses-1"}, Model: &ahp.Model{ID: model}}
		tap.Settled(&chain.Tapped{Event: ev, Capabilities: &caps,
			Settlement: &chain.Settlement{Event: ev, Permission: ahp.PermissionNone, Flow: ahp.FlowNone}})
		var tl told
		select {
		case tl = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("OnSettled was not told of the shadow settlement of %s", model)
		}
		sh := tl.rec.Shadow
		if sh == nil || tl.rec.EventID != audit.Text(ev.ID) || tl.rec.SessionID != "ses-1" || tl.live != enforcement.Forwarded || tl.rec.Time.IsZero() {
			t.Fatalf("%s: told %+v (live %q), want the shadow record of %s with the live outcome forwarded", model, tl.rec, tl.live, ev.ID)
		}
		refused := model == "gpt-4o"
		if sh.Differs != refused || (sh.Outcome == enforcement.Refused) != refused || (sh.Denial != nil) != refused {
			t.Errorf("%s: shadow part %+v, want differs=%v", model, sh, refused)
		}
	}
}
