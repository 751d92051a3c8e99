package policies

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// withAsk is the proxy's tool.before advertisement when an approval path exists.
func withAsk(eventType string) *ahp.Capabilities {
	c := proxyCaps(eventType)
	c.Effects = append(c.Effects, ahp.EffectAsk)
	return c
}

func TestToolsAskAction(t *testing.T) {
	p := toolsFromJSON(t, `{"deny": [
		{"name": "push", "tool": "Bash", "command": "git", "inputPattern": "push", "action": "ask"},
		{"name": "force", "tool": "Bash", "command": "git", "flags": ["-f|--force"]}]}`)
	push := toolBeforeEvent("Bash", `{"command":"git push origin main"}`)

	// With an approval path: ask, with the reason in hookproxy.ask_reason.
	res, _ := run(t, p, push, withAsk(push.Type))
	onlyEffect(t, res, ahp.EffectAsk)
	var r struct{ Reason string }
	if err := json.Unmarshal(res.Extensions["hookproxy.ask_reason"], &r); err != nil || !strings.Contains(r.Reason, "needs approval (rule push)") {
		t.Fatalf("ask reason %s (%v)", res.Extensions["hookproxy.ask_reason"], err)
	}
	// Without one (control: ask not advertised): mandatory approval fails closed.
	res, _ = run(t, p, push, proxyCaps(push.Type))
	if e := onlyEffect(t, res, ahp.EffectDeny); !strings.Contains(e.Reason, "needs approval") || !strings.Contains(e.Reason, "No approval path") {
		t.Fatalf("deny without a path: %+v", e)
	}
	// Deny wins over ask: a later deny rule that also matches denies.
	forced := toolBeforeEvent("Bash", `{"command":"git push --force origin main"}`)
	res, _ = run(t, p, forced, withAsk(forced.Type))
	if e := onlyEffect(t, res, ahp.EffectDeny); !strings.Contains(e.Reason, "rule force") {
		t.Fatalf("force push: %+v", e)
	}
	// Not matched: nothing.
	status := toolBeforeEvent("Bash", `{"command":"git status"}`)
	res, _ = run(t, p, status, withAsk(status.Type))
	noEffects(t, res)

	if _, err := NewTools(ToolsConfig{Deny: []ToolRule{{Tool: "Bash", Action: "prompt"}}}); err == nil || !strings.Contains(err.Error(), "deny[0].action") {
		t.Fatalf("bad action: %v", err)
	}
}

func TestToolsUnanalysableAsk(t *testing.T) {
	p := toolsFromJSON(t, `{"unanalysable": "ask"}`)
	ev := toolBeforeEvent("Bash", `{"command":"$CMD --all"}`)
	res, _ := run(t, p, ev, withAsk(ev.Type))
	onlyEffect(t, res, ahp.EffectAsk)
	res, _ = run(t, p, ev, proxyCaps(ev.Type))
	onlyEffect(t, res, ahp.EffectDeny)
	// unlisted: ask in allow-list mode.
	p = toolsFromJSON(t, `{"allowCommands": [{"command": "ls"}], "unlisted": "ask"}`)
	ev = toolBeforeEvent("Bash", `{"command":"make install"}`)
	res, _ = run(t, p, ev, withAsk(ev.Type))
	onlyEffect(t, res, ahp.EffectAsk)
	ev = toolBeforeEvent("Bash", `{"command":"ls -la"}`)
	res, _ = run(t, p, ev, withAsk(ev.Type))
	noEffects(t, res)
}
