package shadow

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/metrics"
)

// TestFloodDropsAndCounts: the shadow chain's one worker is held by a backend blocked on
// a channel; 50 settled boundaries arrive. Every Settled call returns at once (gated: all
// 50 return while the backend is still blocked), the queue keeps its 4, the other 45 are
// dropped and counted by hookproxy_shadow_dropped_total, and once the backend is released
// the 5 kept events are settled.
func TestFloodDropsAndCounts(t *testing.T) {
	release := make(chan struct{})
	var entered, finished atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		defer finished.Add(1)
		<-release
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"draft","effects":[]}}`))
	}))
	defer backend.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	doc, _, err := registration.Parse([]byte(`{"protocolVersion":"draft","hooks":[{"id":"org.example.shadow","transport":{"type":"http","url":"`+
		backend.URL+`/ahp"},"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":60000,"failurePolicy":"fail-open","content":{"default":"metadata"}}]}]}`),
		registration.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chain.New(doc, chain.Options{ObserveTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	m := metrics.New()
	tap := New(Options{Chain: ch, Metrics: m, QueueSize: 4, Workers: 1})

	caps := ahp.Capabilities{Effects: []string{ahp.EffectDeny}}
	tapped := func(i int) *chain.Tapped {
		ev := &ahp.Event{ID: "e" + string(rune('A'+i)), Source: "urn:t", Type: ahp.EventToolBefore, Time: "2026-01-01T00:00:00Z",
			Session: &ahp.Session{ID: "s"}, Tool: &ahp.Tool{Name: "Bash", Input: []byte(`{"command":"ls"}`)}}
		return &chain.Tapped{Event: ev, Capabilities: &caps, Settlement: &chain.Settlement{Event: ev, Permission: ahp.PermissionNone, Flow: ahp.FlowNone}}
	}
	tap.Settled(tapped(0))
	deadline := time.Now().Add(10 * time.Second)
	for entered.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the shadow backend was never called")
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < 50; i++ {
		tap.Settled(tapped(i)) // must not wait for the blocked backend
	}
	if finished.Load() != 0 {
		t.Fatal("the backend returned before release; the gate proves nothing")
	}
	if got := counter(t, m, "hookproxy_shadow_dropped_total"); got != 45 {
		t.Fatalf("dropped %v, want 45 (50 - 1 in flight - 4 queued)", got)
	}
	close(release)
	tap.Close()
	if got := entered.Load(); got != 5 {
		t.Fatalf("the shadow backend saw %d events, want 5", got)
	}
	if got := counter(t, m, "hookproxy_shadow_decisions_total"); got != 5 {
		t.Fatalf("shadow decisions %v, want 5", got)
	}
}

func counter(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, mm := range mf.GetMetric() {
				total += mm.GetCounter().GetValue()
			}
		}
	}
	return total
}
