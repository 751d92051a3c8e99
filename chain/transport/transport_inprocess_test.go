package transport

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// testPolicy is a configurable built-in policy.
type testPolicy struct {
	intercept func(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error)
	observed  atomic.Int32
	closed    atomic.Bool
}

func (p *testPolicy) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	return p.intercept(ctx, req)
}

func (p *testPolicy) Observe(context.Context, *ahp.ObserveParams) error {
	p.observed.Add(1)
	return nil
}

func (p *testPolicy) Close() error {
	p.closed.Store(true)
	return nil
}

func inProcessBackend(name string, config string) registration.Backend {
	return registration.Backend{ID: "test.policy", Transport: registration.Transport{
		Type: registration.TransportInProcess, Policy: name, Config: json.RawMessage(config),
	}}
}

func newPolicyTransport(t *testing.T, p *testPolicy) Transport {
	t.Helper()
	return mustNew(t, inProcessBackend("test", `{}`), Options{Policies: map[string]PolicyFactory{
		"test": func(json.RawMessage) (ahp.Interceptor, error) { return p, nil },
	}})
}

func TestInProcessResultIsFramedAsJSONRPCResponse(t *testing.T) {
	reason := "rm -rf is not allowed"
	var gotConfig string
	tr := mustNew(t, inProcessBackend("guard", `{"deny":["rm"]}`), Options{Policies: map[string]PolicyFactory{
		"guard": func(config json.RawMessage) (ahp.Interceptor, error) {
			gotConfig = string(config)
			return &testPolicy{intercept: func(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
				if req.ID != "evt_1" || req.Params.Event.ID != "evt_1" {
					t.Errorf("policy got id %q / event %q", req.ID, req.Params.Event.ID)
				}
				return &ahp.InterceptResult{ProtocolVersion: ahp.ProtocolVersion, Effects: []ahp.Effect{
					{Type: ahp.EffectDeny, Reason: reason, Code: "guard.rm"},
				}}, nil
			}}, nil
		},
	}})
	if gotConfig != `{"deny":["rm"]}` {
		t.Fatalf("factory config = %s", gotConfig)
	}
	frame, err := intercept(t, tr, "evt_1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":"evt_1","result":{"protocolVersion":"draft","effects":[{"type":"deny","reason":"rm -rf is not allowed","code":"guard.rm"}]}}`
	if string(frame) != want {
		t.Fatalf("frame =\n%s\nwant\n%s", frame, want)
	}
}

func TestInProcessFailures(t *testing.T) {
	for _, tc := range []struct {
		desc string
		fn   func(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error)
		want Kind
	}{
		{"error", func(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
			return nil, errors.New("rules unavailable")
		}, KindPolicy},
		{"panic", func(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
			panic("policy bug")
		}, KindPolicy},
		{"nil dereference", func(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
			var m map[string]*ahp.Event
			return nil, errors.New(m["x"].ID)
		}, KindPolicy},
		{"nil result", func(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
			return nil, nil
		}, KindPolicy},
		{"ignores the deadline", func(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
			time.Sleep(300 * time.Millisecond)
			return ahp.NoEffects(), nil
		}, KindTimeout},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tr := newPolicyTransport(t, &testPolicy{intercept: tc.fn})
			start := time.Now()
			_, err := intercept(t, tr, "evt_1", 100*time.Millisecond)
			wantKind(t, err, tc.want)
			if el := time.Since(start); el > 250*time.Millisecond {
				t.Fatalf("call returned after %v with a 100ms deadline", el)
			}
			if strings.Contains(err.Error(), "policy bug") {
				t.Fatalf("error text %q echoes the panic value", err)
			}
		})
	}
}

func TestInProcessPolicyCannotMutateTheChainsParams(t *testing.T) {
	p := &testPolicy{intercept: func(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
		req.Params.Event.Tool.Name = "changed"
		return ahp.NoEffects(), nil
	}}
	tr := newPolicyTransport(t, p)
	params := testParams("evt_1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := tr.Intercept(ctx, "evt_1", params); err != nil {
		t.Fatal(err)
	}
	if params.Event.Tool.Name != "Bash" {
		t.Fatal("the policy changed the chain's event in place")
	}
}

func TestInProcessObserveAndClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := &testPolicy{intercept: func(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
		return ahp.NoEffects(), nil
	}}
	tr, err := New(inProcessBackend("test", `{}`), Options{Policies: map[string]PolicyFactory{
		"test": func(json.RawMessage) (ahp.Interceptor, error) { return p, nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tr.Observe(ctx, testObserveParams("obs_1")); err != nil {
		t.Fatal(err)
	}
	if p.observed.Load() != 1 {
		t.Fatal("the policy's Observe was not called")
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if !p.closed.Load() {
		t.Fatal("Close did not close the policy")
	}
	if _, err := tr.Intercept(ctx, "evt_1", testParams("evt_1")); err == nil {
		t.Fatal("Intercept after Close succeeded")
	}
}

func TestInProcessNew(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		factory PolicyFactory
	}{
		{"unknown policy", nil},
		{"factory error", func(json.RawMessage) (ahp.Interceptor, error) { return nil, errors.New("bad config") }},
		{"factory panic", func(json.RawMessage) (ahp.Interceptor, error) { panic("bad config") }},
		{"no interceptor", func(json.RawMessage) (ahp.Interceptor, error) { return nil, nil }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			policies := map[string]PolicyFactory{}
			if tc.factory != nil {
				policies["p"] = tc.factory
			}
			if _, err := New(inProcessBackend("p", `{}`), Options{Policies: policies}); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestNewRejectsUnusableBackends(t *testing.T) {
	for _, tc := range []struct {
		desc string
		tr   registration.Transport
	}{
		{"unknown transport", registration.Transport{Type: "carrier-pigeon"}},
		{"http without url", registration.Transport{Type: registration.TransportHTTP}},
		{"http with another scheme", registration.Transport{Type: registration.TransportHTTP, URL: "ftp://127.0.0.1/x"}},
		{"stdio without command", registration.Transport{Type: registration.TransportStdio, Lifecycle: registration.LifecyclePerEvent}},
		{"stdio without lifecycle", registration.Transport{Type: registration.TransportStdio, Command: "x"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := New(registration.Backend{ID: "test.x", Transport: tc.tr}, Options{}); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

// readerPolicy is a testPolicy that declares itself an EventReader.
type readerPolicy struct{ *testPolicy }

func (readerPolicy) ReadsEventOnly() {}

// A policy gets its own copy of the event, which it may write without the chain seeing
// it; an EventReader gets the chain's own event, uncopied.
func TestInProcessCopiesTheEventUnlessTheReaderDeclaresItself(t *testing.T) {
	ev := &ahp.Event{ID: "evt_1", Type: ahp.EventModelRequestBefore, Items: []ahp.Message{{ID: "m", Role: ahp.RoleUser,
		Parts: []ahp.Part{ahp.TextPart("p", "hello")}}}}
	var got *ahp.Event
	p := &testPolicy{intercept: func(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
		got = req.Params.Event
		return &ahp.InterceptResult{ProtocolVersion: ahp.ProtocolVersion}, nil
	}}
	for _, reader := range []bool{false, true} {
		var pol ahp.Interceptor = p
		if reader {
			pol = readerPolicy{p}
		}
		tr := mustNew(t, inProcessBackend("test", `{}`), Options{Policies: map[string]PolicyFactory{
			"test": func(json.RawMessage) (ahp.Interceptor, error) { return pol, nil },
		}})
		if _, err := tr.Intercept(context.Background(), "evt_1", &ahp.InterceptParams{ProtocolVersion: ahp.ProtocolVersion, Event: ev}); err != nil {
			t.Fatal(err)
		}
		switch {
		case got == nil || got.ID != "evt_1":
			t.Fatalf("reader=%v: the policy got %v", reader, got)
		case reader && (got != ev || &got.Items[0] != &ev.Items[0]):
			t.Error("the reader got a copy")
		case !reader && (got == ev || &got.Items[0].Parts[0] == &ev.Items[0].Parts[0]):
			t.Error("a policy that is no reader got the chain's own event")
		}
		_ = tr.Close()
	}
}

// boundedPolicy is a testPolicy that declares itself bounded.
type boundedPolicy struct{ *testPolicy }

func (boundedPolicy) EndsByDeadline() {}

func goroutineID() string {
	var buf [64]byte
	s := string(buf[:runtime.Stack(buf[:], false)])
	return strings.Fields(s)[1]
}

// A bounded policy runs on the caller's goroutine, any other on one of its own; a bounded
// policy's panic is still a policy failure, and an answer it gives past the deadline is
// not used. Control: the unbounded policy runs elsewhere.
func TestInProcessBoundedPolicyRunsOnTheCallersGoroutine(t *testing.T) {
	ev := &ahp.Event{ID: "evt_1", Type: ahp.EventToolBefore}
	var ran string
	var behave func(ctx context.Context)
	p := &testPolicy{intercept: func(ctx context.Context, _ *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
		ran = goroutineID()
		if behave != nil {
			behave(ctx)
		}
		return &ahp.InterceptResult{ProtocolVersion: ahp.ProtocolVersion}, nil
	}}
	call := func(pol ahp.Interceptor, ctx context.Context) error {
		tr := mustNew(t, inProcessBackend("test", `{}`), Options{Policies: map[string]PolicyFactory{
			"test": func(json.RawMessage) (ahp.Interceptor, error) { return pol, nil },
		}})
		defer tr.Close()
		_, err := tr.Intercept(ctx, "evt_1", &ahp.InterceptParams{ProtocolVersion: ahp.ProtocolVersion, Event: ev})
		return err
	}
	if err := call(boundedPolicy{p}, context.Background()); err != nil || ran != goroutineID() {
		t.Fatalf("bounded: err %v, ran on goroutine %s, caller %s", err, ran, goroutineID())
	}
	if err := call(p, context.Background()); err != nil || ran == goroutineID() {
		t.Fatalf("control: err %v, the unbounded policy ran on the caller's goroutine", err)
	}
	behave = func(context.Context) { panic("boom") }
	var te *Error
	if err := call(boundedPolicy{p}, context.Background()); !errors.As(err, &te) || te.Kind != KindPolicy {
		t.Fatalf("a bounded policy's panic gave %v", err)
	}
	behave = func(ctx context.Context) { <-ctx.Done() }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := call(boundedPolicy{p}, ctx); !errors.As(err, &te) || te.Kind != KindTimeout {
		t.Fatalf("an answer past the deadline gave %v", err)
	}
}
