package admin

import (
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// WithApprovals is m advertising ask at tool.before: what the proxy enforces when an
// approval path exists (the admin listener is on), holding the call until a person
// decides (AHP-CAP-001: advertise what is enforced, nothing more). Without one, ask stays
// unadvertised and mandatory approval fails closed.
func WithApprovals(m CapabilityManifest) CapabilityManifest {
	out := m
	out.Events = slices.Clone(m.Events)
	for i, e := range out.Events {
		if e.Event != ahp.EventToolBefore || e.Capabilities == nil || slices.Contains(e.Capabilities.Effects, ahp.EffectAsk) {
			continue
		}
		c := *e.Capabilities
		c.Effects = append(slices.Clone(c.Effects), ahp.EffectAsk)
		out.Events[i].Capabilities = &c
	}
	return out
}
