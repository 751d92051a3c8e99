package policies

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestNamesAndFactories(t *testing.T) {
	want := []string{"injection", "models", "pii", "secrets", "tools"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v", got)
	}
	f := Factories()
	for _, n := range want {
		if f[n] == nil {
			t.Fatalf("no factory for %s", n)
		}
		// Absent, empty and null configs are the defaults.
		for _, raw := range []string{"", "{}", "null", " \n"} {
			p, err := f[n](json.RawMessage(raw))
			if err != nil || p == nil {
				t.Fatalf("%s with config %q: %v", n, raw, err)
			}
		}
	}
	delete(f, "secrets")
	if Factories()["secrets"] == nil {
		t.Fatal("Factories returns a shared map")
	}
}

func TestCheckConfigErrors(t *testing.T) {
	tests := []struct {
		policy, cfg string
		path        string // expected ConfigError.Path
		has         string // expected substring of the reason
	}{
		{"secrets", `{"actoin":"deny"}`, "$", `"actoin"`},
		{"secrets", `{"Action":"deny"}`, "$", `"Action"`},
		{"secrets", `{"action":"block"}`, "$.action", "block"},
		{"secrets", `{"kinds":["aws_key"]}`, "$.kinds[0]", "aws_key"},
		{"secrets", `{"allow":["(unclosed"]}`, "$.allow[0]", "regular expression"},
		{"secrets", `{"minEntropy":"high"}`, "$.minEntropy", "number"},
		{"secrets", `{"action":"deny"} {"x":1}`, "$", "trailing"},
		{"pii", `{"response":"mask"}`, "$.response", "mask"},
		{"tools", `{"deny":[{"tol":"Bash"}]}`, "$.deny[0]", `"tol"`},
		{"tools", `{"deny":[{"tool":"Bash","inputPattern":"(?P<"}]}`, "$.deny[0].inputPattern", "regular expression"},
		{"tools", `{"deny":[{"pattern":"x"}]}`, "$.deny[0].pattern", "argument"},
		{"tools", `{"deny":[{"tool":"[Bash"}]}`, "$.deny[0].tool", "glob"},
		{"tools", `{"deny":[{"tool":"Bash","code":"not a code"}]}`, "$.deny[0]", "reverse-DNS"},
		{"tools", `{"allow":"Bash"}`, "$.allow", "array"},
		{"models", `{"maxOutputTokens":-1}`, "$.maxOutputTokens", "negative"},
		{"models", `{"allow":["gpt-["]}`, "$.allow[0]", "glob"},
		{"injection", `{"action":"block"}`, "$.action", "block"},
		{"injection", `{"patterns":["("]}`, "$.patterns[0]", "regular expression"},
		{"injection", `[1,2]`, "$", "array"},
	}
	for _, tc := range tests {
		t.Run(tc.policy+" "+tc.cfg, func(t *testing.T) {
			err := CheckConfig(tc.policy, json.RawMessage(tc.cfg))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v; want a *ConfigError", err)
			}
			if ce.Policy != tc.policy || ce.Path != tc.path || !strings.Contains(ce.Reason, tc.has) {
				t.Fatalf("err = %#v; want policy %s, path %s, reason containing %s", ce, tc.policy, tc.path, tc.has)
			}
			if !strings.Contains(err.Error(), tc.policy) {
				t.Fatalf("message %q does not name the policy", err)
			}
		})
	}
	if err := CheckConfig("nope", nil); err == nil || !strings.Contains(err.Error(), "secrets") {
		t.Fatalf("unknown policy: %v", err)
	}
}

func TestCheckConfigAcceptsDocumentedExamples(t *testing.T) {
	for policy, cfg := range map[string]string{
		"secrets":   `{"action": "redact", "kinds": ["aws_access_key_id", "github_token"], "allow": ["^AKIAIOSFODNN7EXAMPLE$"], "minEntropy": 3.0, "minLength": 10}`,
		"pii":       `{"request": "redact", "response": "off", "kinds": ["email", "payment_card"], "allow": ["@example\\.com$"]}`,
		"tools":     `{"deny": [{"tool": "Bash", "inputPattern": "rm -rf", "reason": "No recursive deletes."}], "allow": ["Read", "Grep", "Bash", "mcp__files__*"], "destructive": true}`,
		"models":    `{"allow": ["gpt-4.1*", "claude-sonnet-*"], "maxOutputTokens": 8192, "requireMaxTokens": false}`,
		"injection": `{"action": "warn", "requests": false, "kinds": ["prompt_injection", "unicode_tag"], "patterns": ["(?i)send .* to attacker\\.example"], "allow": ["<\\|endoftext\\|>"]}`,
	} {
		if err := CheckConfig(policy, json.RawMessage(cfg)); err != nil {
			t.Errorf("%s: %v", policy, err)
		}
	}
}

// A request without params or event is a caller bug: an error, never a panic.
func TestInterceptWithoutEvent(t *testing.T) {
	for _, n := range Names() {
		p, err := Factories()[n](nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range []*ahp.InterceptRequest{nil, {ID: "x"}, {ID: "x", Params: &ahp.InterceptParams{}}} {
			if _, err := p.Intercept(context.Background(), req); err == nil {
				t.Errorf("%s: no error for %+v", n, req)
			}
		}
		// A cancelled context is reported, not ignored.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ev := requestEvent(msg("m1", ahp.RoleUser, text("m1p0", "hi")))
		if _, err := p.Intercept(ctx, &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{Event: ev}}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: cancelled context: %v", n, err)
		}
	}
}

// Every policy tolerates odd events: missing tool, non-object input, nil text, no caps.
func TestPoliciesTolerateOddEvents(t *testing.T) {
	odd := []*ahp.Event{
		{ID: "e1", Type: ahp.EventToolBefore},
		{ID: "e2", Type: ahp.EventToolBefore, Tool: &ahp.Tool{Name: "Bash", Input: json.RawMessage(`"rm -rf /"`)}},
		{ID: "e3", Type: ahp.EventToolBefore, Tool: &ahp.Tool{Name: "Bash", Input: json.RawMessage(`{"command":`)}},
		{ID: "e4", Type: ahp.EventModelRequestBefore, Items: []ahp.Message{{ID: "m", Role: "user", Parts: []ahp.Part{{ID: "p", Kind: "text", Selection: "body"}}}}},
		{ID: "e5", Type: ahp.EventModelRequestBefore, Params: json.RawMessage(`[1,2`)},
		{ID: "e6", Type: ahp.EventToolAfter, Items: []ahp.Message{{ID: "m", Role: "tool", Parts: []ahp.Part{{ID: "p", Kind: "attachment", MediaType: "image/png", Selection: "metadata"}}}}},
	}
	configs := map[string]string{"tools": `{"destructive":true,"deny":[{"argument":"command","pattern":"x"}]}`, "models": `{"allow":["a*"],"maxOutputTokens":1}`, "injection": `{"requests":true}`}
	for _, n := range Names() {
		p, err := Factories()[n](json.RawMessage(configs[n]))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range odd {
			for _, caps := range []*ahp.Capabilities{nil, proxyCaps(ev.Type)} {
				if _, err := p.Intercept(context.Background(), &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{Event: ev, Capabilities: caps}}); err != nil {
					t.Errorf("%s %s: %v", n, ev.ID, err)
				}
			}
		}
	}
}
