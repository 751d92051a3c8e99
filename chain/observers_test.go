package chain

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// TestSlowObserverDoesNotDelaySettlement: Intercept returns while an observer is still
// blocked; Wait returns only after that observer finished, and then no goroutine of the
// call is left (AHP spec, base/composition.md "Observers").
func TestSlowObserverDoesNotDelaySettlement(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	entered := make(chan struct{})
	slow := &fakeTransport{onObserve: func(ctx context.Context, _ *ahp.ObserveParams) error {
		close(entered)
		<-release
		return nil
	}}
	icp := &fakeTransport{}
	doc := docOf(fakeBackend("com.icp", icpt("fail-closed", 1000, "tool.before")), fakeBackend("com.audit", obsv("tool.*")))
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.icp": icp, "com.audit": slow}, Options{})

	settled := make(chan *Settlement)
	go func() {
		settled <- c.Intercept(context.Background(), toolBefore("evt_slow_obs"), hostCaps(ahp.EventToolBefore, 0))
	}()
	// The settlement arrives although the observer cannot finish before release is closed.
	// (The timer only keeps a regression from hanging the suite; it proves nothing.)
	var st *Settlement
	select {
	case st = <-settled:
	case <-time.After(10 * time.Second):
		close(release)
		<-settled
		t.Fatal("settlement waited for a blocked observer")
	}
	if st.Permission != ahp.PermissionNone || st.Records[0].Outcome != OutcomeNoEffect {
		t.Fatalf("settlement = %+v", st)
	}
	<-entered // the observation started after settlement and is now blocked

	waited := make(chan struct{})
	go func() { st.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatalf("Wait returned while an owned delivery was still running")
	default:
	}
	close(release)
	<-waited
	if slow.observeCount() != 1 {
		t.Fatalf("observations = %d", slow.observeCount())
	}
}

// TestObserverTimeoutBoundsWait: a hung observer is abandoned at ObserveTimeout.
func TestObserverTimeoutBoundsWait(t *testing.T) {
	hung := &fakeTransport{onObserve: func(ctx context.Context, _ *ahp.ObserveParams) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	c := newFakeChain(t, docOf(fakeBackend("com.hung", obsv("turn.end"))), map[string]*fakeTransport{"com.hung": hung}, Options{ObserveTimeout: 50 * time.Millisecond})
	start := time.Now()
	c.Observe(context.Background(), turnEnd("evt_hung"))
	if d := time.Since(start); d < 50*time.Millisecond || d > time.Second {
		t.Fatalf("Observe took %v, want about 50ms", d)
	}
}

// TestObservationRouting covers who receives hooks/observe after settlement.
func TestObservationRouting(t *testing.T) {
	deny := respond(`{"type":"deny","reason":"no"}`)
	fail := func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		return nil, &transport.Error{Kind: transport.KindConnection, Err: context.DeadlineExceeded}
	}
	tests := []struct {
		desc      string
		first     func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error)
		policy    string
		wantObs   map[string]int // observations per backend
		wantCalls map[string]int
		wantFail  *ahp.Failure // hook.failure payload seen by com.audit
	}{
		{
			desc:  "deny downgrades the remaining interceptor; the same backend's explicit observer also gets a copy",
			first: deny, policy: "fail-open",
			wantCalls: map[string]int{"com.first": 1, "com.second": 0},
			wantObs:   map[string]int{"com.first": 1, "com.second": 1, "com.audit": 1},
		},
		{
			desc:  "a fail-open failure is reported by hook.failure, the chain goes on",
			first: fail, policy: "fail-open",
			wantCalls: map[string]int{"com.first": 1, "com.second": 1},
			wantObs:   map[string]int{"com.first": 1, "com.second": 0, "com.audit": 2},
			wantFail:  &ahp.Failure{BackendID: "com.first", Reason: string(transport.KindConnection), Policy: "fail-open"},
		},
		{
			desc:  "a fail-closed failure downgrades and is reported",
			first: fail, policy: "fail-closed",
			wantCalls: map[string]int{"com.first": 1, "com.second": 0},
			wantObs:   map[string]int{"com.first": 1, "com.second": 1, "com.audit": 2},
			wantFail:  &ahp.Failure{BackendID: "com.first", Reason: string(transport.KindConnection), Policy: "fail-closed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			fakes := map[string]*fakeTransport{"com.first": {onIntercept: tc.first}, "com.second": {}, "com.audit": {}}
			doc := docOf(
				// com.first intercepts and also observes the same event (overlapping subscriptions).
				fakeBackend("com.first", icpt(tc.policy, 1000, "tool.before"), obsv("tool.before")),
				fakeBackend("com.second", icpt("fail-open", 1000, "tool.before")),
				fakeBackend("com.audit", obsv("tool.before", "hook.failure")),
			)
			c := newFakeChain(t, doc, fakes, Options{})
			ev := toolBefore("evt_route")
			st := c.Intercept(context.Background(), ev, hostCaps(ahp.EventToolBefore, 0))
			st.Wait()
			for name, want := range tc.wantCalls {
				if got := fakes[name].interceptCount(); got != want {
					t.Errorf("%s intercept calls = %d, want %d", name, got, want)
				}
			}
			for name, want := range tc.wantObs {
				if got := fakes[name].observeCount(); got != want {
					t.Errorf("%s observations = %d, want %d", name, got, want)
				}
			}
			for _, o := range fakes["com.audit"].observed() {
				switch o.Event.Type {
				case ahp.EventToolBefore:
					if o.Event.ID != ev.ID {
						t.Errorf("observation of the boundary has id %s, want the event id", o.Event.ID)
					}
				case ahp.EventHookFailure:
					if tc.wantFail == nil || o.Event.Failure == nil || *o.Event.Failure != *tc.wantFail || o.Event.ParentEventID != ev.ID || o.Event.Source != ev.Source {
						t.Errorf("hook.failure = %+v failure=%+v", o.Event, o.Event.Failure)
					}
				default:
					t.Errorf("unexpected observation %s", o.Event.Type)
				}
			}
		})
	}
}

