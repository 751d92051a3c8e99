package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/enforcement"
)

// The label vocabularies are declared once, by their owners: boundary outcomes are
// enforcement.Action values, stream modes enforcement.StreamMode, failure kinds and
// violations transport.Kind and transport.Violation.

const unknown = enforcement.Unknown

// Histogram buckets, in seconds. Interceptor deadlines range from 1 ms to 30 s; model
// calls run from well under a second to many minutes for long generations.
var (
	interceptorBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	upstreamBuckets    = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	ttfbBuckets        = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
)

// Metrics is the set of hookproxy metrics. A nil *Metrics accepts every call and records
// nothing, so code paths need no "metrics enabled?" checks.
type Metrics struct {
	reg *prometheus.Registry

	requests            *prometheus.CounterVec
	boundaryDecisions   *prometheus.CounterVec
	interceptorLatency  *prometheus.HistogramVec
	interceptorFailures *prometheus.CounterVec
	invalidReplies      *prometheus.CounterVec
	upstreamLatency     *prometheus.HistogramVec
	upstreamTTFB        *prometheus.HistogramVec
	streamsActive       *prometheus.GaugeVec
	configReloads       *prometheus.CounterVec
	unexamined          *prometheus.CounterVec
	storeFailures       *prometheus.CounterVec
	shadowDecisions     *prometheus.CounterVec
	shadowDisagree      *prometheus.CounterVec
	shadowDropped       prometheus.Counter
	captureFailures     *prometheus.CounterVec
	approvals           approvalMetrics
	// toolDefinitionChanges counts what tool-definition pinning reported (pins.go).
	toolDefinitionChanges *prometheus.CounterVec

	// The audit writer is replaced on reload, so its gauges read through these.
	auditDepth   atomic.Pointer[func() int]
	auditDropped atomic.Pointer[func() uint64]
	// The built-in scanners' result caches (RegisterScanCache).
	scanCache atomic.Pointer[func() (bytes, entries int64, hits, misses uint64)]
}

