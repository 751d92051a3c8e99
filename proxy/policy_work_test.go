package proxy

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/policies"
)

// builtinChain registers the named built-in policies, each as its own in-process backend
// intercepting model.request.before (fail closed).
func builtinChain(t testing.TB, timeoutMs int, names ...string) *chain.Chain {
	t.Helper()
	doc := &registration.Document{ProtocolVersion: ahp.ProtocolVersion}
	for _, name := range names {
		doc.Hooks = append(doc.Hooks, registration.Backend{ID: name,
			Transport: registration.Transport{Type: registration.TransportInProcess, Policy: name},
			Subscriptions: []registration.Subscription{{Events: []string{ahp.EventModelRequestBefore},
				Mode: registration.ModeIntercept, TimeoutMs: timeoutMs, FailurePolicy: registration.FailClosed,
				Content: map[string]string{"default": "body"}}}})
	}
	ch, err := chain.New(doc, chain.Options{Source: "urn:hookproxy:test", ObserveTimeout: 2 * time.Second, Policies: policies.Factories()})
	if err != nil {
		t.Fatalf("chain.New: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// TestCraftedPromptIsRefusedByThePolicyWorkBudget: a 2 MiB prompt built to make the
// secrets scanner re-read every window is refused with hookproxy.limits.policy_work once
// the request's work budget (limits.maxPolicyScanBytes) is spent, well before the
// backend's deadline, and never reaches the upstream. Controls: the same body sent straight
// to the recording upstream arrives there, and 2 MiB of prose passes through the proxy
// under the same budget.
func TestCraftedPromptIsRefusedByThePolicyWorkBudget(t *testing.T) {
	crafted := strings.Repeat("eyJ-", (2<<20)/4)
	prose := strings.Repeat("The build passed; the report lists 3 warnings and no errors. ", (2<<20)/62)
	body := func(prompt string) string {
		return `{"model":"gpt-4o","messages":[{"role":"user","content":` + jsonString(prompt) + `}]}`
	}
	up := newUpstream(t, jsonResponder(200, chatText))
	// Control: straight to the upstream, the crafted prompt arrives.
	post(t, up.URL+"/v1/chat/completions", body(crafted), nil)
	if got := up.requests(); len(got) != 1 || !bytes.Contains(got[0].Body, []byte("eyJ-eyJ-")) {
		t.Fatalf("control: the upstream did not receive the prompt")
	}

	cfg := testConfig(up.URL)
	cfg.Limits.MaxPolicyScanBytes = 64 << 20
	// A deadline far beyond what the budget allows: the refusal must come from the budget.
	px := startProxy(t, cfg, builtinChain(t, 60000, policies.PolicySecrets, policies.PolicyPII), Options{})
	status, _, got := post(t, px.URL+chatPath, body(crafted), nil)
	if status == 200 || !strings.Contains(string(got), policies.WorkBudgetCode) {
		t.Fatalf("crafted prompt: %d %.300s", status, got)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("the refused prompt reached the upstream (%d requests)", n)
	}
	// Control: a prompt of the same size that is cheap to scan passes.
	status, _, got = post(t, px.URL+chatPath, body(prose), nil)
	if status != 200 || len(up.requests()) != 2 {
		t.Fatalf("prose: %d %.300s", status, got)
	}
}
