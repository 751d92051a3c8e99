package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// sdkExampleBackend answers every hooks/intercept the way the Rust SDK's example policy
// does: [{"type":"allow"}], whatever the request advertised.
func sdkExampleBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID *string `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		idJSON, _ := json.Marshal(*m.ID)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(idJSON) + `,"result":{"protocolVersion":"draft","effects":[{"type":"allow"}]}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func httpBackendRegistration(id, url string) string {
	return `{"protocolVersion":"draft","hooks":[{"id":"` + id + `","transport":{"type":"http","url":"` + url + `"},"subscriptions":[` +
		`{"events":["model.request.before"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"metadata"}}]}]}`
}

// TestInvalidReplyIsNamedAsAProtocolFault: a backend that answers an unadvertised effect
// (allow: a proxy never advertises it) is refused as hookproxy.backend_invalid_reply in
// the client's error, in the audit record (violation and offending effect), in the
// metrics and in one warning naming the backend. The control is an unreachable backend:
// the same registration then refuses as hookproxy.fail_closed, with no violation
// (AHP-FAIL-001: the failure policy applied, and the audit record tells a synthetic denial
// from an explicit one).
func TestInvalidReplyIsNamedAsAProtocolFault(t *testing.T) {
	const backend = "org.example.rust-sdk-example"
	tests := []struct {
		desc, url, wantCode, wantViolation, wantEffect, wantReason string
	}{
		{desc: "allow from the SDK example", url: sdkExampleBackend(t).URL + "/ahp", wantCode: "hookproxy.backend_invalid_reply",
			wantViolation: "unadvertised_effect", wantEffect: "allow", wantReason: "violates the hook protocol"},
		{desc: "control: unreachable backend", url: "http://" + testsupport.FreeAddr(t) + "/ahp", wantCode: "hookproxy.fail_closed",
			wantReason: "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t)
			dir := t.TempDir()
			s := startServer(t, dir, configYAML(t, up.URL, ""), httpBackendRegistration(backend, tc.url))
			status, body := s.chat(t, "gpt-ok", "say hello", "req-invalid")
			var refusal struct {
				Error struct {
					Message string `json:"message"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &refusal)
			if status != http.StatusForbidden || refusal.Error.Code != tc.wantCode ||
				!strings.Contains(refusal.Error.Message, backend) || !strings.Contains(refusal.Error.Message, tc.wantReason) {
				t.Fatalf("client got %d %s, want 403 with code %s naming %s", status, body, tc.wantCode, backend)
			}
			if got := up.received(); len(got) != 0 {
				t.Fatalf("the refused request reached the upstream: %q", got)
			}
			series := `hookproxy_backend_invalid_replies_total{backend="` + backend + `",effect="allow",violation="unadvertised_effect"}`
			wantCount := 0.0
			if tc.wantViolation != "" {
				wantCount = 1
			}
			if got := s.metric(t, series); got != wantCount {
				t.Errorf("%s = %v, want %v", series, got, wantCount)
			}
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			_, raw := readAudit(t, filepath.Join(dir, "audit.jsonl"))
			var rec struct {
				Interceptors []struct {
					BackendID       string `json:"backendId"`
					FailureKind     string `json:"failureKind"`
					Violation       string `json:"violation"`
					OffendingEffect string `json:"offendingEffect"`
				} `json:"interceptors"`
				Denial struct {
					Code      string `json:"code"`
					Synthetic bool   `json:"synthetic"`
				} `json:"denial"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(raw)), &rec); err != nil || len(rec.Interceptors) != 1 {
				t.Fatalf("audit: %v\n%s", err, raw)
			}
			ic := rec.Interceptors[0]
			if rec.Denial.Code != tc.wantCode || !rec.Denial.Synthetic || ic.BackendID != backend ||
				ic.Violation != tc.wantViolation || ic.OffendingEffect != tc.wantEffect {
				t.Errorf("audit record %s, want denial %s, violation %q, offending effect %q", raw, tc.wantCode, tc.wantViolation, tc.wantEffect)
			}
			var warnings int
			for _, line := range strings.Split(s.logs.String(), "\n") {
				if strings.Contains(line, `"requestId":"req-invalid"`) && strings.Contains(line, `"backend":"`+backend+`"`) &&
					strings.Contains(line, `"level":"warn"`) {
					warnings++
					if tc.wantViolation != "" && (!strings.Contains(line, `"violation":"`+tc.wantViolation+`"`) || !strings.Contains(line, `"offendingEffect":"allow"`)) {
						t.Errorf("warning does not name the violation: %s", line)
					}
				}
			}
			if warnings != 1 {
				t.Errorf("%d warnings about the failed call, want exactly 1:\n%s", warnings, s.logs.String())
			}
		})
	}
}
