package app

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/proxy"
)

// TestConsoleRedactionMasked: two secrets removed from one message are shown as two
// masked stretches, the words between them readable, and neither secret appears anywhere
// in the console's decision — not in the redaction, the tool input or the denial reason
// quoting it. Control: both secrets are in the text the chain received.
func TestConsoleRedactionMasked(t *testing.T) {
	const a, b = "Zq8vR2kLm9Xw4Tn7Pc3Hs6", "uYt5Re4Wq3Ed2Rf1Tg0Yh9"
	text := func(s string) *string { return &s }
	before := "first " + a + " then the words between them " + b + " end"
	after := "first [REDACTED:generic_secret:1] then the words between them [REDACTED:generic_secret:2] end"
	orig := &ahp.Event{Type: "tool.before", Items: []ahp.Message{{ID: "m1", Role: "user", Parts: []ahp.Part{{Text: text(before)}}}},
		Tool: &ahp.Tool{Name: "Bash", Input: []byte(`{"command":"echo ` + a + `"}`)}}
	eff := &ahp.Event{Type: "tool.before", Items: []ahp.Message{{ID: "m1", Role: "user", Parts: []ahp.Part{{Text: text(after)}}}},
		Tool: &ahp.Tool{Name: "Bash", Input: []byte(`{"command":"echo [REDACTED:generic_secret:1]"}`)}}
	if !strings.Contains(*orig.Items[0].Parts[0].Text, a) || !strings.Contains(string(orig.Tool.Input), a) {
		t.Fatal("control: the secrets are not in the original")
	}
	d := ConsoleDecision("req1", proxy.BoundaryRecord{EventType: "tool.before", EventID: "e1", Original: orig, Event: eff,
		Denial: nil, Enforcement: "rewritten"}, nil)
	if len(d.Redactions) != 2 {
		t.Fatalf("redactions %+v, want the message and the tool input", d.Redactions)
	}
	r := d.Redactions[0]
	if strings.Count(r.Before, "chars removed]") != 2 || !strings.Contains(r.Before, "then the words between them") {
		t.Errorf("before = %q: want two masked stretches and the words between readable", r.Before)
	}
	if !strings.Contains(r.After, "[REDACTED:generic_secret:1]") {
		t.Errorf("after = %q", r.After)
	}
	all := r.Before + r.After + d.Redactions[1].Before + d.Redactions[1].After + d.ToolInput
	for _, s := range []string{a, b} {
		if strings.Contains(all, s) {
			t.Errorf("the console decision shows %q: %s", s, all)
		}
	}
}

// TestConsoleShadowAndPinsDecisions: a shadow settlement becomes a window decision with
// the live outcome beside the shadow's, its diff and its rule, and a credential quoted in
// the shadow backend's denial reason is scrubbed (control: the record carries it); a
// pinning record carries its changes and the scope from the event's report.
func TestConsoleShadowAndPinsDecisions(t *testing.T) {
	const key = "sk-proj-SHADOWconsoleKEY0123456789abcdef"
	rec := audit.Record{EventID: "ev1", EventType: "tool.before", SessionID: "ses1", Tool: "Bash", Interceptors: []audit.Interceptor{},
		Shadow: &audit.Shadow{Outcome: enforcement.Refused, Differs: true, Diff: "would refuse the tool call",
			Denial:       &audit.Denial{Code: "strict.no-bash", Reason: "no shell, not even with " + key},
			Interceptors: []audit.Interceptor{{BackendID: "strict", Outcome: "accepted", Effects: []audit.EffectType{"deny"}}}}}
	if !strings.Contains(string(rec.Shadow.Denial.Reason), key) {
		t.Fatal("control: the reason does not quote the key")
	}
	d := ConsoleShadowDecision(rec, enforcement.Forwarded, nil)
	sh := d.Shadow
	if sh == nil || sh.LiveOutcome != "forwarded" || sh.Outcome != "refused" || !sh.Differs || sh.Diff != "would refuse the tool call" ||
		sh.Denial == nil || sh.Denial.Code != "strict.no-bash" || len(sh.Interceptors) != 1 || sh.Interceptors[0].Backend != "strict" ||
		d.Session != "ses1" || d.EventType != "tool.before" || d.Tool != "Bash" {
		t.Fatalf("shadow decision %+v %+v", d, sh)
	}
	if strings.Contains(sh.Denial.Reason, key) || !strings.Contains(sh.Denial.Reason, "no shell") {
		t.Errorf("shadow denial reason %q: want it scrubbed", sh.Denial.Reason)
	}

	rep, _ := json.Marshal(ahp.ToolDefinitionReport{Route: "/mcp/files", API: "mcp", Scope: "mcp:/mcp/files"})
	pd := ConsoleDecision("req2", proxy.BoundaryRecord{EventType: ahp.EventToolDefinitions, EventID: "e2", Route: "/mcp/files",
		Enforcement: enforcement.Forwarded, Event: &ahp.Event{Extensions: map[string]json.RawMessage{ahp.ExtToolDefinitions: rep}},
		ToolDefinitions: []ahp.ToolDefinitionChange{{Tool: "add", Kind: "poisoned", Poison: []string{"hidden_tag"}, Action: "deny"}}}, nil)
	if pd.Scope != "mcp:/mcp/files" || len(pd.ToolDefinitions) != 1 || pd.ToolDefinitions[0].Tool != "add" ||
		pd.ToolDefinitions[0].Poison[0] != "hidden_tag" || pd.ToolDefinitions[0].Action != "deny" {
		t.Fatalf("pinning decision %+v", pd)
	}
}
