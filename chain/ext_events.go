package chain

import (
	"slices"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// Extension events (AHP-EXT-001): hookproxy's own observe-only events outside the draft's
// catalogue. A subscription receives one only when it names it exactly; "*" and family
// wildcards select catalogue events alone, so no backend gets an event type it did not
// ask for.
var extensionEvents = []string{ahp.EventToolDefinitions}

// addExtensionPlans adds the plans of the extension events to c.
func (c *Chain) addExtensionPlans(subs []*subscription) {
	for _, t := range extensionEvents {
		p := &plan{}
		for _, s := range subs {
			if s.mode == registration.ModeObserve && slices.Contains(s.reg.Events, t) {
				p.observe = true
				p.observers = append(p.observers, s)
				p.entries = append(p.entries, s)
			}
		}
		c.plans[t] = p
	}
}
