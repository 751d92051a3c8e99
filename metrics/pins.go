package metrics

import (
	"slices"

	"github.com/hookproxy/hookproxy/pinning"
	"github.com/prometheus/client_golang/prometheus"
)

// toolDefinitionChanges is hookproxy_tool_definition_changes_total{kind}: what
// tool-definition pinning reported, once per new definition (a definition seen again is
// not counted again), kind one of pinning.Kinds.
func newToolDefinitionChanges() *prometheus.CounterVec {
	c := counterVec("hookproxy_tool_definition_changes_total",
		"Tool definitions that differ from their pins, or are poisoned, by kind (new, removed, changed, renamed, confusable, poisoned).",
		"kind")
	for _, k := range pinning.Kinds {
		c.WithLabelValues(k) // a dashboard sees 0 rather than no series
	}
	return c
}

// ObserveToolDefinitionChange counts one change of the given kind (one outside
// pinning.Kinds as "unknown").
func (m *Metrics) ObserveToolDefinitionChange(kind string) {
	if m == nil {
		return
	}
	if !slices.Contains(pinning.Kinds, kind) {
		kind = unknown
	}
	m.toolDefinitionChanges.WithLabelValues(kind).Inc()
}
