package app

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookproxy/hookproxy/capture"
)

// shadowLine is an audit record with a shadow part, as a reader of the log sees it.
type shadowLine struct {
	EventID     string  `json:"eventId"`
	EventType   string  `json:"eventType"`
	Permission  string  `json:"permission"`
	Enforcement *string `json:"enforcement"`
	Shadow      *struct {
		Effects    []string `json:"effects"`
		Permission string   `json:"permission"`
		Flow       string   `json:"flow"`
		Outcome    string   `json:"outcome"`
		Differs    bool     `json:"differs"`
		Diff       string   `json:"diff"`
		Denial     *struct {
			Code      string `json:"code"`
			BackendID string `json:"backendId"`
			Synthetic bool   `json:"synthetic"`
		} `json:"denial"`
	} `json:"shadow"`
}

func readShadowAudit(t *testing.T, path string) (live []auditLine, shadow []shadowLine) {
	t.Helper()
	lines, raw := readAudit(t, path)
	for i, l := range strings.Split(strings.TrimSpace(raw), "\n") {
		var s shadowLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if s.Shadow != nil {
			if s.Enforcement != nil {
				t.Errorf("a shadow record claims an enforcement: %s", l)
			}
			shadow = append(shadow, s)
			continue
		}
		live = append(live, lines[i])
	}
	return live, shadow
}

// TestShadowDenyIsAuditedNotEnforced: the live chain allows gpt-ok, the shadow chain's
// models policy allows only gpt-other. The client is served normally and the upstream
// gets the request; the audit log holds the live forward and, beside it, the shadow's
// deny with differs:true and a diff saying the request would have been refused; the
// shadow metrics count the refusal and the disagreement. Control: the shadow's
// registration enforced as the live one refuses the same request.
func TestShadowDenyIsAuditedNotEnforced(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shadow.json"), modelsAndSecrets("gpt-other"), 0o600)
	s := startServer(t, dir, configYAML(t, up.URL, "shadow:\n  registration: shadow.json\ncapture:\n  dir: capture\n"), modelsAndSecrets("gpt-ok"))

	status, body := s.chat(t, "gpt-ok", "say hello", "req-shadow")
	if status != http.StatusOK || !strings.Contains(body, "hello") {
		t.Fatalf("client got %d %s, want the upstream's answer", status, body)
	}
	if got := up.received(); len(got) != 1 {
		t.Fatalf("upstream received %d requests, want 1", len(got))
	}
	eventually(t, "the shadow's refusal counted", func() bool {
		return s.metric(t, `hookproxy_shadow_decisions_total{outcome="refused"}`) == 1 &&
			s.metric(t, `hookproxy_shadow_disagreements_total{boundary="model.request.before"}`) == 1
	})
	if n := s.metric(t, `hookproxy_shadow_dropped_total`); n != 0 {
		t.Errorf("shadow dropped %v events, want 0", n)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	live, shadow := readShadowAudit(t, filepath.Join(dir, "audit.jsonl"))
	if len(live) != 1 || live[0].Enforcement != "forwarded" || live[0].Permission == "deny" {
		t.Fatalf("live audit = %+v, want one forwarded record", live)
	}
	if len(shadow) != 1 {
		t.Fatalf("want one shadow record, got %d", len(shadow))
	}
	sh := shadow[0]
	if sh.EventID != live[0].EventID || sh.Permission == "deny" || sh.Shadow.Permission != "deny" ||
		sh.Shadow.Outcome != "refused" || !sh.Shadow.Differs || !strings.Contains(sh.Shadow.Diff, "would refuse the model request") ||
		sh.Shadow.Denial == nil || sh.Shadow.Denial.BackendID != "org.example.models" {
		t.Fatalf("shadow record = %+v %+v, want the shadow's deny beside the live allow of event %s", sh, sh.Shadow, live[0].EventID)
	}

	// The capture line holds the event, the live settlement and the shadow's beside it.
	var lines []capture.Line
	if err := capture.Read(filepath.Join(dir, "capture"), func(l *capture.Line) error { lines = append(lines, *l); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].EventID != live[0].EventID || lines[0].Live.Outcome != "forwarded" ||
		lines[0].Shadow == nil || lines[0].Shadow.Outcome != "refused" || !strings.Contains(string(lines[0].Event), "say hello") {
		t.Fatalf("capture lines %+v: want the event with the live forward and the shadow's refusal", lines)
	}

	// Control: the same registration, live, refuses.
	up2 := newUpstream(t)
	s2 := startServer(t, t.TempDir(), configYAML(t, up2.URL, ""), modelsAndSecrets("gpt-other"))
	if status, body := s2.chat(t, "gpt-ok", "say hello", "req-control"); status != http.StatusForbidden {
		t.Fatalf("control: the shadow registration enforced answered %d %s, want 403", status, body)
	}
}

// blockingBackend is an AHP HTTP backend whose calls wait until release is closed (a
// hang), counting calls entered and finished; with crash set it closes each connection
// without answering instead.
type blockingBackend struct {
	*httptest.Server
	release           chan struct{}
	entered, finished atomic.Int64
}

func newBlockingBackend(t *testing.T, crash bool) *blockingBackend {
	b := &blockingBackend{release: make(chan struct{})}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.entered.Add(1)
		defer b.finished.Add(1)
		if crash {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = c.(*net.TCPConn).SetLinger(0)
				_ = c.Close()
			}
			return
		}
		<-b.release
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
		b.Close()
	})
	return b
}