// New creates the metrics on a fresh registry, with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = counterVec("hookproxy_requests_total",
		"Client requests answered by the proxy, by route prefix and HTTP status.",
		"route", "status")
	m.boundaryDecisions = counterVec("hookproxy_boundary_decisions_total",
		"Settled AHP boundaries, by event type and how the proxy enforced the settlement.",
		"event", "outcome")
	m.interceptorLatency = histogramVec("hookproxy_interceptor_latency_seconds",
		"Time from dispatch to settled reply (or failure) of one interceptor call.",
		interceptorBuckets, "backend")
	m.interceptorFailures = counterVec("hookproxy_interceptor_failures_total",
		"Operational failures of interceptor calls, by backend and failure kind.",
		"backend", "kind")
	m.invalidReplies = counterVec("hookproxy_backend_invalid_replies_total",
		"Interceptor replies refused for a protocol reason (the backend answered, wrongly), by backend, violated rule and offending effect type.",
		"backend", "violation", "effect")
	m.upstreamLatency = histogramVec("hookproxy_upstream_latency_seconds",
		"Upstream call duration until the complete response was read.",
		upstreamBuckets, "route")
	m.upstreamTTFB = histogramVec("hookproxy_upstream_ttfb_seconds",
		"Upstream time to first response byte.",
		ttfbBuckets, "route")
	m.streamsActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hookproxy_streams_active",
		Help: "Streaming responses in progress, by route and mode (passthrough or held).",
	}, []string{"route", "mode"})
	m.unexamined = counterVec("hookproxy_forwarded_unexamined_total",
		"Requests with input forwarded to an endpoint the route does not map (routes[].unmapped: forward).",
		"route")
	m.storeFailures = counterVec("hookproxy_state_store_failures_total",
		"Failed operations of the conversation state store (op: load, record, defer), by the state.onStoreFailure mode that handled them.",
		"op", "mode")
	m.shadowDecisions = counterVec("hookproxy_shadow_decisions_total",
		"Boundaries the shadow chain settled, by the outcome its settlement would have had (forwarded, rewritten, refused, supplied, stopped).",
		"outcome")
	m.shadowDisagree = counterVec("hookproxy_shadow_disagreements_total",
		"Boundaries where the shadow chain's settlement differs from the live one, by event type.",
		"boundary")
	m.shadowDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "hookproxy_shadow_dropped_total",
		Help: "Boundaries the shadow chain never saw because its queue was full (the live decision is unaffected)."})
	m.captureFailures = counterVec("hookproxy_capture_failures_total",
		"Capture lines lost (queue_full, write, encode, closed); traffic is never refused for them.",
		"reason")
	m.toolDefinitionChanges = newToolDefinitionChanges()
	m.configReloads = counterVec("hookproxy_config_reloads_total",
		"Configuration reload attempts, by result (success or failure).",
		"result")
	// Pre-create both results so a dashboard sees 0 failures rather than no series.
	m.configReloads.WithLabelValues("success")
	m.configReloads.WithLabelValues("failure")

	auditDepth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookproxy_audit_queue_depth",
		Help: "Audit records queued and not yet written.",
	}, readThrough(&m.auditDepth))
	auditDropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hookproxy_audit_dropped_total",
		Help: "Audit records that never reached the audit log (queue full, write failure, shutdown).",
	}, readThrough(&m.auditDropped))

	scan := func(pick func(bytes, entries int64, hits, misses uint64) float64) func() float64 {
		return func() float64 {
			if f := m.scanCache.Load(); f != nil {
				return pick((*f)())
			}
			return 0
		}
	}
	scanBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookproxy_scan_cache_bytes",
		Help: "Memory held by the built-in scanners' result caches (bounded per scanner), in bytes.",
	}, scan(func(b, _ int64, _, _ uint64) float64 { return float64(b) }))
	scanEntries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookproxy_scan_cache_entries",
		Help: "Scan results held by the built-in scanners' result caches.",
	}, scan(func(_, e int64, _, _ uint64) float64 { return float64(e) }))
	scanHits := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hookproxy_scan_cache_hits_total",
		Help: "Texts and request params whose scan result was reused from a built-in scanner's cache.",
	}, scan(func(_, _ int64, h, _ uint64) float64 { return float64(h) }))
	scanMisses := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hookproxy_scan_cache_misses_total",
		Help: "Texts and request params a built-in scanner scanned (not in its cache).",
	}, scan(func(_, _ int64, _, mi uint64) float64 { return float64(mi) }))

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.boundaryDecisions, m.interceptorLatency, m.interceptorFailures, m.invalidReplies,
		m.upstreamLatency, m.upstreamTTFB, m.streamsActive, m.configReloads, m.unexamined,
		m.storeFailures, m.shadowDecisions, m.shadowDisagree, m.shadowDropped, m.captureFailures, m.toolDefinitionChanges,
		auditDepth, auditDropped,
		scanBytes, scanEntries, scanHits, scanMisses,
	)
	m.registerApprovals()
	return m
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// readThrough reads the figure of the audit writer p holds now (0 without one): the writer
// is replaced on reload, the registered metric is not.
func readThrough[N int | uint64](p *atomic.Pointer[func() N]) func() float64 {
	return func() float64 {
		if f := p.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	}
}

