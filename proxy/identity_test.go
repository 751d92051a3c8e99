package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// dedupPolicy de-duplicates deliveries on event.id, as the protocol recommends a backend
// may: a repeated id gets the decision already taken.
type dedupPolicy struct {
	mu   sync.Mutex
	seen map[string][]ahp.Effect
	ids  []string
}

func (p *dedupPolicy) Intercept(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	ev := req.Params.Event
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, ev.ID)
	res := ahp.NoEffects()
	if effs, ok := p.seen[ev.ID]; ok {
		if effs != nil {
			res.Effects = effs
		}
		return res, nil
	}
	var effs []ahp.Effect
	if ev.Type == ahp.EventToolBefore && strings.Contains(string(ev.Tool.Input), "rm -rf") {
		effs = []ahp.Effect{{Type: ahp.EffectDeny, Reason: "destructive"}}
	}
	p.seen[ev.ID] = effs
	if effs != nil {
		res.Effects = effs
	}
	return res, nil
}

func (p *dedupPolicy) Observe(context.Context, *ahp.ObserveParams) error { return nil }

func callResponse(args string) string {
	return `{"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"Bash","arguments":` + jsonString(args) + `}}]},"finish_reason":"tool_calls"}]}`
}

func TestToolEventIDsNeverCollideAcrossSessions(t *testing.T) {
	// Two sessions of a local model server both number their call call_1: the backend's
	// allow of `echo hi` must not be replayed onto `rm -rf /`.
	up := newUpstream(t, jsonResponder(200, callResponse(`{"command":"echo hi"}`)))
	pol := &dedupPolicy{seen: map[string][]ahp.Effect{}}
	px := startProxy(t, testConfig(up.URL), newTestChainWith(t, pol, intercept("tool.before")), Options{})
	req := `{"model":"llama","messages":[{"role":"user","content":"go"}]}`
	_, _, got := post(t, px.URL+chatPath, req, map[string]string{"X-Hookproxy-Session": "A"})
	if !strings.Contains(string(got), "echo hi") {
		t.Fatalf("session A: %s", got)
	}
	up.respond = jsonResponder(200, callResponse(`{"command":"rm -rf /"}`))
	_, h, got := post(t, px.URL+chatPath, req, map[string]string{"X-Hookproxy-Session": "B"})
	if m := decodeChat(t, h, got); len(m.ToolCalls) != 0 {
		t.Fatalf("session B: the destructive call got the earlier allow: %s", got)
	}
	// Control: a retry of the same request in the same session has the same identity, so
	// the de-duplication the backend does is real.
	_, _, _ = post(t, px.URL+chatPath, req, map[string]string{"X-Hookproxy-Session": "B"})
	if len(pol.ids) != 3 || pol.ids[1] != pol.ids[2] || pol.ids[0] == pol.ids[1] {
		t.Fatalf("event ids %q", pol.ids)
	}
}
