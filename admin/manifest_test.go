package admin

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// discovery wraps a manifest as a hooks/capabilities result document.
func discovery(t *testing.T, m any) []byte {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": "discovery",
		"result": map[string]any{"protocolVersion": "draft", "manifest": m},
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestManifestValidatesAgainstSchema(t *testing.T) {
	if err := ahptest.Validate(t, "capabilities-response.schema.json", discovery(t, Manifest())); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaCheckIsNotVacuous proves the validation above can fail: manifests that break
// the protocol's rules are rejected by the same schema.
func TestSchemaCheckIsNotVacuous(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(m map[string]any)
	}{
		{"missing limits", func(m map[string]any) { delete(m, "limits") }},
		{"identity member", func(m map[string]any) { m["identity"] = map[string]any{"id": "x"} }},
		{"unknown transport", func(m map[string]any) { m["transports"] = []any{"carrier-pigeon"} }},
		{"observe-only event claims intercept", func(m map[string]any) {
			m["events"] = []any{map[string]any{"event": "turn.end", "modes": []any{"intercept"}, "capabilities": map[string]any{"effects": []any{}}}}
		}},
		{"continue at tool.before", func(m map[string]any) {
			m["events"] = []any{map[string]any{"event": "tool.before", "modes": []any{"intercept"},
				"capabilities": map[string]any{"effects": []any{"flow"}, "flow": map[string]any{"operations": []any{"continue"}}}}}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			raw, err := json.Marshal(Manifest())
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			tc.mutate(m)
			if err := ahptest.Validate(t, "capabilities-response.schema.json", discovery(t, m)); err == nil {
				t.Fatal("schema accepted a broken manifest")
			}
		})
	}
}

// TestManifestIsHonest checks the manifest against what hookproxy can enforce, beyond the
// schema: the honest subset a proxy can enforce, no effect a proxy cannot carry out, and every
// uncovered event explained.
func TestManifestIsHonest(t *testing.T) {
	m := Manifest()
	covered := map[string]bool{}
	for _, e := range m.Events {
		if covered[e.Event] {
			t.Errorf("%s listed twice", e.Event)
		}
		covered[e.Event] = true
		if !ahp.IsEventType(e.Event) {
			t.Errorf("%s is not an AHP event", e.Event)
		}
		if e.Capabilities == nil {
			t.Errorf("%s: no capabilities", e.Event)
			continue
		}
		caps := e.Capabilities
		if !slices.Contains(e.Modes, "intercept") {
			if len(caps.Effects) != 0 {
				t.Errorf("%s is observe-only but advertises %v", e.Event, caps.Effects)
			}
			continue
		}
		bound, ok := ahp.EventBounds[e.Event]
		if !ok {
			t.Errorf("%s claims intercept but is not interceptable", e.Event)
			continue
		}
		for _, eff := range caps.Effects {
			if !slices.Contains(bound.Effects, eff) {
				t.Errorf("%s: %s exceeds the per-event bound", e.Event, eff)
			}
			switch eff {
			case ahp.EffectAllow, ahp.EffectAsk, ahp.EffectMessage:
				t.Errorf("%s: %s cannot be enforced by a proxy", e.Event, eff)
			}
		}
		for target, ops := range caps.Modify {
			if target != bound.Target || !(ops.Replace || ops.Merge) {
				t.Errorf("%s: modify target %q %+v", e.Event, target, ops)
			}
		}
		if caps.Has(ahp.EffectModify) != (len(caps.Modify) > 0) ||
			caps.Has(ahp.EffectFlow) != (caps.Flow != nil) ||
			caps.Has(ahp.EffectInject) != (caps.Inject != nil) {
			t.Errorf("%s: effect list and capability blocks disagree", e.Event)
		}
		if caps.Flow != nil && !slices.Equal(caps.Flow.Operations, []string{ahp.OpStop}) {
			t.Errorf("%s: flow %v; hookproxy runs no continuation loop, only stop", e.Event, caps.Flow.Operations)
		}
	}

	want := map[string][]string{
		ahp.EventTurnStart:          {"deny", "modify", "inject", "flow"},
		ahp.EventModelRequestBefore: {"deny", "modify", "inject", "return", "flow"},
		ahp.EventModelResponseAfter: {"modify", "flow"},
		ahp.EventToolBefore:         {"deny", "modify", "inject", "return", "flow"},
		ahp.EventToolAfter:          {"modify", "inject", "flow"},
		ahp.EventTurnFinishBefore:   {"modify", "flow"},
		ahp.EventTurnEnd:            {},
		ahp.EventModelError:         {},
		ahp.EventHookFailure:        {},
	}
	for ev, effects := range want {
		e := m.Event(ev)
		if e == nil {
			t.Errorf("%s not covered", ev)
			continue
		}
		if !slices.Equal(e.Capabilities.Effects, effects) {
			t.Errorf("%s effects %v, want %v", ev, e.Capabilities.Effects, effects)
		}
	}
	if len(m.Events) != len(want) {
		t.Errorf("%d events covered, want %d", len(m.Events), len(want))
	}

	// Omitted coverage never means support: every event left out is explained in gaps.
	gaps := map[string]bool{}
	for _, g := range m.Gaps {
		if g.Path == "" || g.Reason == "" {
			t.Errorf("empty gap %+v", g)
		}
		gaps[g.Path] = true
	}
	for _, ev := range ahp.EventTypes {
		if !covered[ev] && !gaps[ev] {
			t.Errorf("%s is neither covered nor explained in gaps", ev)
		}
	}
	// tool.before return is MCP-only: the gap must say so and the MCP path must be covered.
	if !gaps["tool.before.return"] || !slices.Contains(m.ToolPaths, ToolPathMCP) {
		t.Error("tool.before return is advertised without its MCP-only gap")
	}
	// An absent limit must be explained.
	if m.Limits.MaxUploadBytes == nil && !gaps["limits.maxUploadBytes"] {
		t.Error("maxUploadBytes is absent and unexplained")
	}
	if m.Limits.MaxContinuations == nil || *m.Limits.MaxContinuations != 0 {
		t.Error("maxContinuations must be stated as 0: no continue is advertised")
	}
	if !slices.Equal(m.ToolPaths, []string{ToolPathOpenAIChat, ToolPathOpenAIResponses, ToolPathAnthropicMessages, ToolPathGemini, ToolPathMCP}) {
		t.Errorf("toolPaths %v", m.ToolPaths)
	}
	if !slices.Equal(m.Transports, []string{"http", "stdio", "in_process"}) || !slices.Equal(m.Authentication, []string{"bearer"}) {
		t.Errorf("transports %v authentication %v", m.Transports, m.Authentication)
	}
}

func TestManifestCopiesAreIndependent(t *testing.T) {
	a := Manifest()
	a.Event(ahp.EventToolBefore).Capabilities.Effects[0] = "allow"
	a.ToolPaths[0] = "x"
	b := Manifest()
	if b.Event(ahp.EventToolBefore).Capabilities.Effects[0] != ahp.EffectDeny || b.ToolPaths[0] != ToolPathOpenAIChat {
		t.Fatal("mutating one Manifest() value changed another")
	}
}

// TestManifestPassesChainValidator cross-checks with the chain's own manifest rules, which
// the proxy uses at run time; the schema and the Go validator must agree on hookproxy's
// manifest.
func TestManifestPassesChainValidator(t *testing.T) {
	raw, err := json.Marshal(Manifest())
	if err != nil {
		t.Fatal(err)
	}
	if err := ahp.ValidateManifest(raw); err != nil {
		t.Fatal(err)
	}
	for _, e := range Manifest().Events {
		caps, err := json.Marshal(e.Capabilities)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(e.Modes, "intercept") {
			continue
		}
		if err := ahp.ValidateCapabilities(e.Event, caps); err != nil {
			t.Errorf("%s: %v", e.Event, err)
		}
	}
}