// Registry returns the private registry, for callers that add their own collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:          m.reg, // exposes promhttp's own error counter
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// ObserveRequest counts one answered client request.
func (m *Metrics) ObserveRequest(route string, status int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// ObserveBoundary counts one settled boundary. event is an AHP event type and outcome how
// the proxy enforced it: one of the five boundary actions (enforcement.Forwarded, Rewritten,
// Refused, Supplied, Stopped); anything else, including a forward no boundary examined
// (counted by ForwardedUnexamined), is recorded as "unknown".
func (m *Metrics) ObserveBoundary(event string, outcome enforcement.Action) {
	if m == nil {
		return
	}
	if !ahp.IsEventType(event) {
		event = unknown
	}
	switch outcome {
	case enforcement.Forwarded, enforcement.Rewritten, enforcement.Refused, enforcement.Supplied, enforcement.Stopped:
	default:
		outcome = unknown
	}
	m.boundaryDecisions.WithLabelValues(event, string(outcome)).Inc()
}

// ObserveInterceptor records one interceptor call's latency and, when failureKind is not
// empty, counts the operational failure (a kind outside the vocabulary as "unknown").
func (m *Metrics) ObserveInterceptor(backend string, d time.Duration, failureKind transport.Kind) {
	if m == nil {
		return
	}
	m.interceptorLatency.WithLabelValues(backend).Observe(d.Seconds())
	if failureKind != "" {
		if !failureKind.Known() {
			failureKind = unknown
		}
		m.interceptorFailures.WithLabelValues(backend, string(failureKind)).Inc()
	}
}

// ObserveInvalidReply counts one reply refused for a protocol reason: violation is a
// transport.Violation* value and effect the offending effect type ("" when no single effect
// is to blame). Both come from closed vocabularies; anything else is "unknown", so a
// backend cannot create series.
func (m *Metrics) ObserveInvalidReply(backend string, violation transport.Violation, effect string) {
	if m == nil {
		return
	}
	if !violation.Known() {
		violation = unknown
	}
	if effect != "" && !ahp.IsEffectType(effect) {
		effect = unknown
	}
	m.invalidReplies.WithLabelValues(backend, string(violation), effect).Inc()
}

// UpstreamLatency records the duration of one upstream call.
func (m *Metrics) UpstreamLatency(route string, d time.Duration) {
	if m == nil {
		return
	}
	m.upstreamLatency.WithLabelValues(route).Observe(d.Seconds())
}

// UpstreamTTFB records the upstream's time to first byte.
func (m *Metrics) UpstreamTTFB(route string, d time.Duration) {
	if m == nil {
		return
	}
	m.upstreamTTFB.WithLabelValues(route).Observe(d.Seconds())
}

// StreamStarted counts a stream as active and returns the function that ends it. The
// returned function is safe to call more than once (only the first call counts), so it can
// be deferred and also called early.
func (m *Metrics) StreamStarted(route string, mode enforcement.StreamMode) func() {
	if m == nil {
		return func() {}
	}
	if !mode.Known() {
		mode = unknown
	}
	g := m.streamsActive.WithLabelValues(route, string(mode))
	g.Inc()
	var once sync.Once
	return func() { once.Do(g.Dec) }
}

// StoreFailure counts one failed state store operation (proxy.StoreMetrics).
func (m *Metrics) StoreFailure(op, mode string) {
	if m == nil {
		return
	}
	m.storeFailures.WithLabelValues(op, mode).Inc()
}

// ReloadResult counts one configuration reload attempt.
// ForwardedUnexamined counts a forward to an endpoint the route does not map.
func (m *Metrics) ForwardedUnexamined(route string) {
	if m == nil {
		return
	}
	m.unexamined.WithLabelValues(route).Inc()
}

func (m *Metrics) ReloadResult(ok bool) {
	if m == nil {
		return
	}
	result := "failure"
	if ok {
		result = "success"
	}
	m.configReloads.WithLabelValues(result).Inc()
}

// RegisterAudit connects the audit queue gauges to an audit writer (typically
// (*audit.Writer).QueueDepth and Dropped). Calling it again, for the writer of a reloaded
// configuration, replaces the previous functions. nil functions read as zero.
//
// Note that hookproxy_audit_dropped_total follows the current writer: after a writer is
// replaced, the counter restarts from that writer's count, which Prometheus treats as a
// counter reset.
func (m *Metrics) RegisterAudit(depth func() int, dropped func() uint64) {
	if m == nil {
		return
	}
	if depth == nil {
		m.auditDepth.Store(nil)
	} else {
		m.auditDepth.Store(&depth)
	}
	if dropped == nil {
		m.auditDropped.Store(nil)
	} else {
		m.auditDropped.Store(&dropped)
	}
}

// ShadowDecision counts one boundary settled by the shadow chain; outcome is the
// enforcement its settlement would have had.
func (m *Metrics) ShadowDecision(outcome enforcement.Action) {
	if m == nil {
		return
	}
	switch outcome {
	case enforcement.Forwarded, enforcement.Rewritten, enforcement.Refused, enforcement.Supplied, enforcement.Stopped:
	default:
		outcome = unknown
	}
	m.shadowDecisions.WithLabelValues(string(outcome)).Inc()
}

// ShadowDisagreement counts one boundary whose shadow settlement differs from the live one.
func (m *Metrics) ShadowDisagreement(event string) {
	if m == nil {
		return
	}
	if !ahp.IsEventType(event) {
		event = unknown
	}
	m.shadowDisagree.WithLabelValues(event).Inc()
}

// ShadowDropped counts one boundary the shadow chain's full queue turned away.
func (m *Metrics) ShadowDropped() {
	if m == nil {
		return
	}
	m.shadowDropped.Inc()
}

// CaptureFailure counts one capture line lost, by reason (queue_full, write, encode,
// closed; anything else is "unknown").
func (m *Metrics) CaptureFailure(reason string) {
	if m == nil {
		return
	}
	switch reason {
	case "queue_full", "write", "encode", "closed":
	default:
		reason = unknown
	}
	m.captureFailures.WithLabelValues(reason).Inc()
}

// RegisterScanCache installs the reader of the built-in scanners' cache figures
// (policies.ScanCacheStats).
func (m *Metrics) RegisterScanCache(stats func() (bytes, entries int64, hits, misses uint64)) {
	if m == nil || stats == nil {
		return
	}
	m.scanCache.Store(&stats)
}
