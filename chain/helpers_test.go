package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// childBackendArg makes the test binary act as a stdio backend. The mode travels in argv:
// stdio backends get a minimal environment (PATH and HOME only), so an environment switch
// would never reach the child.
const childBackendArg = "hookproxy-chain-test-backend"

// testObserveTimeout is the observation bound the tests pass where the bound itself is
// not under test (New requires one; the configuration's default is the assembly's).
const testObserveTimeout = 5 * time.Second

// TestMain runs the test binary as one of the stdio backends when argv asks for it. The
// backends end with syscall.Exit, which skips the runtime's exit hooks: a race-enabled
// binary would otherwise pause a second at a clean exit (the race runtime's
// atexit_sleep_ms, which GORACE cannot lower through the backends' minimal environment),
// and the chain waits for every per_event backend to exit; the interop scenarios took
// ten times longer under -race. The backends are single-goroutine fakes: nothing in them
// can race, so the detector's exit status is not missed.
func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && os.Args[1] == interopBackendArg {
		syscall.Exit(runInteropBackend(os.Args[2:]))
	}
	if len(os.Args) >= 2 && os.Args[1] == interopChainArg {
		syscall.Exit(runInteropChainBackend(os.Args[2:]))
	}
	if len(os.Args) >= 2 && os.Args[1] == interopFramingArg {
		syscall.Exit(runInteropFraming(os.Args[2:]))
	}
	if len(os.Args) >= 3 && os.Args[1] == childBackendArg {
		syscall.Exit(runChildBackend(os.Args[2], os.Args[3:]))
	}
	goleak.VerifyTestMain(m)
}

// ---- fake transports ----

// fakeTransport is an in-memory backend. It records what it was sent, as the JSON a
// remote backend would have received, and answers through onIntercept (default: no
// effects).
type fakeTransport struct {
	onIntercept func(ctx context.Context, n int, id string, p *ahp.InterceptParams) ([]byte, error)
	onObserve   func(ctx context.Context, p *ahp.ObserveParams) error

	mu         sync.Mutex
	intercepts []ahp.InterceptParams
	observes   []ahp.ObserveParams
	closed     bool
}

var _ transport.Transport = (*fakeTransport)(nil)

func (f *fakeTransport) Intercept(ctx context.Context, id string, p *ahp.InterceptParams) ([]byte, error) {
	var cp ahp.InterceptParams
	mustRoundTrip(p, &cp)
	f.mu.Lock()
	f.intercepts = append(f.intercepts, cp)
	n := len(f.intercepts)
	f.mu.Unlock()
	if f.onIntercept != nil {
		return f.onIntercept(ctx, n, id, p)
	}
	return reply(id), nil
}

func (f *fakeTransport) Observe(ctx context.Context, p *ahp.ObserveParams) error {
	var cp ahp.ObserveParams
	mustRoundTrip(p, &cp)
	f.mu.Lock()
	f.observes = append(f.observes, cp)
	f.mu.Unlock()
	if f.onObserve != nil {
		return f.onObserve(ctx, p)
	}
	return nil
}

func (f *fakeTransport) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

func (f *fakeTransport) interceptCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.intercepts)
}

func (f *fakeTransport) observeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.observes)
}

func (f *fakeTransport) interceptAt(i int) ahp.InterceptParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.intercepts[i]
}

func (f *fakeTransport) observed() []ahp.ObserveParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ahp.ObserveParams(nil), f.observes...)
}

func mustRoundTrip(in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err) // test helper: our own values always encode
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
}

// respond returns an onIntercept that answers every call with effects.
func respond(effects ...string) func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
	return func(_ context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
		return reply(id, effects...), nil
	}
}

