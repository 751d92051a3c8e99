package metrics

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/enforcement"
)

// serve exposes m.Handler on a loopback listener, as Prometheus would scrape it.
func serve(t *testing.T, m *Metrics) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(m.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// scrape fetches the text exposition and returns sample name{labels} → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestSeriesMoveWithCalls(t *testing.T) {
	m := New()
	url := serve(t, m)

	before := scrape(t, url)
	for _, name := range []string{
		`hookproxy_config_reloads_total{result="success"}`,
		`hookproxy_config_reloads_total{result="failure"}`,
		`hookproxy_audit_queue_depth`,
		`hookproxy_audit_dropped_total`,
		`hookproxy_scan_cache_bytes`,
		`hookproxy_scan_cache_hits_total`,
	} {
		if v, ok := before[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 before any call", name, v, ok)
		}
	}
	if _, ok := before["go_goroutines"]; !ok {
		t.Error("Go runtime collector missing")
	}
	if _, ok := before["process_start_time_seconds"]; !ok {
		t.Log("process collector exposes no start time on this platform")
	}

	m.ObserveRequest("/openai", 200)
	m.ObserveRequest("/openai", 200)
	m.ObserveRequest("/anthropic", 403)
	m.ObserveBoundary("tool.before", enforcement.Refused)
	m.ObserveBoundary("model.request.before", enforcement.Forwarded)
	m.ObserveBoundary("not.an.event", "exploded")
	m.ObserveInterceptor("policy", 30*time.Millisecond, "")
	m.ObserveInterceptor("policy", 2*time.Second, "timeout")
	// A kind outside transport.Kind's vocabulary cannot grow the label set.
	m.ObserveInterceptor("policy", time.Millisecond, "backend said: nope")
	m.UpstreamLatency("/openai", 1500*time.Millisecond)
	m.UpstreamTTFB("/openai", 200*time.Millisecond)
	end := m.StreamStarted("/openai", enforcement.StreamHeld)
	m.StreamStarted("/anthropic", enforcement.StreamPassthrough)
	m.ReloadResult(true)
	m.ReloadResult(false)
	m.ReloadResult(false)
	m.StoreFailure("load", "re-settle")
	m.StoreFailure("load", "re-settle")
	m.StoreFailure("record", "fail-closed")
	depth, dropped := 7, uint64(3)
	m.RegisterAudit(func() int { return depth }, func() uint64 { return dropped })
	m.RegisterScanCache(func() (int64, int64, uint64, uint64) { return 4096, 30, 120, 45 })

	got := scrape(t, url)
	want := map[string]float64{
		`hookproxy_requests_total{route="/openai",status="200"}`:                               2,
		`hookproxy_requests_total{route="/anthropic",status="403"}`:                            1,
		`hookproxy_boundary_decisions_total{event="tool.before",outcome="refused"}`:            1,
		`hookproxy_boundary_decisions_total{event="model.request.before",outcome="forwarded"}`: 1,
		`hookproxy_boundary_decisions_total{event="unknown",outcome="unknown"}`:                1,
		`hookproxy_interceptor_latency_seconds_count{backend="policy"}`:                        3,
		`hookproxy_interceptor_failures_total{backend="policy",kind="unknown"}`:                1,
		`hookproxy_interceptor_latency_seconds_bucket{backend="policy",le="0.05"}`:             2,
		`hookproxy_interceptor_failures_total{backend="policy",kind="timeout"}`:                1,
		`hookproxy_upstream_latency_seconds_count{route="/openai"}`:                            1,
		`hookproxy_upstream_latency_seconds_sum{route="/openai"}`:                              1.5,
		`hookproxy_upstream_ttfb_seconds_count{route="/openai"}`:                               1,
		`hookproxy_streams_active{mode="held",route="/openai"}`:                                1,
		`hookproxy_streams_active{mode="passthrough",route="/anthropic"}`:                      1,
		`hookproxy_config_reloads_total{result="success"}`:                                     1,
		`hookproxy_config_reloads_total{result="failure"}`:                                     2,
		`hookproxy_audit_queue_depth`:                                                          7,
		`hookproxy_state_store_failures_total{mode="re-settle",op="load"}`:                     2,
		`hookproxy_state_store_failures_total{mode="fail-closed",op="record"}`:                 1,
		`hookproxy_audit_dropped_total`:                                                        3,
		`hookproxy_scan_cache_bytes`:                                                           4096,
		`hookproxy_scan_cache_entries`:                                                         30,
		`hookproxy_scan_cache_hits_total`:                                                      120,
		`hookproxy_scan_cache_misses_total`:                                                    45,
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}

	// Ending a stream twice decrements once; a replaced audit writer is read live.
	end()
	end()
	depth, dropped = 0, 5
	got = scrape(t, url)
	if v := got[`hookproxy_streams_active{mode="held",route="/openai"}`]; v != 0 {
		t.Errorf("held streams after end = %v, want 0", v)
	}
	if v := got[`hookproxy_audit_dropped_total`]; v != 5 {
		t.Errorf("audit dropped = %v, want 5", v)
	}
	if v := got[`hookproxy_audit_queue_depth`]; v != 0 {
		t.Errorf("audit depth = %v, want 0", v)
	}
}

func TestPrivateRegistries(t *testing.T) {
	// Two instances must not share series (and New must not panic on duplicate
	// registration, which it would on the global registry).
	a, b := New(), New()
	a.ObserveRequest("/x", 200)
	got := scrape(t, serve(t, b))
	if _, ok := got[`hookproxy_requests_total{route="/x",status="200"}`]; ok {
		t.Fatal("series of one Metrics visible in another")
	}
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	m.ObserveRequest("/x", 200)
	m.ObserveBoundary("tool.before", enforcement.Forwarded)
	m.ObserveInterceptor("b", time.Millisecond, "timeout")
	m.UpstreamLatency("/x", time.Second)
	m.UpstreamTTFB("/x", time.Second)
	m.StreamStarted("/x", enforcement.StreamHeld)()
	m.ReloadResult(true)
	m.RegisterAudit(nil, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("nil metrics handler status %d, want 404", rec.Code)
	}
}
