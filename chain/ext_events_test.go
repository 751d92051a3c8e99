package chain

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// The tool-definitions extension event reaches the observer that names it, and no
// other: not one subscribed to "*" or to a family, not an interceptor. The control is a
// catalogue event, which the "*" observer does receive.
func TestExtensionEventOnlyToItsSubscribers(t *testing.T) {
	named, star, fam, icp := &fakeTransport{}, &fakeTransport{}, &fakeTransport{}, &fakeTransport{}
	doc := docOf(
		fakeBackend("com.named", obsv(ahp.EventToolDefinitions)),
		fakeBackend("com.star", obsv("*")),
		fakeBackend("com.fam", obsv("hookproxy.*")),
		fakeBackend("com.icp", icpt("fail-open", 100, "*")),
	)
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.named": named, "com.star": star, "com.fam": fam, "com.icp": icp}, Options{})
	if in, ob := c.Subscribed(ahp.EventToolDefinitions); in || !ob {
		t.Fatalf("Subscribed = %v, %v", in, ob)
	}
	rep, _ := json.Marshal(ahp.ToolDefinitionReport{Route: "/mcp", API: "mcp", Scope: "mcp:/mcp",
		Changes: []ahp.ToolDefinitionChange{{Tool: "add", Kind: "changed", Action: "deny"}}})
	ev := &ahp.Event{ID: "evt_td", Source: testSource, Type: ahp.EventToolDefinitions, Time: "2026-01-01T00:00:00Z",
		Extensions: map[string]json.RawMessage{ahp.ExtToolDefinitions: rep}}
	c.Observe(context.Background(), ev)
	if named.observeCount() != 1 || star.observeCount() != 0 || fam.observeCount() != 0 || icp.observeCount()+icp.interceptCount() != 0 {
		t.Fatalf("deliveries named=%d star=%d family=%d icp=%d", named.observeCount(), star.observeCount(), fam.observeCount(), icp.observeCount()+icp.interceptCount())
	}
	if got := string(named.observed()[0].Event.Extensions[ahp.ExtToolDefinitions]); !strings.Contains(got, `"kind":"changed"`) {
		t.Fatalf("the report did not arrive: %s", got)
	}
	c.Observe(context.Background(), turnEnd("evt_te"))
	if star.observeCount() != 1 {
		t.Fatal("control: the \"*\" observer did not receive a catalogue event")
	}
}

func TestExtensionEventRegistration(t *testing.T) {
	doc := func(mode string) []byte {
		sub := `{"events":["` + ahp.EventToolDefinitions + `"],"mode":"` + mode + `","content":{"default":"body"}`
		if mode == "intercept" {
			sub += `,"timeoutMs":100,"failurePolicy":"fail-open"`
		}
		return []byte(`{"protocolVersion":"draft","hooks":[{"id":"com.x","transport":{"type":"http","url":"http://127.0.0.1:1/"},"subscriptions":[` + sub + `}]}]}`)
	}
	if _, _, err := registration.Parse(doc("observe"), registration.Options{}); err != nil {
		t.Fatalf("observe subscription refused: %v", err)
	}
	_, _, err := registration.Parse(doc("intercept"), registration.Options{})
	if err == nil || !strings.Contains(err.Error(), "observe-only hookproxy extension event") {
		t.Fatalf("intercept subscription: %v", err)
	}
}
