package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/metrics"
	"github.com/hookproxy/hookproxy/proxy"
)

// A pinning report becomes an audit line with its event type (not "unknown") and its
// changes, and counts hookproxy_tool_definition_changes_total per kind; it is no settled
// boundary, so hookproxy_boundary_decisions_total does not count it (the control: a
// tool.before record does).
func TestPinningReportAuditedAndCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.NewWriter(config.Audit{Path: path, QueueSize: 16, OnFull: config.AuditOnWait, WaitTimeout: time.Second}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	b := &Boundaries{Audit: w, Metrics: m}
	ev := &ahp.Event{ID: "evt_td", Type: ahp.EventToolDefinitions}
	b.OnBoundary(context.Background(), proxy.BoundaryRecord{Time: time.Now(), Route: "/mcp", EventID: ev.ID,
		EventType: ahp.EventToolDefinitions, Enforcement: enforcement.Forwarded, Event: ev,
		ToolDefinitions: []ahp.ToolDefinitionChange{
			{Tool: "add", Kind: "changed", Digest: "sha256:aa", Pinned: "sha256:bb", Action: "strip"},
			{Tool: "add", Kind: "poisoned", Poison: []string{"hidden_tag"}, Action: "warn"}}})
	b.OnBoundary(context.Background(), proxy.BoundaryRecord{Time: time.Now(), EventID: "evt_tb", EventType: ahp.EventToolBefore,
		Enforcement: enforcement.Forwarded, Event: &ahp.Event{ID: "evt_tb", Type: ahp.EventToolBefore}})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	line := strings.SplitN(string(raw), "\n", 2)[0]
	for _, want := range []string{`"eventType":"hookproxy.tool_definitions"`, `"toolDefinitions":[{"tool":"add","kind":"changed"`, `"poison":["hidden_tag"]`} {
		if !strings.Contains(line, want) {
			t.Errorf("audit line lacks %s: %s", want, line)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`hookproxy_tool_definition_changes_total{kind="changed"} 1`,
		`hookproxy_tool_definition_changes_total{kind="poisoned"} 1`,
		`hookproxy_tool_definition_changes_total{kind="renamed"} 0`,
		`hookproxy_boundary_decisions_total{event="tool.before",outcome="forwarded"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, `hookproxy_boundary_decisions_total{event="unknown"`) {
		t.Error("the pinning report was counted as a boundary")
	}
}
