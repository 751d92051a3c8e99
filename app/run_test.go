package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/config"
)

// auditLine is what a reader of the audit log sees.
type auditLine struct {
	Time         time.Time `json:"time"`
	EventID      string    `json:"eventId"`
	EventType    string    `json:"eventType"`
	Route        string    `json:"route"`
	SessionID    string    `json:"sessionId"`
	TurnID       string    `json:"turnId"`
	Model        string    `json:"model"`
	Interceptors []struct {
		BackendID    string   `json:"backendId"`
		Subscription int      `json:"subscription"`
		LatencyMs    float64  `json:"latencyMs"`
		Outcome      string   `json:"outcome"`
		Effects      []string `json:"effects"`
		FailureKind  string   `json:"failureKind"`
	} `json:"interceptors"`
	Permission string `json:"permission"`
	Flow       string `json:"flow"`
	Denial     *struct {
		Reason    string `json:"reason"`
		Code      string `json:"code"`
		BackendID string `json:"backendId"`
		Synthetic bool   `json:"synthetic"`
	} `json:"denial"`
	Enforcement string `json:"enforcement"`
}

func readAudit(t *testing.T, path string) (lines []auditLine, raw string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var l auditLine
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("audit line is not JSON: %v\n%s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines, string(b)
}

// interceptor returns the outcome and effects recorded for backend in l.
func (l auditLine) interceptor(backend string) string {
	for _, ic := range l.Interceptors {
		if ic.BackendID == backend {
			return ic.Outcome + fmt.Sprint(ic.Effects)
		}
	}
	return "absent"
}

// TestAuditAgreesWithDecisions runs a forward, a rewrite and a deny through the real
// server and reads the audit log after shutdown: one parseable line per settled boundary,
// agreeing with what the client and the upstream saw, and no credential anywhere in the
// audit log or the process log.
func TestAuditAgreesWithDecisions(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	s := startServer(t, dir, configYAML(t, up.URL, ""), modelsAndSecrets("gpt-ok"))

	const secret = "AKIAZ7DEMO4HOOKPROXY" // a made-up AWS access key id
	status, _ := s.chat(t, "gpt-ok", "say hello", "req-forward")
	if status != 200 {
		t.Fatalf("forward: %d", status)
	}
	status, _ = s.chat(t, "gpt-ok", "deploy with "+secret+" now", "req-rewrite")
	if status != 200 {
		t.Fatalf("rewrite: %d", status)
	}
	status, body := s.chat(t, "gpt-bad", "say hello", "req-deny")
	if status != http.StatusForbidden || !strings.Contains(body, "policy_denied") {
		t.Fatalf("deny: %d %s", status, body)
	}
	got := up.received()
	if len(got) != 2 || !strings.Contains(got[0], "say hello") ||
		strings.Contains(got[1], secret) || !strings.Contains(got[1], "[REDACTED:") {
		t.Fatalf("upstream received %q", got)
	}

	// The audit log is flushed by the graceful shutdown.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	lines, raw := readAudit(t, filepath.Join(dir, "audit.jsonl"))
	if len(lines) != 3 {
		t.Fatalf("%d audit lines, want 3:\n%s", len(lines), raw)
	}
	for i, tc := range []struct {
		desc, enforcement, permission, models, secrets string
		denied                                         bool
	}{
		{desc: "forward", enforcement: "forwarded", permission: "none", models: "no_effect[]", secrets: "no_effect[]"},
		{desc: "rewrite", enforcement: "rewritten", permission: "none", models: "no_effect[]", secrets: "accepted[modify]"},
		// After the deny the secrets backend only observes the settled boundary.
		{desc: "deny", enforcement: "refused", permission: "deny", models: "accepted[deny]", secrets: "observed[]", denied: true},
	} {
		l := lines[i]
		if l.EventType != "model.request.before" || l.Route != "/openai" || !strings.HasPrefix(l.EventID, "evt_") ||
			l.SessionID == "" || l.TurnID == "" || l.Time.IsZero() {
			t.Errorf("%s: identity fields: %+v", tc.desc, l)
		}
		if l.Enforcement != tc.enforcement || l.Permission != tc.permission {
			t.Errorf("%s: enforcement %q permission %q, want %q %q", tc.desc, l.Enforcement, l.Permission, tc.enforcement, tc.permission)
		}
		if g := l.interceptor("org.example.models"); g != tc.models {
			t.Errorf("%s: models interceptor %s, want %s", tc.desc, g, tc.models)
		}
		if g := l.interceptor("org.example.secrets"); g != tc.secrets {
			t.Errorf("%s: secrets interceptor %s, want %s", tc.desc, g, tc.secrets)
		}
		if tc.denied != (l.Denial != nil) {
			t.Errorf("%s: denial %+v", tc.desc, l.Denial)
		} else if l.Denial != nil && (l.Denial.BackendID != "org.example.models" || l.Denial.Synthetic || l.Denial.Code == "" ||
			!strings.Contains(body, l.Denial.Code)) {
			t.Errorf("%s: denial %+v does not match the refusal the client got: %s", tc.desc, l.Denial, body)
		}
	}
	if strings.Contains(raw, secret) || strings.Contains(raw, "say hello") {
		t.Errorf("audit log holds content although includeContent is off:\n%s", raw)
	}

	logs := s.logs.String()
	for name, text := range map[string]string{"audit log": raw, "process log": logs} {
		if strings.Contains(text, "CANARY") || strings.Contains(strings.ToLower(text), "authorization") {
			t.Errorf("%s contains a credential or credential header:\n%s", name, text)
		}
	}
	// Log lines about the refused request carry its request id and event id.
	denyEvent := lines[2].EventID
	var settled, request bool
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"requestId":"req-deny"`) {
			continue
		}
		settled = settled || strings.Contains(line, `"msg":"boundary settled"`) && strings.Contains(line, `"eventId":"`+denyEvent+`"`)
		request = request || strings.Contains(line, `"msg":"request"`) && strings.Contains(line, `"eventIds":["`+denyEvent+`"]`) &&
			strings.Contains(line, `"status":403`)
	}
	if !settled || !request {
		t.Errorf("log lines of req-deny with event %s: boundary settled %v, request summary %v\n%s", denyEvent, settled, request, logs)
	}
}

// TestMetricsMove scrapes the admin listener while requests flow.
func TestMetricsMove(t *testing.T) {
	up := newUpstream(t)
	s := startServer(t, t.TempDir(), configYAML(t, up.URL, ""), modelsAndSecrets("gpt-ok"))

	const (
		ok200      = `hookproxy_requests_total{route="/openai",status="200"}`
		denied403  = `hookproxy_requests_total{route="/openai",status="403"}`
		forwarded  = `hookproxy_boundary_decisions_total{event="model.request.before",outcome="forwarded"}`
		refused    = `hookproxy_boundary_decisions_total{event="model.request.before",outcome="refused"}`
		modelsCall = `hookproxy_interceptor_latency_seconds_count{backend="org.example.models"}`
		secretCall = `hookproxy_interceptor_latency_seconds_count{backend="org.example.secrets"}`
		upLatency  = `hookproxy_upstream_latency_seconds_count{route="/openai"}`
		upTTFB     = `hookproxy_upstream_ttfb_seconds_count{route="/openai"}`
		streams    = `hookproxy_streams_active{mode="passthrough",route="/plain"}`
	)
	if v := s.metric(t, ok200); v != 0 {
		t.Fatalf("%s before any request: %v", ok200, v)
	}
	s.chat(t, "gpt-ok", "hello", "")
	s.chat(t, "gpt-ok", "hello again", "")
	s.chat(t, "gpt-bad", "hello", "")
	for series, want := range map[string]float64{
		ok200: 2, denied403: 1, forwarded: 2, refused: 1,
		modelsCall: 3, secretCall: 2, // the secrets backend is not called after the deny
		upLatency: 2, upTTFB: 2,
		`hookproxy_audit_dropped_total`:                    0,
		`hookproxy_config_reloads_total{result="failure"}`: 0,
	} {
		if got := s.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if _, body := s.get(t, s.admin+"/metrics"); !strings.Contains(body, "hookproxy_audit_queue_depth ") {
		t.Error("hookproxy_audit_queue_depth is not exposed")
	}

	// A stream counts as active while it flows.
	done := s.slowStream(t, up)
	if v := s.metric(t, streams); v != 1 {
		t.Errorf("%s during the stream = %v, want 1", streams, v)
	}
	if got := <-done; got != wantSlowStream() {
		t.Fatalf("stream body %q", got)
	}
	eventually(t, "the stream gauge to drop", func() bool { return s.metric(t, streams) == 0 })

	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := s.get(t, s.admin+path); status != 200 {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	if status, body := s.get(t, s.admin+"/ahp/manifest"); status != 200 || !strings.Contains(body, `"events"`) {
		t.Errorf("/ahp/manifest: %d %s", status, body)
	}
}

// TestReloadBrokenRegistrationKeepsOldChain: a reload with an invalid registration is
// refused, counted and logged, and the running chain keeps enforcing the old policy.
func TestReloadBrokenRegistrationKeepsOldChain(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	s := startServer(t, dir, configYAML(t, up.URL, ""), modelsAndSecrets("gpt-ok"))
	if status, _ := s.chat(t, "gpt-bad", "hi", ""); status != http.StatusForbidden {
		t.Fatalf("before reload: gpt-bad %d", status)
	}

	for i, tc := range []struct{ doc, problem string }{
		{doc: `{"protocolVersion":"draft","hooks":[`, problem: "hooks.json"}, // not JSON
		// Valid JSON, invalid document: the interceptor misses its failure policy.
		{doc: `{"protocolVersion":"draft","hooks":[{"id":"org.example.models","transport":{"type":"in_process","policy":"models","config":{"allow":["gpt-bad"]}},` +
			`"subscriptions":[{"events":["model.request.before"],"mode":"intercept","timeoutMs":2000,"content":{"default":"body"}}]}]}`,
			problem: "failurePolicy"},
	} {
		before := s.metric(t, `hookproxy_config_reloads_total{result="failure"}`)
		logged := strings.Count(s.logs.String(), tc.problem)
		writeFile(t, filepath.Join(dir, "hooks.json"), tc.doc, 0o600)
		s.reload <- struct{}{} // SIGHUP; the file watcher may report the change as well
		eventually(t, "the failed reload to be counted and logged with its reason", func() bool {
			return s.metric(t, `hookproxy_config_reloads_total{result="failure"}`) > before &&
				strings.Count(s.logs.String(), tc.problem) > logged
		})
		if v := s.metric(t, `hookproxy_config_reloads_total{result="success"}`); v != 0 {
			t.Fatalf("a broken registration was loaded (%v successful reloads)", v)
		}
		if status, _ := s.chat(t, "gpt-bad", "hi", ""); status != http.StatusForbidden {
			t.Errorf("broken reload %d: gpt-bad got %d, want the old policy's 403", i, status)
		}
		if status, _ := s.chat(t, "gpt-ok", "hi", ""); status != 200 {
			t.Errorf("broken reload %d: gpt-ok got %d, want 200", i, status)
		}
	}
	if !strings.Contains(s.logs.String(), "configuration reload failed; the running configuration stays in effect") {
		t.Error("the failed reload was not logged")
	}
	if status, _ := s.get(t, s.admin+"/readyz"); status != 200 {
		t.Errorf("/readyz after a failed reload: %d", status)
	}
}

// TestReloadNewRegistrationTakesEffect: saving a new registration file is picked up by
// the watcher and swapped in; a stream in flight during the swap finishes on the old
// configuration.
func TestReloadNewRegistrationTakesEffect(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	s := startServer(t, dir, configYAML(t, up.URL, ""), modelsAndSecrets("gpt-ok", "gpt-new"))
	if status, _ := s.chat(t, "gpt-ok", "hi", ""); status != 200 {
		t.Fatalf("before reload: gpt-ok %d", status)
	}
	inFlight := s.slowStream(t, up)

	// No signal: the file change alone triggers the reload.
	writeFile(t, filepath.Join(dir, "hooks.json"), modelsAndSecrets("gpt-new"), 0o600)
	eventually(t, "the new deny to apply", func() bool {
		status, _ := s.chat(t, "gpt-ok", "hi", "")
		return status == http.StatusForbidden
	})
	if status, _ := s.chat(t, "gpt-new", "hi", ""); status != 200 {
		t.Errorf("after reload: gpt-new %d, want 200", status)
	}
	if got := <-inFlight; got != wantSlowStream() {
		t.Errorf("the stream in flight during the reload was cut: %q", got)
	}
	if v := s.metric(t, `hookproxy_config_reloads_total{result="success"}`); v != 1 {
		t.Errorf("successful reloads = %v, want 1", v)
	}

	// SIGHUP reloads too, and a changed configuration file is picked up the same way.
	cfgPath := filepath.Join(dir, "hookproxy.yaml")
	cfgText, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "other.json"), modelsAndSecrets("gpt-ok"), 0o600)
	writeFile(t, cfgPath, strings.Replace(string(cfgText), "registration: hooks.json", "registration: other.json", 1), 0o600)
	s.reload <- struct{}{}
	eventually(t, "the configuration naming another registration to apply", func() bool {
		status, _ := s.chat(t, "gpt-ok", "hi", "")
		return status == 200
	})
	// The new registration file is watched from now on.
	writeFile(t, filepath.Join(dir, "other.json"), modelsAndSecrets("gpt-new"), 0o600)
	eventually(t, "a change of the newly named registration to apply", func() bool {
		status, _ := s.chat(t, "gpt-ok", "hi", "")
		return status == http.StatusForbidden
	})
}

// TestReadinessPersistentBackend: /readyz is 503 while a persistent stdio backend cannot
// start and 200 once it runs; shutdown stops the backend process.
func TestReadinessPersistentBackend(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "backend.sh")
	pidFile := filepath.Join(dir, "backend.pid")
	reg := `{"protocolVersion":"draft","hooks":[{"id":"org.example.stdio","transport":{"type":"stdio","command":` +
		strconv.Quote(script) + `,"lifecycle":"persistent"},` +
		`"subscriptions":[{"events":["turn.end"],"mode":"observe","content":{"default":"metadata"}}]}]}`
	s := startServer(t, dir, configYAML(t, up.URL, ""), reg)

	status, body := s.get(t, s.admin+"/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "org.example.stdio") {
		t.Fatalf("/readyz without the backend: %d %s", status, body)
	}
	if status, _ := s.get(t, s.admin+"/healthz"); status != 200 {
		t.Errorf("/healthz: %d", status)
	}
	// The backend appears: a process that records its pid and reads stdin until EOF.
	writeFile(t, script, "#!/bin/sh\necho $$ > "+pidFile+"\nexec cat >/dev/null\n", 0o755)
	eventually(t, "/readyz 200 once the backend runs", func() bool {
		status, _ := s.get(t, s.admin+"/readyz")
		return status == 200
	})
	pid := readPid(t, pidFile)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("backend process %d: %v", pid, err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("backend process %d still runs after shutdown", pid)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, "the backend's pid file", func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// TestOldGenerationClosesAfterLastRequest: a replaced configuration keeps its chain (and
// its persistent backend process) until the last request using it is done.
func TestOldGenerationClosesAfterLastRequest(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "backend.sh")
	pids := filepath.Join(dir, "pids")
	writeFile(t, script, "#!/bin/sh\necho $$ >> "+pids+"\nexec cat >/dev/null\n", 0o755)
	reg := `{"protocolVersion":"draft","hooks":[{"id":"org.example.stdio","transport":{"type":"stdio","command":` +
		strconv.Quote(script) + `,"lifecycle":"persistent"},` +
		`"subscriptions":[{"events":["turn.end"],"mode":"observe","content":{"default":"metadata"}}]}]}`
	cfgPath := filepath.Join(dir, "hookproxy.yaml")
	writeFile(t, cfgPath, configYAML(t, up.URL, ""), 0o600)
	writeFile(t, filepath.Join(dir, "hooks.json"), reg, 0o600)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(runtimeOptions{ConfigPath: cfgPath})
	if err := rt.start(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(t.Context()) })

	started := func(n int) []int {
		var out []int
		eventually(t, fmt.Sprintf("%d backend processes to start", n), func() bool {
			b, _ := os.ReadFile(pids)
			f := strings.Fields(string(b))
			if len(f) < n {
				return false
			}
			out = out[:0]
			for _, s := range f {
				pid, _ := strconv.Atoi(s)
				out = append(out, pid)
			}
			return true
		})
		return out
	}
	first := started(1)[0] // the first generation starts its backend at load

	old := rt.acquire() // a request in flight on the first generation
	if err := rt.Reload("test"); err != nil {
		t.Fatal(err)
	}
	if rt.Generation() != 2 {
		t.Fatalf("generation %d after reload", rt.Generation())
	}
	second := started(2)[1]
	time.Sleep(100 * time.Millisecond)
	select {
	case <-old.closed:
		t.Fatal("the old generation closed while a request still used it")
	default:
	}
	if err := syscall.Kill(first, 0); err != nil {
		t.Fatalf("the old backend stopped while a request still used its chain: %v", err)
	}
	old.release() // the request finishes
	select {
	case <-old.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the old generation did not close after its last request")
	}
	if err := syscall.Kill(first, 0); err == nil {
		t.Errorf("the old generation's backend %d still runs", first)
	}
	if err := syscall.Kill(second, 0); err != nil {
		t.Errorf("the current generation's backend %d stopped: %v", second, err)
	}
}

// TestTracingExport: with tracing configured, spans reach the OTLP/HTTP endpoint, at the
// latest when shutdown flushes them.
func TestTracingExport(t *testing.T) {
	var posts atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	up := newUpstream(t)
	s := startServer(t, t.TempDir(), configYAML(t, up.URL, "tracing:\n  endpoint: "+collector.URL+"\n"), modelsAndSecrets("gpt-ok"))
	if status, _ := s.chat(t, "gpt-ok", "hi", ""); status != 200 {
		t.Fatalf("chat: %d", status)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("no spans reached the collector")
	}
}