// reply builds a hooks/intercept response frame with the given raw effects.
func reply(id string, effects ...string) []byte {
	rid, _ := json.Marshal(id)
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"draft","effects":[%s]}}`, rid, strings.Join(effects, ",")))
}

// newFakeChain builds a chain whose backends are the given fakes (by backend id).
func newFakeChain(t testing.TB, doc *registration.Document, fakes map[string]*fakeTransport, opts Options) *Chain {
	t.Helper()
	orig := newTransport
	newTransport = func(b registration.Backend, _ Options) (transport.Transport, error) {
		f, ok := fakes[b.ID]
		if !ok {
			return nil, fmt.Errorf("no fake for %s", b.ID)
		}
		return f, nil
	}
	if opts.ObserveTimeout == 0 {
		opts.ObserveTimeout = testObserveTimeout
	}
	c, err := New(doc, opts)
	newTransport = orig
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ---- registration builders ----

var bodyAll = map[string]string{"default": "body"}

func icpt(policy string, timeoutMs int, events ...string) registration.Subscription {
	return registration.Subscription{Events: events, Mode: registration.ModeIntercept, TimeoutMs: timeoutMs, FailurePolicy: policy, Content: bodyAll}
}

func obsv(events ...string) registration.Subscription {
	return registration.Subscription{Events: events, Mode: registration.ModeObserve, Content: bodyAll}
}

func withContent(s registration.Subscription, content map[string]string) registration.Subscription {
	s.Content = content
	return s
}

func fakeBackend(id string, subs ...registration.Subscription) registration.Backend {
	return registration.Backend{ID: id, Transport: registration.Transport{Type: "fake"}, Subscriptions: subs}
}

func docOf(backends ...registration.Backend) *registration.Document {
	return &registration.Document{ProtocolVersion: ahp.ProtocolVersion, Hooks: backends}
}

// ---- events ----

const testSource = "urn:hookproxy:test"

func textMsg(id, role, text string) ahp.Message {
	return ahp.Message{ID: id, Role: role, Parts: []ahp.Part{ahp.TextPart(id+".p0", text)}}
}

func toolBefore(id string) *ahp.Event {
	return &ahp.Event{
		ID: id, Source: testSource, Type: ahp.EventToolBefore, Time: "2026-09-15T12:00:03Z",
		Session: &ahp.Session{ID: "sess_1", Synthesized: true},
		Call:    &ahp.Call{ID: "call_1"},
		Tool:    &ahp.Tool{Name: "Bash", Input: json.RawMessage(`{"command":"git push --force","opts":{"a":1}}`), Origin: ahp.OriginNative},
		Path:    "hookproxy.test",
	}
}

func modelRequest(id string, items ...ahp.Message) *ahp.Event {
	if items == nil {
		items = []ahp.Message{textMsg("m0", ahp.RoleSystem, "You are a coding agent."), textMsg("m1", ahp.RoleUser, "Push my branch.")}
	}
	return &ahp.Event{
		ID: id, Source: testSource, Type: ahp.EventModelRequestBefore, Time: "2026-09-15T12:00:00Z",
		Session: &ahp.Session{ID: "sess_1"},
		Model:   &ahp.Model{ID: "claude-test", Provider: "anthropic"},
		Attempt: &ahp.Attempt{ID: id + ".a1", Number: 1},
		Params:  json.RawMessage(`{"max_tokens":16}`),
		Items:   items,
	}
}

func toolAfter(id string) *ahp.Event {
	return &ahp.Event{
		ID: id, Source: testSource, Type: ahp.EventToolAfter, Time: "2026-09-15T12:00:09Z",
		Call:      &ahp.Call{ID: "call_1"},
		Tool:      &ahp.Tool{Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`), Origin: ahp.OriginNative},
		Path:      "hookproxy.test",
		Outcome:   "ok",
		Execution: &ahp.Execution{Status: ahp.ExecutionExecuted},
		Items:     []ahp.Message{textMsg("tr1", ahp.RoleTool, "README.md")},
	}
}

func turnFinish(id string, count int) *ahp.Event {
	return &ahp.Event{
		ID: id, Source: testSource, Type: ahp.EventTurnFinishBefore, Time: "2026-09-15T12:00:10Z",
		Turn:              &ahp.Turn{ID: "turn_1"},
		Outcome:           "completed",
		ContinuationCount: &count,
		Items:             []ahp.Message{textMsg("a1", ahp.RoleAssistant, "Done.")},
	}
}

func turnEnd(id string) *ahp.Event {
	zero := 0
	return &ahp.Event{
		ID: id, Source: testSource, Type: ahp.EventTurnEnd, Time: "2026-09-15T12:00:11Z",
		Turn: &ahp.Turn{ID: "turn_1"}, Outcome: "completed", ContinuationCount: &zero,
		Items: []ahp.Message{textMsg("a1", ahp.RoleAssistant, "Done.")},
	}
}

// hostCaps is what a host could enforce at the event's boundary: its full bound, with a
// continuation allowance where continue exists.
func hostCaps(eventType string, remaining int) ahp.Capabilities {
	c := *fullBoundCaps(eventType)
	if c.Flow != nil {
		for _, op := range c.Flow.Operations {
			if op == ahp.OpContinue {
				zero := 0
				c.Flow.RemainingContinuations = &remaining
				c.Flow.ContinuationCount = &zero
			}
		}
	}
	c.Elicitation = nil
	return c
}

func intPtr(n int) *int { return &n }