// TestShadowBackendHangOrCrashDelaysNothing: a shadow backend that hangs (gated on a
// channel the test holds) or crashes (drops the connection) delays no client request and
// loses no live decision. Gated, not timed: three requests complete while the hanging
// backend's first call is still blocked; only then is it released, and every live
// decision is in the audit log with the shadow's fail-closed refusal beside it.
func TestShadowBackendHangOrCrashDelaysNothing(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "hang"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t)
			dir := t.TempDir()
			b := newBlockingBackend(t, crash)
			reg := strings.Replace(httpBackendRegistration("org.example.shadow", b.URL+"/ahp"), `"timeoutMs":2000`, `"timeoutMs":60000`, 1)
			writeFile(t, filepath.Join(dir, "shadow.json"), reg, 0o600)
			s := startServer(t, dir, configYAML(t, up.URL, "shadow:\n  registration: shadow.json\n"), modelsAndSecrets("gpt-ok"))
			for i := range 3 {
				status, body := s.chat(t, "gpt-ok", "say hello", "req-"+name+string(rune('a'+i)))
				if status != http.StatusOK || !strings.Contains(body, "hello") {
					t.Fatalf("request %d: client got %d %s", i, status, body)
				}
			}
			if !crash {
				eventually(t, "the shadow backend is called", func() bool { return b.entered.Load() >= 1 })
				if b.finished.Load() != 0 {
					t.Fatal("the hanging backend returned before it was released; the gate proves nothing")
				}
				close(b.release)
			}
			eventually(t, "three shadow refusals", func() bool {
				return s.metric(t, `hookproxy_shadow_decisions_total{outcome="refused"}`) == 3
			})
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			if got := up.received(); len(got) != 3 {
				t.Fatalf("upstream received %d requests, want 3", len(got))
			}
			live, shadow := readShadowAudit(t, filepath.Join(dir, "audit.jsonl"))
			if len(live) != 3 || len(shadow) != 3 {
				t.Fatalf("audit holds %d live and %d shadow records, want 3 and 3", len(live), len(shadow))
			}
			for _, l := range live {
				if l.Enforcement != "forwarded" {
					t.Errorf("live record %s: %s, want forwarded", l.EventID, l.Enforcement)
				}
			}
			for _, sh := range shadow {
				if sh.Shadow.Denial == nil || !sh.Shadow.Denial.Synthetic || !sh.Shadow.Differs {
					t.Errorf("shadow record %+v: want the fail-closed refusal, differing", sh.Shadow)
				}
			}
			raw, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
			if strings.Contains(string(raw), "CANARY") {
				t.Fatal("a credential reached the audit log")
			}
		})
	}
}

// TestShadowReloadsWithTheRegistration: the shadow registration file is watched and
// validated like the live one. A broken shadow document fails the reload (counted, the
// running shadow stays); a new valid one is swapped in: the shadow that agreed with the
// live chain now disagrees, while clients are served as before.
func TestShadowReloadsWithTheRegistration(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "shadow.json"), modelsAndSecrets("gpt-ok"), 0o600)
	s := startServer(t, dir, configYAML(t, up.URL, "shadow:\n  registration: shadow.json\n"), modelsAndSecrets("gpt-ok"))
	disagreements := `hookproxy_shadow_disagreements_total{boundary="model.request.before"}`

	if status, _ := s.chat(t, "gpt-ok", "hi", ""); status != http.StatusOK {
		t.Fatalf("gpt-ok: %d", status)
	}
	eventually(t, "the agreeing shadow's decision", func() bool {
		return s.metric(t, `hookproxy_shadow_decisions_total{outcome="forwarded"}`) == 1
	})

	writeFile(t, filepath.Join(dir, "shadow.json"), `{"protocolVersion":"draft","hooks":[`, 0o600)
	s.reload <- struct{}{}
	eventually(t, "the broken shadow document refused", func() bool {
		return s.metric(t, `hookproxy_config_reloads_total{result="failure"}`) >= 1 &&
			strings.Contains(s.logs.String(), "shadow.registration")
	})

	writeFile(t, filepath.Join(dir, "shadow.json"), modelsAndSecrets("gpt-other"), 0o600)
	eventually(t, "the new shadow document loaded by the watcher", func() bool {
		return s.metric(t, `hookproxy_config_reloads_total{result="success"}`) >= 1
	})
	if n := s.metric(t, disagreements); n != 0 {
		t.Fatalf("disagreements before the new shadow saw traffic: %v", n)
	}
	if status, body := s.chat(t, "gpt-ok", "hi", ""); status != http.StatusOK {
		t.Fatalf("gpt-ok after the reload: %d %s", status, body)
	}
	eventually(t, "the new shadow's disagreement", func() bool { return s.metric(t, disagreements) == 1 })
}
