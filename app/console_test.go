package app

import (
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
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
