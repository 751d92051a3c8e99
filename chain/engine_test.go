package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// TestInterceptOrder: interceptors run serially in registration order — backend order,
// then subscription order — and only matching intercept subscriptions are called
// (AHP-COMP-001, AHP-REG-002).
func TestInterceptOrder(t *testing.T) {
	var order []string
	rec := func(name string) func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		return func(_ context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
			order = append(order, name)
			return reply(id), nil
		}
	}
	fakes := map[string]*fakeTransport{
		"com.a": {onIntercept: rec("a")},
		"com.b": {onIntercept: rec("b")},
		"com.c": {onIntercept: rec("c")},
	}
	doc := docOf(
		fakeBackend("com.a", icpt("fail-open", 1000, "tool.*"), icpt("fail-open", 1000, "model.request.before"), icpt("fail-open", 1000, "*")),
		fakeBackend("com.b", obsv("tool.before"), icpt("fail-open", 1000, "tool.before")),
		fakeBackend("com.c", icpt("fail-open", 1000, "tool.after")),
	)
	c := newFakeChain(t, doc, fakes, Options{})

	st := c.Intercept(context.Background(), toolBefore("evt_order"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if want := []string{"a", "a", "b"}; !slices.Equal(order, want) {
		t.Fatalf("call order = %v, want %v", order, want)
	}
	var got []string
	for _, r := range st.Records {
		got = append(got, r.BackendID+"#"+string(rune('0'+r.Subscription))+":"+string(r.Outcome))
	}
	want := []string{"com.a#0:no_effect", "com.a#2:no_effect", "com.b#1:no_effect", "com.b#0:observed"}
	if !slices.Equal(got, want) {
		t.Fatalf("records = %v, want %v", got, want)
	}
	// Only the first called interceptor goes without state; every later one gets it.
	if fakes["com.a"].interceptAt(0).State != nil {
		t.Errorf("first interceptor received state")
	}
	if fakes["com.a"].interceptAt(1).State == nil || fakes["com.b"].interceptAt(0).State == nil {
		t.Errorf("later interceptors did not receive state")
	}
}

func TestSubscribed(t *testing.T) {
	doc := docOf(
		fakeBackend("com.a", icpt("fail-open", 100, "tool.*"), obsv("turn.end")),
		fakeBackend("com.b", icpt("fail-open", 100, "*"), obsv("model.*")),
	)
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.a": {}, "com.b": {}}, Options{})
	tests := []struct {
		desc               string
		event              string
		intercept, observe bool
	}{
		{desc: "exact and wildcard intercept", event: "tool.before", intercept: true},
		{desc: "family wildcard never intercepts an observe-only event", event: "tool.progress"},
		{desc: "star intercepts only interceptable events", event: "session.end"},
		{desc: "explicit observer of an observe-only event", event: "turn.end", observe: true},
		{desc: "observe family wildcard plus star intercept", event: "model.request.before", intercept: true, observe: true},
		{desc: "observe-only model event", event: "model.error", observe: true},
		{desc: "unknown event", event: "tool.error"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			i, o := c.Subscribed(tc.event)
			if i != tc.intercept || o != tc.observe {
				t.Fatalf("Subscribed(%q) = %v, %v; want %v, %v", tc.event, i, o, tc.intercept, tc.observe)
			}
		})
	}
}

