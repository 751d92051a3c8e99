package metrics

import "github.com/prometheus/client_golang/prometheus"

// approvalMetrics are the approvals' measurements (package approvals calls them).
type approvalMetrics struct {
	total   *prometheus.CounterVec
	pending prometheus.Gauge
}

func (m *Metrics) registerApprovals() {
	m.approvals.total = counterVec("hookproxy_approvals_total",
		"Held tool calls by how their approval ended: approved, denied, expired, or failed (the store failed; refused).",
		"decision")
	m.approvals.pending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hookproxy_approvals_pending",
		Help: "Tool calls this process holds now, waiting for a person's decision.",
	})
	for _, d := range []string{"approved", "denied", "expired", "failed"} {
		m.approvals.total.WithLabelValues(d)
	}
	m.reg.MustRegister(m.approvals.total, m.approvals.pending)
}

// ApprovalDecided counts one held call's end.
func (m *Metrics) ApprovalDecided(decision string) {
	if m == nil {
		return
	}
	m.approvals.total.WithLabelValues(decision).Inc()
}

// ApprovalPending moves the gauge of held calls.
func (m *Metrics) ApprovalPending(delta int) {
	if m == nil {
		return
	}
	m.approvals.pending.Add(float64(delta))
}
