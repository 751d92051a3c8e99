package policies

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func TestModelsPolicy(t *testing.T) {
	p, err := NewModels(ModelsConfig{Allow: []string{"claude-sonnet-*", "gpt-4.1*"}, MaxOutputTokens: 8192})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, model, params, code, reasonHas string
	}{
		{"allowed, under the cap", "claude-sonnet-4-5", `{"max_tokens":4096}`, "", ""},
		{"allowed, at the cap", "gpt-4.1-mini", `{"max_completion_tokens":8192}`, "", ""},
		{"model not allowed", "gpt-4o", `{"max_tokens":100}`, "hookproxy.models.not_allowed", "gpt-4o"},
		{"glob is case-sensitive", "Claude-Sonnet-4-5", `{}`, "hookproxy.models.not_allowed", "Claude"},
		{"max_tokens over the cap", "claude-sonnet-4-5", `{"max_tokens":64000}`, "hookproxy.models.max_tokens", "64000"},
		{"max_completion_tokens over", "gpt-4.1", `{"model":"gpt-4.1","messages_hidden":true,"max_completion_tokens":10000}`, "hookproxy.models.max_tokens", "max_completion_tokens"},
		{"max_output_tokens over", "gpt-4.1", `{"tools":[{"type":"function","name":"x","parameters":{"max_tokens":1e9}}],"max_output_tokens":9000}`, "hookproxy.models.max_tokens", "9000"},
		{"largest of several", "gpt-4.1", `{"max_tokens":10,"max_completion_tokens":20000}`, "hookproxy.models.max_tokens", "20000"},
		{"no limit requested", "gpt-4.1", `{"temperature":0}`, "", ""},
		{"non-numeric limit ignored", "gpt-4.1", `{"max_tokens":"lots"}`, "", ""},
		// An Azure deployment path: model.id is the deployment, the body may name another.
		{"deployment and body model allowed", "gpt-4.1-prod", `{"model":"gpt-4.1"}`, "", ""},
		{"deployment not allowed, body model allowed", "gpt-5-pro", `{"model":"gpt-4.1"}`, "hookproxy.models.not_allowed", "gpt-5-pro"},
		{"deployment allowed, body model not", "gpt-4.1", `{"model":"o3-pro"}`, "hookproxy.models.not_allowed", "o3-pro"},
		{"body model not a string is not judged", "gpt-4.1", `{"model":7}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ev := requestEvent(msg("m1", ahp.RoleUser, text("m1p0", "hi")))
			ev.Model.ID = tc.model
			ev.Params = json.RawMessage(tc.params)
			res, _ := run(t, p, ev, proxyCaps(ev.Type))
			if tc.code == "" {
				noEffects(t, res)
				return
			}
			e := onlyEffect(t, res, ahp.EffectDeny)
			if e.Code != tc.code || !strings.Contains(e.Reason, tc.reasonHas) {
				t.Fatalf("deny = %+v", e)
			}
		})
	}
}

func TestModelsRequireMaxTokensAndFallback(t *testing.T) {
	p, err := NewModels(ModelsConfig{MaxOutputTokens: 1000, RequireMaxTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := requestEvent(msg("m1", ahp.RoleUser, text("m1p0", "hi")))
	ev.Params = json.RawMessage(`{"stream":true}`)
	res, _ := run(t, p, ev, proxyCaps(ev.Type))
	onlyEffect(t, res, ahp.EffectDeny)

	res, _ = run(t, p, ev, advertise().stop().build())
	onlyEffect(t, res, ahp.EffectFlow)
	res, _ = run(t, p, ev, advertise().build())
	noEffects(t, res)

	if _, err := NewModels(ModelsConfig{RequireMaxTokens: true}); err == nil {
		t.Fatal("requireMaxTokens without a cap accepted")
	}
}