// TestObservationsUseEffectiveContentAndOwnSelection: observers get the accepted effective
// content, each projected through its own content selection.
func TestObservationsUseEffectiveContentAndOwnSelection(t *testing.T) {
	m := `[{"id":"added","role":"user","parts":[{"id":"added.p","kind":"text","mediaType":"text/plain","selection":"body","text":"secret plan"}]}]`
	fakes := map[string]*fakeTransport{
		"com.edit":  {onIntercept: respond(`{"type":"modify","target":"request","operation":"merge","value":` + m + `}`)},
		"com.full":  {},
		"com.meta":  {},
		"com.later": {onIntercept: respond(`{"type":"modify","target":"request","operation":"merge","value":[]}`, `{"type":"bogus"}`)},
	}
	doc := docOf(
		fakeBackend("com.edit", icpt("fail-open", 1000, "model.request.before")),
		fakeBackend("com.later", icpt("fail-open", 1000, "model.request.before")),
		fakeBackend("com.full", obsv("model.*")),
		fakeBackend("com.meta", withContent(obsv("model.request.before"), map[string]string{"default": "metadata"})),
	)
	c := newFakeChain(t, doc, fakes, Options{})
	ev := modelRequest("evt_eff")
	ev.Native = []byte(`{"messages":["secret plan"]}`)
	st := c.Intercept(context.Background(), ev, hostCaps(ahp.EventModelRequestBefore, 0))
	st.Wait()

	full := fakes["com.full"].observed()[0].Event
	if n := len(full.Items); n != 3 || full.Items[2].Parts[0].TextOf() != "secret plan" {
		t.Errorf("full observer items = %+v", full.Items)
	}
	if full.Native != nil {
		t.Errorf("native delivered without includeNative")
	}
	meta := fakes["com.meta"].observed()[0].Event
	for _, it := range meta.Items {
		for _, p := range it.Parts {
			if p.Text != nil || p.Selection != ahp.SelectionMetadata || p.Size == nil || len(p.SHA256) != 64 {
				t.Errorf("metadata observer got part %+v", p)
			}
		}
	}
	if len(meta.Items) != 3 {
		t.Errorf("metadata observer items = %d, want the effective 3", len(meta.Items))
	}
}

func TestObserveOnlyEvents(t *testing.T) {
	a, b, icp := &fakeTransport{}, &fakeTransport{}, &fakeTransport{}
	doc := docOf(
		fakeBackend("com.a", obsv("turn.*")),
		fakeBackend("com.b", obsv("model.error")),
		fakeBackend("com.icp", icpt("fail-open", 100, "*")),
	)
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.a": a, "com.b": b, "com.icp": icp}, Options{})
	c.Observe(context.Background(), turnEnd("evt_te"))
	if a.observeCount() != 1 || b.observeCount() != 0 || icp.observeCount() != 0 || icp.interceptCount() != 0 {
		t.Fatalf("observations a=%d b=%d icp=%d/%d", a.observeCount(), b.observeCount(), icp.observeCount(), icp.interceptCount())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Observe(ctx, turnEnd("evt_te2"))
	if a.observeCount() != 1 {
		t.Fatalf("an interrupted Observe started a delivery")
	}
	if got := a.observed()[0].Event.ID; got != "evt_te" {
		t.Fatalf("observed %s", got)
	}
}
