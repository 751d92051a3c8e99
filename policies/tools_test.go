package policies

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func toolsFromJSON(t *testing.T, cfg string) ahp.Interceptor {
	t.Helper()
	p, err := Factories()[PolicyTools](json.RawMessage(cfg))
	if err != nil {
		t.Fatalf("tools config %s: %v", cfg, err)
	}
	return p
}

func TestToolsMinimalConfig(t *testing.T) {
	p := toolsFromJSON(t, `{"deny": [{"tool": "Bash", "inputPattern": "rm -rf", "reason": "Recursive deletes are not allowed here."}]}`)
	tests := []struct {
		desc, tool, input string
		deny              bool
	}{
		{"rm -rf / in Bash", "Bash", `{"command":"rm -rf /"}`, true},
		{"ls in Bash", "Bash", `{"command":"ls"}`, false},
		{"other tool with the same text", "Write", `{"path":"notes.md","content":"rm -rf"}`, false},
		{"other tool", "Read", `{"file_path":"/etc/hosts"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ev := toolBeforeEvent(tc.tool, tc.input)
			res, _ := run(t, p, ev, proxyCaps(ev.Type))
			if !tc.deny {
				noEffects(t, res)
				return
			}
			e := onlyEffect(t, res, ahp.EffectDeny)
			if e.Reason != "Recursive deletes are not allowed here." || e.Code != "hookproxy.tools.denied" {
				t.Fatalf("deny = %+v", e)
			}
		})
	}
}

func TestToolsRuleForms(t *testing.T) {
	p := toolsFromJSON(t, `{
		"deny": [
			{"name": "no-prod", "inputPattern": "prod-db", "reason": "Production is off limits.", "code": "com.example.noprod"},
			{"tool": "Bash", "argument": "command", "pattern": "^sudo\\b"},
			{"tool": "mcp__github__*", "argument": "force"},
			{"tool": "Delete*"}
		],
		"allow": ["Bash", "Read", "Write", "mcp__github__*", "Delete*"]
	}`)
	tests := []struct {
		desc, tool, input, code, reasonHas string
	}{
		{"tool omitted = any tool", "Read", `{"file_path":"/srv/prod-db/config"}`, "com.example.noprod", "Production"},
		{"argument pattern", "Bash", `{"command":"sudo apt install jq"}`, "hookproxy.tools.denied", "deny[1]"},
		{"argument pattern only on that argument", "Bash", `{"command":"echo hi","description":"sudo not needed"}`, "", ""},
		{"argument presence", "mcp__github__push", `{"branch":"main","force":true}`, "hookproxy.tools.denied", "deny[2]"},
		{"argument absent", "mcp__github__push", `{"branch":"main"}`, "", ""},
		{"glob only", "DeleteFile", `{"path":"x"}`, "hookproxy.tools.denied", "DeleteFile"},
		{"not in allow list", "WebFetch", `{"url":"https://example.com"}`, "hookproxy.tools.not_allowed", "WebFetch"},
		{"glob in any letter case", "bash", `{"command":"sudo rm x"}`, "hookproxy.tools.denied", "deny[1]"},
		{"allow list in any letter case", "bash", `{"command":"ls"}`, "", ""},
		{"allowed", "Write", `{"path":"a.txt","content":"hello"}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ev := toolBeforeEvent(tc.tool, tc.input)
			res, _ := run(t, p, ev, proxyCaps(ev.Type))
			if tc.code == "" {
				noEffects(t, res)
				return
			}
			e := onlyEffect(t, res, ahp.EffectDeny)
			if e.Code != tc.code || !strings.Contains(e.Reason, tc.reasonHas) {
				t.Fatalf("deny = %+v; want code %s, reason containing %q", e, tc.code, tc.reasonHas)
			}
		})
	}
}

// The input pattern sees canonical compact JSON: escapes decoded once, no whitespace.
func TestToolsInputPatternCanonical(t *testing.T) {
	p := toolsFromJSON(t, `{"deny": [{"inputPattern": "\"command\":\"rm -rf /\""}]}`)
	ev := toolBeforeEvent("Bash", "{ \"command\" :\n \"\\u0072m -rf \\/\" }")
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	onlyEffect(t, res, ahp.EffectDeny)
}

func TestToolsDestructiveDefaults(t *testing.T) {
	p := toolsFromJSON(t, `{"destructive": true}`)
	for input, deny := range map[string]bool{
		`{"command":"rm -rf /"}`:                               true,
		`{"command":"rm -rf ./build"}`:                         false,
		`{"command":["bash","-lc","git push -f origin main"]}`: true,
		`{"command":"git push origin main"}`:                   false,
	} {
		ev := toolBeforeEvent("Bash", input)
		res, _ := run(t, p, ev, proxyCaps(ev.Type))
		if !deny {
			noEffects(t, res)
			continue
		}
		if e := onlyEffect(t, res, ahp.EffectDeny); e.Code != "hookproxy.tools.destructive" {
			t.Fatalf("%s: code %q", input, e.Code)
		}
	}
}

