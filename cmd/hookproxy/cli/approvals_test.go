package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

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
	// hooks/capabilities (its manifest) advertises ask at tool.before: an approval path exists.
	mresp, err := http.Get("http://" + admins[0] + "/ahp/manifest")
	if err != nil {
		t.Fatal(err)
	}
	manifest, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !gjson.GetBytes(manifest, `events.#(event=="tool.before").capabilities.effects.#(=="ask")`).Exists() {
		t.Fatalf("the manifest does not advertise ask at tool.before: %s", manifest)
	}
	// Hold on A.
	req, _ := http.NewRequest(http.MethodPost, "http://"+reps[0].listen+"/openai/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"push it"}]}`))
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
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

// An MCP tools/call held by `hookproxy serve` and approved with the CLI; the client is the
// official MCP Go SDK, the server too. The server is not called until the approval; a
// second call is denied with the CLI and never reaches it.
func TestMCPToolCallApprovedWithCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	t.Setenv("HP_TEST_APPROVER_TOKEN", "mcp-approver-token")
	var mu sync.Mutex
	var deleted []string
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "files", Version: "1.0.0"}, nil)
	type pathArgs struct {
		Path string `json:"path"`
	}
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "delete_file", Description: "Delete a file."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in pathArgs) (*mcpsdk.CallToolResult, any, error) {
			mu.Lock()
			deleted = append(deleted, in.Path)
			mu.Unlock()
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	up := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	defer up.Close()
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), deleted...)
	}

	dir := t.TempDir()
	reg := strings.Replace(askPushRegistration, `{"name":"push","tool":"Bash","command":"git","inputPattern":"push","action":"ask"}`,
		`{"name":"deletes","tool":"delete_file","action":"ask"}`, 1)
	if err := os.WriteFile(filepath.Join(dir, "hooks.json"), []byte(reg), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, admin := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	cfgText := "listen: " + listen + "\nadmin:\n  listen: " + admin + "\n  tokenRef: env:HP_TEST_APPROVER_TOKEN\n" +
		"registration: hooks.json\nroutes:\n  - {prefix: /mcp/files, api: mcp, upstream: " + up.URL + "}\n"
	cfgPath := filepath.Join(dir, "hookproxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := hookproxyBinary(t)
	startReplica(t, bin, cfgPath, listen, admin)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: "http://" + listen + "/mcp/files", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	for _, tc := range []struct {
		path, verb string
		ran        bool
	}{{"/srv/old.log", "approve", true}, {"/srv/keep.db", "deny", false}} {
		type answer struct {
			res *mcpsdk.CallToolResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": tc.path}})
			done <- answer{res, err}
		}()
		var id string
		for id == "" && ctx.Err() == nil {
			code, out, stderr := runBinary(t, bin, "approvals", "list", "--admin", admin, "--token-env", "HP_TEST_APPROVER_TOKEN")
			if code != 0 {
				t.Fatalf("list: %s", stderr)
			}
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) > 2 && f[1] == "pending" && f[2] == "delete_file" && strings.Contains(line, tc.path) {
					id = f[0]
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if n := len(got()); n != map[bool]int{true: 1, false: 0}[tc.path == "/srv/keep.db"] {
			t.Fatalf("the server was called before the decision: %v", got())
		}
		if code, out, stderr := runBinary(t, bin, "approvals", tc.verb, id, "--reason", "checked", "--admin", admin, "--token-env", "HP_TEST_APPROVER_TOKEN"); code != 0 {
			t.Fatalf("%s: %s %s", tc.verb, out, stderr)
		}
		a := <-done
		if a.err != nil {
			t.Fatalf("CallTool: %v", a.err)
		}
		text := ""
		for _, c := range a.res.Content {
			if tcn, ok := c.(*mcpsdk.TextContent); ok {
				text += tcn.Text
			}
		}
		if tc.ran && (a.res.IsError || text != "deleted "+tc.path) {
			t.Fatalf("approved call: %+v %q", a.res, text)
		}
		if !tc.ran && (!a.res.IsError || !strings.Contains(text, "denied by admin: checked")) {
			t.Fatalf("denied call: %+v %q", a.res, text)
		}
	}
	if d := got(); len(d) != 1 || d[0] != "/srv/old.log" {
		t.Fatalf("the server ran %v, want only the approved call", d)
	}
}
