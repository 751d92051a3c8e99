package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/internal/redistest"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// pushUpstream streams some text and then a Bash call running git push.
func pushUpstream(t *testing.T, command string) *httptest.Server {
	args, _ := json.Marshal(map[string]string{"command": command})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Pushing now."},"finish_reason":null}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_p","type":"function","function":{"name":"Bash","arguments":`+string(mustQuote(string(args)))+`}}]},"finish_reason":null}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func mustQuote(s string) []byte { b, _ := json.Marshal(s); return b }

const askPushRegistration = `{"protocolVersion":"draft","hooks":[{"id":"hookproxy.builtin.tools","transport":{"type":"in_process","policy":"tools",` +
	`"config":{"deny":[{"name":"push","tool":"Bash","command":"git","inputPattern":"push","action":"ask"}]}},` +
	`"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`

// writeAskConfig writes a replica configuration with the ask rule, an admin token from
// the environment and the given state block.
func writeAskConfig(t *testing.T, listen, admin, upstream, extra string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hooks.json"), []byte(askPushRegistration), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "listen: " + listen + "\nadmin:\n  listen: " + admin + "\n  tokenRef: env:HP_TEST_APPROVER_TOKEN\n" +
		"registration: hooks.json\nroutes:\n  - prefix: /openai\n    api: openai\n    upstream: " + upstream + "\n" + extra
	p := filepath.Join(dir, "hookproxy.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two `hookproxy serve` processes on one Redis: the call held by A is listed and approved
// on B with the CLI, and A emits it; without the token the CLI is refused.
func TestApprovalHeldOnAApprovedOnB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	t.Setenv("HP_TEST_APPROVER_TOKEN", "approver-secret-token")
	rds := redistest.Start(t)
	bin := hookproxyBinary(t)
	up := pushUpstream(t, "git push origin main")
	stateBlock := "state:\n  backend: redis\n  redis:\n    url: " + rds.URL() + "\n    keyPrefix: \"approvals-test:\"\n    timeoutMs: 1000\napprovals:\n  timeout: 60s\n"
	var reps []*replica
	var admins []string
	for range 2 {
		listen, admin := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
		reps = append(reps, startReplica(t, bin, writeAskConfig(t, listen, admin, up.URL, stateBlock), listen, admin))
		admins = append(admins, admin)
	}
	// Hold on A.
	req, _ := http.NewRequest(http.MethodPost, "http://"+reps[0].listen+"/openai/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"push it"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var head strings.Builder
	for !strings.Contains(head.String(), "Pushing now.") {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v %s", err, head.String())
		}
		head.WriteString(line)
	}

	// Without the token, B refuses (and says why).
	os.Unsetenv("HP_TEST_APPROVER_TOKEN_CLI")
	code, _, stderr := runBinary(t, bin, "approvals", "list", "--admin", admins[1], "--token-env", "HP_TEST_APPROVER_TOKEN_CLI")
	if code != 1 || !strings.Contains(stderr, "401") {
		t.Fatalf("list without a token: exit %d %s", code, stderr)
	}
	// With it, B lists the record A holds.
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		code, out, stderr := runBinary(t, bin, "approvals", "list", "--admin", admins[1], "--token-env", "HP_TEST_APPROVER_TOKEN")
		if code != 0 {
			t.Fatalf("list: %d %s", code, stderr)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[0], "apr_") && f[1] == "pending" && f[2] == "Bash" {
				id = f[0]
			}
		}
		if id == "" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if id == "" {
		t.Fatal("B never listed the held call")
	}
	code, out, stderr := runBinary(t, bin, "approvals", "show", id, "--admin", admins[1], "--token-env", "HP_TEST_APPROVER_TOKEN")
	if code != 0 || !strings.Contains(out, "git push origin main") || !strings.Contains(out, `"digest": "sha256:`) {
		t.Fatalf("show: %d %s %s", code, out, stderr)
	}
	code, out, stderr = runBinary(t, bin, "approvals", "approve", id, "--reason", "release day", "--admin", admins[1], "--token-env", "HP_TEST_APPROVER_TOKEN")
	if code != 0 || !strings.Contains(out, "approved "+id) || !strings.Contains(out, "by admin") {
		t.Fatalf("approve: %d %s %s", code, out, stderr)
	}
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), `"name":"Bash"`) || !strings.Contains(string(rest), "git push origin main") {
		t.Fatalf("A did not emit the approved call: %s", rest)
	}
	// A replayed decision is a conflict.
	code, _, stderr = runBinary(t, bin, "approvals", "deny", id, "--admin", admins[0], "--token-env", "HP_TEST_APPROVER_TOKEN")
	if code != 1 || !strings.Contains(stderr, "409") {
		t.Fatalf("replayed decision: %d %s", code, stderr)
	}
}
