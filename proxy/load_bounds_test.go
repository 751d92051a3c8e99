package proxy

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/policies"
)

// budgetWatch is an in-process backend that runs a built-in policy and records, per
// request, the work the request's budget counted.
type budgetWatch struct {
	inner ahp.Interceptor
	mu    sync.Mutex
	spent map[*transport.WorkBudget]int64
}

func (w *budgetWatch) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	res, err := w.inner.Intercept(ctx, req)
	if b := transport.WorkBudgetFrom(ctx); b != nil {
		w.mu.Lock()
		w.spent[b] = b.Spent()
		w.mu.Unlock()
	}
	return res, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLoadPolicyWorkAndHeldBytesStayBounded is the load run of the two bounds, sized for
// CI (a few seconds): 16 concurrent crafted 2 MiB prompts through secrets and pii are all
// refused with hookproxy.limits.policy_work, and no request's counted work passes its
// budget by more than one check step; 8 concurrent streams each holding a 300 KiB call
// against a 1 MiB limits.maxHeldBytes never hold more than the limit, the streams that do
// not fit end with the in-stream error, and nothing stays counted afterwards. The CPU the
// prompts cost is logged (not asserted: the machine is shared).
func TestLoadPolicyWorkAndHeldBytesStayBounded(t *testing.T) {
	const prompts, budget = 16, 64 << 20
	crafted := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("eyJ-", (2<<20)/4) + `"}]}`
	up := newUpstream(t, jsonResponder(200, chatText))
	watch := &budgetWatch{spent: map[*transport.WorkBudget]int64{}}
	secrets, err := policies.NewSecrets(policies.SecretsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	watch.inner = secrets
	doc := &registration.Document{ProtocolVersion: ahp.ProtocolVersion}
	for _, id := range []string{"watched-secrets", "pii"} {
		policy := id
		if id == "watched-secrets" {
			policy = "watched"
		}
		doc.Hooks = append(doc.Hooks, registration.Backend{ID: id,
			Transport: registration.Transport{Type: registration.TransportInProcess, Policy: policy},
			Subscriptions: []registration.Subscription{{Events: []string{ahp.EventModelRequestBefore},
				Mode: registration.ModeIntercept, TimeoutMs: 60000, FailurePolicy: registration.FailClosed,
				Content: map[string]string{"default": "body"}}}})
	}
	factories := policies.Factories()
	factories["watched"] = func(json.RawMessage) (ahp.Interceptor, error) { return watch, nil }
	ch, err := chain.New(doc, chain.Options{Source: "urn:hookproxy:test", ObserveTimeout: 2 * time.Second, Policies: factories})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	cfg := testConfig(up.URL)
	cfg.Limits.MaxPolicyScanBytes = budget
	px := startProxy(t, cfg, ch, Options{})

	before := cpuTime()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, got := post(t, px.URL+chatPath, crafted, nil)
			if status != 200 && strings.Contains(string(got), policies.WorkBudgetCode) {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	cpu := cpuTime() - before
	if refused.Load() != prompts || len(up.requests()) != 0 {
		t.Fatalf("%d of %d crafted prompts refused, %d reached the upstream", refused.Load(), prompts, len(up.requests()))
	}
	if len(watch.spent) != prompts {
		t.Fatalf("%d budgets seen for %d requests", len(watch.spent), prompts)
	}
	for _, spent := range watch.spent {
		if spent > budget+(1<<20) {
			t.Errorf("a request's policy work went on past its budget: %d of %d", spent, budget)
		}
	}
	t.Logf("LOAD policy work: %d crafted 2 MiB prompts refused, %v of CPU in all", prompts, cpu)

	// Held bytes: 8 streams of 300 KiB calls against 1 MiB.
	const streams, held = 8, 1 << 20
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	hup := heldCallUpstream(t, 300<<10, release)
	hcfg := testConfig(hup.URL)
	hcfg.Limits.MaxResponseBytes = held
	hcfg.Limits.MaxHeldBytes = held
	s, err := New(hcfg, newTestChain(t, &fakePolicy{}, intercept("tool.before")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	hpx := httptest.NewServer(s)
	t.Cleanup(hpx.Close)
	t.Cleanup(unblock)
	var maxHeld atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // samples the server's count while the streams run
		defer close(sampled)
		for {
			if n := s.held.Load(); n > maxHeld.Load() {
				maxHeld.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var kept, failed atomic.Int64
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, got := post(t, hpx.URL+chatPath, chatStreamReq, nil)
			switch {
			case strings.Contains(string(got), `"name":"Bash"`):
				kept.Add(1)
			case strings.Contains(lastEvent(string(got)), "limits.maxHeldBytes"):
				failed.Add(1)
			}
		}()
	}
	// Every stream has either been refused or holds its call before any is released.
	for deadline := time.Now().Add(30 * time.Second); failed.Load()+s.held.Load()/(300<<10) < streams; {
		if time.Now().After(deadline) {
			t.Fatalf("streams did not settle: %d refused, %d bytes held", failed.Load(), s.held.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	unblock()
	wg.Wait()
	close(stop)
	<-sampled
	if kept.Load()+failed.Load() != streams || failed.Load() < streams-held/(300<<10) {
		t.Errorf("%d streams kept their call, %d ended at the limit, of %d", kept.Load(), failed.Load(), streams)
	}
	if maxHeld.Load() > held {
		t.Errorf("the server held %d bytes against a limit of %d", maxHeld.Load(), held)
	}
	hpx.Close()
	if n := s.held.Load(); n != 0 {
		t.Errorf("%d bytes still counted as held after every stream ended", n)
	}
	t.Logf("LOAD held bytes: %d streams, %d kept their call, %d ended at the limit, at most %d bytes held", streams, kept.Load(), failed.Load(), maxHeld.Load())
}