func TestToolsCapabilityFallback(t *testing.T) {
	p := toolsFromJSON(t, `{"deny": [{"tool": "Bash", "inputPattern": "rm -rf"}]}`)
	ev := toolBeforeEvent("Bash", `{"command":"rm -rf /"}`)

	res, _ := run(t, p, ev, advertise().stop().build())
	if e := onlyEffect(t, res, ahp.EffectFlow); e.Operation != ahp.OpStop || e.Reason == "" {
		t.Fatalf("flow = %+v", e)
	}
	res, _ = run(t, p, ev, advertise().modify(ahp.TargetInput, true, true).build())
	noEffects(t, res)

	// Not a tool.before: nothing to decide.
	after := toolAfterEvent("Bash", "removed everything")
	res, _ = run(t, p, after, proxyCaps(after.Type))
	noEffects(t, res)
}

func TestDefaultDestructiveIsAFreshCopy(t *testing.T) {
	a := DefaultDestructive()
	a[0].Pattern = "x"
	if DefaultDestructive()[0].Pattern == "x" {
		t.Fatal("DefaultDestructive shares its slice")
	}
	for _, r := range DefaultDestructive() {
		if r.Name == "" || r.Reason == "" || r.Code == "" {
			t.Fatalf("rule %+v lacks a name, reason or code", r)
		}
	}
	// The rules are plain configuration: they round-trip through the config format.
	raw, _ := json.Marshal(ToolsConfig{Deny: DefaultDestructive()})
	if err := CheckConfig(PolicyTools, raw); err != nil {
		t.Fatal(err)
	}
}

func TestToolsCaseSensitiveOption(t *testing.T) {
	p := toolsFromJSON(t, `{"caseSensitive": true, "deny": [{"tool": "Bash"}]}`)
	ev := toolBeforeEvent("bash", `{"command":"ls"}`)
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	noEffects(t, res)
	ev = toolBeforeEvent("Bash", `{"command":"ls"}`)
	res, _ = run(t, p, ev, proxyCaps(ev.Type))
	onlyEffect(t, res, ahp.EffectDeny)
}

func TestToolsCommandMatcher(t *testing.T) {
	p := toolsFromJSON(t, `{"deny": [{"name": "rm-rf", "command": "rm", "flags": ["-r|-R|--recursive", "-f|--force"]}]}`)
	for _, tc := range []struct {
		input string
		deny  bool
	}{
		{`{"command":"rm -rf /tmp/x"}`, true},
		{`{"command":"rm -fr /tmp/x"}`, true},
		{`{"command":"rm -r -f /tmp/x"}`, true},
		{`{"command":"rm  -Rf /tmp/x"}`, true},
		{`{"command":"rm\t-r\t-f x"}`, true},
		{`{"command":"rm --recursive --force x"}`, true},
		{`{"command":"cd /srv && sudo rm -rf data"}`, true},
		{`{"command":"echo $(rm -rf x)"}`, true},
		{`{"command":"bash -lc 'rm -rf x'"}`, true},
		{`{"command":"/bin/rm -rf x"}`, true},
		{`{"cmd":["rm","-r","-f","x"]}`, true},
		{`{"command":"FOO=1 env rm -rf x"}`, true},
		// controls: the same words that are not such a command
		{`{"command":"rm -r x"}`, false},
		{`{"command":"rm -f x"}`, false},
		{`{"command":"echo rm -rf x"}`, false},
		{`{"command":"grep -rf patterns rm"}`, false},
		{`{"command":"ls","description":"then rm -rf x"}`, false},
		{`{"command":"rm -- -rf"}`, false},
	} {
		ev := toolBeforeEvent("Bash", tc.input)
		res, _ := run(t, p, ev, proxyCaps(ev.Type))
		if got := len(res.Effects) > 0; got != tc.deny {
			t.Errorf("%s: denied %v, want %v", tc.input, got, tc.deny)
		}
	}
}

func TestToolsDenyUnparseable(t *testing.T) {
	for _, deny := range []bool{false, true} {
		p := toolsFromJSON(t, map[bool]string{false: `{}`, true: `{"denyUnparseable": true}`}[deny])
		ev := toolBeforeEvent("Bash", `{"raw_arguments":"ls -"}`)
		ev.Gaps = []ahp.Gap{{Path: "tool.input", Reason: "arguments are not a JSON object"}}
		res, _ := run(t, p, ev, proxyCaps(ev.Type))
		if got := len(res.Effects) > 0; got != deny {
			t.Errorf("denyUnparseable=%v: denied %v", deny, got)
		}
	}
}