// TestDecisions covers precedence and short-circuit rules across a chain of three
// interceptors A, B, C on tool.before (AHP-COMP-001, AHP-EDIT-001).
func TestDecisions(t *testing.T) {
	const (
		deny        = `{"type":"deny","reason":"Force pushes are prohibited.","code":"com.example.force_push"}`
		denyNoCode  = `{"type":"deny","reason":"no"}`
		allow       = `{"type":"allow"}`
		ask         = `{"type":"ask"}`
		ret         = `{"type":"return","value":{"stdout":"supplied"}}`
		mergeInput  = `{"type":"modify","target":"input","operation":"merge","value":{"command":"git push"}}`
		sameInput   = `{"type":"modify","target":"input","operation":"merge","value":{"command":"git push --force"}}`
		stop        = `{"type":"flow","operation":"stop","reason":"Budget reached."}`
		msg         = `{"type":"message","text":"must not display"}`
		unknown     = `{"type":"unknown"}`
		denyExtraFd = `{"type":"deny","reason":"x","path":"/a"}`
	)
	garbage := func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		return []byte("not json"), nil
	}
	broken := func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		return nil, &transport.Error{Kind: transport.KindConnection, Err: errors.New("connection refused to 10.0.0.1 with token s3cr3t")}
	}
	type step struct {
		policy string
		answer func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error)
	}
	tests := []struct {
		desc       string
		steps      [3]step
		wantCalled [3]bool
		wantPerm   string
		wantFlow   string
		wantDenial *Denial
		wantCand   bool
		wantMsgs   []string
		wantInput  string // "" = unchanged
		wantOut    [3]Outcome
	}{
		{
			desc:       "deny stops the chain and later interceptors observe",
			steps:      [3]step{{"fail-open", respond(deny)}, {"fail-open", respond(allow)}, {"fail-closed", respond()}},
			wantCalled: [3]bool{true, false, false},
			wantPerm:   ahp.PermissionDeny, wantFlow: ahp.FlowNone,
			wantDenial: &Denial{Reason: "Force pushes are prohibited.", Code: "com.example.force_push", BackendID: "com.a"},
			wantOut:    [3]Outcome{OutcomeAccepted, OutcomeObserved, OutcomeObserved},
		},
		{
			desc:       "deny without code gets the generic code",
			steps:      [3]step{{"fail-open", respond()}, {"fail-open", respond(denyNoCode)}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, false},
			wantPerm:   ahp.PermissionDeny, wantFlow: ahp.FlowNone,
			wantDenial: &Denial{Reason: "no", Code: CodeDenied, BackendID: "com.b"},
			wantOut:    [3]Outcome{OutcomeNoEffect, OutcomeAccepted, OutcomeObserved},
		},
		{
			desc:       "fail-open records the failure and continues with the accepted state",
			steps:      [3]step{{"fail-open", respond(allow)}, {"fail-open", garbage}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionAllow, wantFlow: ahp.FlowNone,
			wantOut: [3]Outcome{OutcomeAccepted, OutcomeFailed, OutcomeNoEffect},
		},
		{
			desc:       "fail-closed denies with a synthetic generic reason",
			steps:      [3]step{{"fail-open", respond(ret)}, {"fail-closed", broken}, {"fail-open", respond(allow)}},
			wantCalled: [3]bool{true, true, false},
			wantPerm:   ahp.PermissionDeny, wantFlow: ahp.FlowNone,
			wantDenial: &Denial{Reason: "Required policy backend com.b unavailable.", Code: CodeFailClosed, BackendID: "com.b", Synthetic: true},
			wantOut:    [3]Outcome{OutcomeAccepted, OutcomeFailed, OutcomeObserved},
		},
		{
			desc:       "[message, unknown] is rejected whole: no message shown",
			steps:      [3]step{{"fail-open", respond(msg, unknown)}, {"fail-open", respond()}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionNone, wantFlow: ahp.FlowNone,
			wantOut: [3]Outcome{OutcomeFailed, OutcomeNoEffect, OutcomeNoEffect},
		},
		{
			desc:       "a valid deny is never salvaged from an invalid list",
			steps:      [3]step{{"fail-open", respond(deny, denyExtraFd)}, {"fail-open", respond()}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionNone, wantFlow: ahp.FlowNone,
			wantOut: [3]Outcome{OutcomeFailed, OutcomeNoEffect, OutcomeNoEffect},
		},
		{
			desc:       "allow is dropped after a later modification",
			steps:      [3]step{{"fail-open", respond(allow)}, {"fail-open", respond(mergeInput)}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionNone, wantFlow: ahp.FlowNone,
			wantInput: `{"command":"git push","opts":{"a":1}}`,
			wantOut:   [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeNoEffect},
		},
		{
			desc:       "a modification that changes nothing keeps allow",
			steps:      [3]step{{"fail-open", respond(allow)}, {"fail-open", respond(sameInput)}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionAllow, wantFlow: ahp.FlowNone,
			wantOut: [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeNoEffect},
		},
		{
			desc:       "ask persists over a later allow",
			steps:      [3]step{{"fail-open", respond(ask)}, {"fail-open", respond(allow)}, {"fail-open", respond(ask, allow)}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionAsk, wantFlow: ahp.FlowNone,
			wantOut: [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeAccepted},
		},
		{
			desc:       "a candidate is kept when nothing overrides it",
			steps:      [3]step{{"fail-open", respond(ret)}, {"fail-open", respond(allow)}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionAllow, wantFlow: ahp.FlowNone, wantCand: true,
			wantOut: [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeNoEffect},
		},
		{
			desc:       "a candidate is dropped by a later deny",
			steps:      [3]step{{"fail-open", respond(ret)}, {"fail-open", respond(deny)}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, false},
			wantPerm:   ahp.PermissionDeny, wantFlow: ahp.FlowNone,
			wantDenial: &Denial{Reason: "Force pushes are prohibited.", Code: "com.example.force_push", BackendID: "com.b"},
			wantOut:    [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeObserved},
		},
		{
			desc:       "a candidate is dropped by a later modification",
			steps:      [3]step{{"fail-open", respond(ret)}, {"fail-open", respond(mergeInput)}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionNone, wantFlow: ahp.FlowNone,
			wantInput: `{"command":"git push","opts":{"a":1}}`,
			wantOut:   [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeNoEffect},
		},
		{
			desc:       "a return in the same response binds after its modification",
			steps:      [3]step{{"fail-open", respond(ret, mergeInput)}, {"fail-open", respond()}, {"fail-open", respond()}},
			wantCalled: [3]bool{true, true, true},
			wantPerm:   ahp.PermissionNone, wantFlow: ahp.FlowNone, wantCand: true,
			wantInput: `{"command":"git push","opts":{"a":1}}`,
			wantOut:   [3]Outcome{OutcomeAccepted, OutcomeNoEffect, OutcomeNoEffect},
		},
		{
			desc:       "flow stop ends decision-making and discards the candidate",
			steps:      [3]step{{"fail-open", respond(ret)}, {"fail-open", respond(msg, stop)}, {"fail-closed", respond(deny)}},
			wantCalled: [3]bool{true, true, false},
			wantPerm:   ahp.PermissionNone, wantFlow: ahp.FlowStop,
			wantMsgs: []string{"must not display"},
			wantOut:  [3]Outcome{OutcomeAccepted, OutcomeAccepted, OutcomeObserved},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			fakes := map[string]*fakeTransport{}
			var backends []registration.Backend
			for i, name := range []string{"com.a", "com.b", "com.c"} {
				fakes[name] = &fakeTransport{onIntercept: tc.steps[i].answer}
				backends = append(backends, fakeBackend(name, icpt(tc.steps[i].policy, 1000, "tool.before")))
			}
			c := newFakeChain(t, docOf(backends...), fakes, Options{})
			ev := toolBefore("evt_dec")
			orig := string(ev.Tool.Input)
			st := c.Intercept(context.Background(), ev, hostCaps(ahp.EventToolBefore, 0))
			st.Wait()

			for i, name := range []string{"com.a", "com.b", "com.c"} {
				if got := fakes[name].interceptCount() > 0; got != tc.wantCalled[i] {
					t.Errorf("%s called = %v, want %v", name, got, tc.wantCalled[i])
				}
				if st.Records[i].Outcome != tc.wantOut[i] {
					t.Errorf("record %d (%s) outcome = %s, want %s", i, st.Records[i].BackendID, st.Records[i].Outcome, tc.wantOut[i])
				}
			}
			if st.Permission != tc.wantPerm || st.Flow != tc.wantFlow {
				t.Errorf("permission, flow = %s, %s; want %s, %s", st.Permission, st.Flow, tc.wantPerm, tc.wantFlow)
			}
			if (st.Candidate != nil) != tc.wantCand {
				t.Errorf("candidate = %v, want present=%v", st.Candidate, tc.wantCand)
			}
			switch {
			case tc.wantDenial == nil && st.Denial != nil:
				t.Errorf("denial = %+v, want none", st.Denial)
			case tc.wantDenial != nil && (st.Denial == nil || *st.Denial != *tc.wantDenial):
				t.Errorf("denial = %+v, want %+v", st.Denial, tc.wantDenial)
			}
			if st.Denial != nil && strings.Contains(st.Denial.Reason, "s3cr3t") {
				t.Errorf("synthetic reason leaks backend error text: %q", st.Denial.Reason)
			}
			if !slices.Equal(st.Messages, tc.wantMsgs) {
				t.Errorf("messages = %q, want %q", st.Messages, tc.wantMsgs)
			}
			gotInput := string(st.Event.Tool.Input)
			if tc.wantInput == "" {
				if gotInput != orig || st.Modified {
					t.Errorf("input = %s (modified=%v), want unchanged", gotInput, st.Modified)
				}
			} else if gotInput != tc.wantInput || !st.Modified {
				t.Errorf("input = %s (modified=%v), want %s", gotInput, st.Modified, tc.wantInput)
			}
			if string(ev.Tool.Input) != orig {
				t.Errorf("the caller's event was mutated")
			}
		})
	}
}

// TestModificationChaining: each interceptor receives the accepted effective value of the
// previous ones, never the original (AHP-EDIT-001).
func TestModificationChaining(t *testing.T) {
	appendMsg := func(text string) func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		m, _ := json.Marshal([]ahp.Message{textMsg("add_"+text, ahp.RoleUser, text)})
		return respond(`{"type":"modify","target":"request","operation":"merge","value":` + string(m) + `}`)
	}
	replaceAll := func() func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		m, _ := json.Marshal([]ahp.Message{textMsg("only", ahp.RoleUser, "replaced")})
		return respond(`{"type":"modify","target":"request","operation":"replace","value":` + string(m) + `}`)
	}
	fakes := map[string]*fakeTransport{
		"com.a": {onIntercept: appendMsg("one")},
		"com.b": {onIntercept: appendMsg("two")},
		"com.c": {onIntercept: replaceAll()},
		"com.d": {},
	}
	doc := docOf(
		fakeBackend("com.a", icpt("fail-open", 1000, "model.request.before")),
		fakeBackend("com.b", icpt("fail-open", 1000, "model.request.before")),
		fakeBackend("com.c", icpt("fail-open", 1000, "model.request.before")),
		fakeBackend("com.d", icpt("fail-open", 1000, "model.request.before"), obsv("model.request.before")),
	)
	c := newFakeChain(t, doc, fakes, Options{})
	ev := modelRequest("evt_chain")
	st := c.Intercept(context.Background(), ev, hostCaps(ahp.EventModelRequestBefore, 0))
	st.Wait()

	ids := func(items []ahp.Message) []string {
		var out []string
		for _, m := range items {
			out = append(out, m.ID)
		}
		return out
	}
	seen := [][]string{
		ids(fakes["com.a"].interceptAt(0).Event.Items),
		ids(fakes["com.b"].interceptAt(0).Event.Items),
		ids(fakes["com.c"].interceptAt(0).Event.Items),
		ids(fakes["com.d"].interceptAt(0).Event.Items),
	}
	want := [][]string{{"m0", "m1"}, {"m0", "m1", "add_one"}, {"m0", "m1", "add_one", "add_two"}, {"only"}}
	for i := range want {
		if !slices.Equal(seen[i], want[i]) {
			t.Errorf("interceptor %d saw %v, want %v", i, seen[i], want[i])
		}
	}
	if got := ids(st.Event.Items); !slices.Equal(got, []string{"only"}) || !st.Modified {
		t.Errorf("effective items = %v (modified=%v)", got, st.Modified)
	}
	if got := ids(ev.Items); !slices.Equal(got, []string{"m0", "m1"}) {
		t.Errorf("original event mutated: %v", got)
	}
	// The explicit observer of the backend that also intercepted gets the final view.
	obs := fakes["com.d"].observed()
	if len(obs) != 1 || !slices.Equal(ids(obs[0].Event.Items), []string{"only"}) {
		t.Errorf("observer got %d observations, want 1 with the effective items", len(obs))
	}
}

// TestListAndObjectMerge: list merge appends without deduplication; object merge is
// shallow, replaces nested values whole and keeps null as a literal (AHP-EDIT-001).
func TestListAndObjectMerge(t *testing.T) {
	dup := `[{"id":"x","role":"tool","parts":[{"id":"x.p","kind":"text","mediaType":"text/plain","selection":"body","text":"dup"}]},` +
		`{"id":"x","role":"tool","parts":[{"id":"x.p","kind":"text","mediaType":"text/plain","selection":"body","text":"dup"}]}]`
	tests := []struct {
		desc   string
		ev     *ahp.Event
		effect string
		check  func(t *testing.T, st *Settlement)
	}{
		{
			desc:   "list merge appends repeated entries",
			ev:     toolAfter("evt_lm"),
			effect: `{"type":"modify","target":"output","operation":"merge","value":` + dup + `}`,
			check: func(t *testing.T, st *Settlement) {
				if n := len(st.Event.Items); n != 3 || st.Event.Items[1].ID != "x" || st.Event.Items[2].ID != "x" {
					t.Fatalf("items = %+v, want original plus two repeated entries", st.Event.Items)
				}
			},
		},
		{
			desc:   "list replace substitutes the whole list",
			ev:     toolAfter("evt_lr"),
			effect: `{"type":"modify","target":"output","operation":"replace","value":[]}`,
			check: func(t *testing.T, st *Settlement) {
				if st.Event.Items == nil || len(st.Event.Items) != 0 || !st.Modified {
					t.Fatalf("items = %#v, want an empty list", st.Event.Items)
				}
			},
		},
		{
			desc:   "object merge is shallow with literal null",
			ev:     toolBefore("evt_om"),
			effect: `{"type":"modify","target":"input","operation":"merge","value":{"opts":{"b":2},"command":null,"extra":[1]}}`,
			check: func(t *testing.T, st *Settlement) {
				if got := string(st.Event.Tool.Input); got != `{"command":null,"opts":{"b":2},"extra":[1]}` {
					t.Fatalf("input = %s", got)
				}
			},
		},
		{
			desc:   "object replace removes omitted fields",
			ev:     toolBefore("evt_or"),
			effect: `{"type":"modify","target":"input","operation":"replace","value":{"command":"ls"}}`,
			check: func(t *testing.T, st *Settlement) {
				if got := string(st.Event.Tool.Input); got != `{"command":"ls"}` {
					t.Fatalf("input = %s", got)
				}
			},
		},
		{
			desc:   "merging a list into an object target is rejected whole",
			ev:     toolBefore("evt_ol"),
			effect: `{"type":"modify","target":"input","operation":"merge","value":[1]}`,
			check: func(t *testing.T, st *Settlement) {
				if st.Modified || st.Records[0].FailureKind != transport.KindInvalid {
					t.Fatalf("modified=%v record=%+v", st.Modified, st.Records[0])
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := &fakeTransport{onIntercept: respond(tc.effect)}
			c := newFakeChain(t, docOf(fakeBackend("com.a", icpt("fail-open", 1000, tc.ev.Type))), map[string]*fakeTransport{"com.a": f}, Options{})
			st := c.Intercept(context.Background(), tc.ev, hostCaps(tc.ev.Type, 0))
			st.Wait()
			tc.check(t, st)
		})
	}
}

// TestContinueAllowance: continue is advertised and accepted only while an allowance
// remains, or when continue was already accepted earlier in the chain; instructions
// accumulate in order; stop wins over continue.
func TestContinueAllowance(t *testing.T) {
	cont := func(ins string) string { return `{"type":"flow","operation":"continue","instruction":"` + ins + `"}` }
	tests := []struct {
		desc         string
		remaining    int
		answers      [2]string
		wantFlow     string
		wantIns      []string
		wantAdvert   [2]bool
		wantOutcomes [2]Outcome
	}{
		{
			desc: "instructions accumulate across interceptors", remaining: 1,
			answers:  [2]string{cont("Run the tests."), cont("Fix lint.")},
			wantFlow: ahp.FlowContinue, wantIns: []string{"Run the tests.", "Fix lint."},
			wantAdvert: [2]bool{true, true}, wantOutcomes: [2]Outcome{OutcomeAccepted, OutcomeAccepted},
		},
		{
			// The exhausted allowance is advertised (remainingContinuations 0) so the backend
			// knows; a continue is then rejected whole.
			desc: "exhausted allowance: continue is advertised with 0 left and not accepted", remaining: 0,
			answers:  [2]string{cont("again"), ""},
			wantFlow: ahp.FlowNone, wantAdvert: [2]bool{true, true},
			wantOutcomes: [2]Outcome{OutcomeFailed, OutcomeNoEffect},
		},
		{
			// Stop wins; the accepted instruction is still reported, and unused.
			desc: "stop wins over continue", remaining: 2,
			answers:  [2]string{cont("again"), `{"type":"flow","operation":"stop","reason":"enough"}`},
			wantFlow: ahp.FlowStop, wantIns: []string{"again"}, wantAdvert: [2]bool{true, true},
			wantOutcomes: [2]Outcome{OutcomeAccepted, OutcomeAccepted},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			fa := &fakeTransport{onIntercept: respond(tc.answers[0])}
			fb := &fakeTransport{onIntercept: respond(tc.answers[1])}
			if tc.answers[1] == "" {
				fb.onIntercept = nil
			}
			if tc.answers[0] == "" {
				fa.onIntercept = nil
			}
			doc := docOf(fakeBackend("com.a", icpt("fail-open", 1000, "turn.finish.before")), fakeBackend("com.b", icpt("fail-open", 1000, "turn.finish.before")))
			c := newFakeChain(t, doc, map[string]*fakeTransport{"com.a": fa, "com.b": fb}, Options{})
			st := c.Intercept(context.Background(), turnFinish("evt_cont", 0), hostCaps(ahp.EventTurnFinishBefore, tc.remaining))
			st.Wait()
			if st.Flow != tc.wantFlow || !slices.Equal(st.Instructions, tc.wantIns) {
				t.Errorf("flow %s instructions %q; want %s %q", st.Flow, st.Instructions, tc.wantFlow, tc.wantIns)
			}
			for i, f := range []*fakeTransport{fa, fb} {
				caps := f.interceptAt(0).Capabilities
				adv := caps.Flow != nil && slices.Contains(caps.Flow.Operations, ahp.OpContinue)
				if adv != tc.wantAdvert[i] {
					t.Errorf("interceptor %d: continue advertised = %v, want %v (%+v)", i, adv, tc.wantAdvert[i], caps.Flow)
				}
				if st.Records[i].Outcome != tc.wantOutcomes[i] {
					t.Errorf("interceptor %d outcome %s, want %s", i, st.Records[i].Outcome, tc.wantOutcomes[i])
				}
			}
		})
	}
}

// TestContinueAfterAcceptedContinue: with the allowance exhausted by the host count, a
// continue already accepted earlier in the chain lets a later continue join it.
func TestContinueAfterAcceptedContinue(t *testing.T) {
	s := &stager{eventType: ahp.EventTurnFinishBefore, contextual: true, bound: ahp.EventBounds[ahp.EventTurnFinishBefore], hasBound: true}
	s.caps = &ahp.Capabilities{Effects: []string{"flow"}, Flow: &ahp.FlowCaps{Operations: []string{"continue"}, RemainingContinuations: intPtr(0), ContinuationCount: intPtr(3)}}
	s.current = func(string, valueKind) (*value, error) { return &value{}, nil }
	frame := reply("e", `{"type":"flow","operation":"continue","instruction":"more"}`)
	s.state = initialState()
	if _, err := s.stage(frame); err == nil {
		t.Fatalf("continue accepted with no allowance")
	}
	s.state.Flow = ahp.FlowContinue
	st, err := s.stage(frame)
	if err != nil {
		t.Fatalf("continue after an accepted continue rejected: %v", err)
	}
	if st.State.Flow != ahp.FlowContinue || !slices.Equal(st.State.Instructions, []string{"more"}) {
		t.Fatalf("state = %+v", st.State)
	}
}

// TestTimeout: a backend that never answers costs the subscription's timeoutMs, not more,
// and its late reply is ignored (AHP-FAIL-002).
func TestTimeout(t *testing.T) {
	const timeout = 80 * time.Millisecond
	hang := &fakeTransport{onIntercept: func(ctx context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
		<-ctx.Done()
		return nil, &transport.Error{Kind: transport.KindTimeout, Err: ctx.Err()}
	}}
	late := &fakeTransport{onIntercept: func(ctx context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
		<-ctx.Done()
		// A reply that arrives after the deadline must be ignored.
		return reply(id, `{"type":"allow"}`), nil
	}}
	// A backend that never waits on the deadline but asks Err while it works (a bounded
	// in-process policy does) ends by it all the same (chain/deadline.go).
	polling := &fakeTransport{onIntercept: func(ctx context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		return reply(id, `{"type":"allow"}`), nil
	}}
	tests := []struct {
		desc     string
		fake     *fakeTransport
		policy   string
		wantPerm string
	}{
		{desc: "fail-closed timeout denies", fake: hang, policy: "fail-closed", wantPerm: ahp.PermissionDeny},
		{desc: "late reply is ignored", fake: late, policy: "fail-open", wantPerm: ahp.PermissionNone},
		{desc: "a polling backend's reply is ignored", fake: polling, policy: "fail-closed", wantPerm: ahp.PermissionDeny},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := newFakeChain(t, docOf(fakeBackend("com.slow", icpt(tc.policy, int(timeout/time.Millisecond), "tool.before"))),
				map[string]*fakeTransport{"com.slow": tc.fake}, Options{})
			start := time.Now()
			st := c.Intercept(context.Background(), toolBefore("evt_to"), hostCaps(ahp.EventToolBefore, 0))
			elapsed := time.Since(start)
			st.Wait()
			if elapsed < timeout || elapsed > timeout+250*time.Millisecond {
				t.Errorf("settlement took %v, want about %v", elapsed, timeout)
			}
			if st.Permission != tc.wantPerm || st.Records[0].FailureKind != transport.KindTimeout {
				t.Errorf("permission %s record %+v", st.Permission, st.Records[0])
			}
		})
	}
}

// TestInterruption: a cancelled operation ends decision-making, accepts nothing from the
// cancelled exchange, drops allow/return/continue, and starts no observation at all.
func TestInterruption(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &fakeTransport{onIntercept: respond(`{"type":"allow"}`, `{"type":"return","value":"x"}`)}
	b := &fakeTransport{onIntercept: func(ctx context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
		cancel()
		<-ctx.Done()
		return reply(id, `{"type":"deny","reason":"too late"}`), nil
	}}
	fc := &fakeTransport{}
	watcher := &fakeTransport{}
	doc := docOf(
		fakeBackend("com.a", icpt("fail-open", 1000, "tool.before")),
		fakeBackend("com.b", icpt("fail-closed", 1000, "tool.before")),
		fakeBackend("com.c", icpt("fail-closed", 1000, "tool.before")),
		fakeBackend("com.w", obsv("tool.before"), obsv("hook.failure")),
	)
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.a": a, "com.b": b, "com.c": fc, "com.w": watcher}, Options{})
	st := c.Intercept(ctx, toolBefore("evt_int"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if !st.Interrupted {
		t.Fatalf("not interrupted")
	}
	if st.Permission != ahp.PermissionNone || st.Candidate != nil || st.Denial != nil {
		t.Errorf("interrupted outcome kept permission=%s candidate=%v denial=%+v", st.Permission, st.Candidate, st.Denial)
	}
	if fc.interceptCount() != 0 {
		t.Errorf("an interceptor was called after interruption")
	}
	if n := watcher.observeCount() + fc.observeCount(); n != 0 {
		t.Errorf("%d observations started after interruption", n)
	}
	wantOut := []Outcome{OutcomeAccepted, OutcomeFailed, OutcomeNotCalled}
	for i, w := range wantOut {
		if st.Records[i].Outcome != w {
			t.Errorf("record %d outcome %s, want %s", i, st.Records[i].Outcome, w)
		}
	}
	if st.Records[1].FailureKind != transport.KindCancelled {
		t.Errorf("cancelled exchange kind = %s", st.Records[1].FailureKind)
	}

	// Already interrupted before the first call: nothing is sent at all.
	st = c.Intercept(ctx, toolBefore("evt_int2"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if !st.Interrupted || a.interceptCount() != 1 || watcher.observeCount() != 0 {
		t.Errorf("pre-cancelled call: interrupted=%v calls=%d observations=%d", st.Interrupted, a.interceptCount(), watcher.observeCount())
	}
}

// TestNoInterceptorsStillObserves: an event with only observers settles at once with no
// decision and dispatches the observations.
func TestNoInterceptorsStillObserves(t *testing.T) {
	w := &fakeTransport{}
	c := newFakeChain(t, docOf(fakeBackend("com.w", obsv("tool.before"))), map[string]*fakeTransport{"com.w": w}, Options{})
	ev := toolBefore("evt_obs_only")
	st := c.Intercept(context.Background(), ev, hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if st.Permission != ahp.PermissionNone || st.Event != ev || w.observeCount() != 1 {
		t.Fatalf("permission=%s same-event=%v observations=%d", st.Permission, st.Event == ev, w.observeCount())
	}
}

// TestNewRequiresObserveTimeout: the observation bound is the caller's to give (the
// assembly passes limits.observeTimeout); New refuses to run observers without one. The
// control is the same document with a bound, which New accepts.
func TestNewRequiresObserveTimeout(t *testing.T) {
	orig := newTransport
	defer func() { newTransport = orig }()
	newTransport = func(registration.Backend, Options) (transport.Transport, error) { return &fakeTransport{}, nil }
	doc := docOf(fakeBackend("com.a", obsv("turn.end")))
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := New(doc, Options{ObserveTimeout: d}); err == nil || !strings.Contains(err.Error(), "ObserveTimeout") {
			t.Errorf("New with ObserveTimeout %v: err = %v, want the missing bound named", d, err)
		}
	}
	c, err := New(doc, Options{ObserveTimeout: time.Second})
	if err != nil {
		t.Fatalf("New with a bound: %v", err)
	}
	_ = c.Close()
}

func TestNewRejectsIncompleteInterceptSubscription(t *testing.T) {
	tests := []struct {
		desc string
		sub  registration.Subscription
	}{
		{desc: "missing timeout", sub: icpt("fail-open", 0, "tool.before")},
		{desc: "missing failure policy", sub: icpt("", 100, "tool.before")},
		{desc: "unknown mode", sub: registration.Subscription{Events: []string{"tool.before"}, Mode: "sometimes", Content: bodyAll}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			orig := newTransport
			defer func() { newTransport = orig }()
			newTransport = func(registration.Backend, Options) (transport.Transport, error) { return &fakeTransport{}, nil }
			if _, err := New(docOf(fakeBackend("com.a", tc.sub)), Options{ObserveTimeout: testObserveTimeout}); err == nil {
				t.Fatalf("New accepted %s", tc.desc)
			}
		})
	}
}

func TestCloseAndReady(t *testing.T) {
	f := &fakeTransport{}
	r := &readyTransport{fakeTransport: &fakeTransport{}, err: errors.New("backend process not running")}
	orig := newTransport
	newTransport = func(b registration.Backend, _ Options) (transport.Transport, error) {
		if b.ID == "com.r" {
			return r, nil
		}
		return f, nil
	}
	c, err := New(docOf(fakeBackend("com.a", obsv("turn.end")), fakeBackend("com.r", obsv("turn.end"))), Options{ObserveTimeout: testObserveTimeout})
	newTransport = orig
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "com.r") {
		t.Errorf("Ready = %v, want the not-running backend named", err)
	}
	r.err = nil
	if err := c.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
	if err := c.Close(); err != nil || !f.closed || !r.closed {
		t.Errorf("Close = %v closed=%v/%v", err, f.closed, r.closed)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

type readyTransport struct {
	*fakeTransport
	err error
}

func (r *readyTransport) Ready() error { return r.err }

// TestReplyExtensionsPassThrough: the result extensions of accepted replies reach the
// settlement in chain order, uninterpreted; a rejected reply's do not.
func TestReplyExtensionsPassThrough(t *testing.T) {
	withExt := func(ext string, effects ...string) func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		return func(_ context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
			rid, _ := json.Marshal(id)
			return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"draft","effects":[%s],"extensions":%s}}`,
				rid, strings.Join(effects, ","), ext)), nil
		}
	}
	a := &fakeTransport{onIntercept: withExt(`{"com.example.z":1,"com.example.a":[2]}`)}
	bad := &fakeTransport{onIntercept: withExt(`{"com.example.bad":true}`, `{"type":"bogus"}`)}
	c3 := &fakeTransport{onIntercept: withExt(`{"com.example.c":"x"}`)}
	doc := docOf(
		fakeBackend("com.a", icpt("fail-open", 1000, "tool.before")),
		fakeBackend("com.bad", icpt("fail-open", 1000, "tool.before")),
		fakeBackend("com.c", icpt("fail-open", 1000, "tool.before")),
	)
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.a": a, "com.bad": bad, "com.c": c3}, Options{})
	st := c.Intercept(context.Background(), toolBefore("evt_ext"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	var got []string
	for _, e := range st.Extensions {
		got = append(got, e.BackendID+" "+e.Key+"="+string(e.Value))
	}
	want := []string{`com.a com.example.a=[2]`, `com.a com.example.z=1`, `com.c com.example.c="x"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extensions %q, want %q", got, want)
	}
}
