package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// backendSecret is a made-up AWS access key id in the real format.
const backendSecret = "AKIAZ7BACKENDTEST0PQ"

// cmdToken is the bearer token of the protected backend case; unprotected backends ignore it.
const cmdToken = "cmd-test-token-7d1e"

// interceptLine is a hand-written hooks/intercept request on one line.
const interceptLine = `{"jsonrpc":"2.0","id":"evt_cmd_1","method":"hooks/intercept","params":{"protocolVersion":"draft",` +
	`"event":{"id":"evt_cmd_1","source":"urn:example:h","type":"model.request.before","time":"2026-09-15T12:00:00Z",` +
	`"model":{"id":"gpt-4o","provider":"openai"},"attempt":{"id":"a1","number":1},"params":{},` +
	`"items":[{"id":"m1","role":"user","parts":[{"id":"m1p0","kind":"text","mediaType":"text/plain","selection":"body","text":"key ` + backendSecret + ` here"}]}]},` +
	`"capabilities":{"effects":["deny","modify"],"modify":{"request":{"replace":true,"merge":true}}}}}`

// assertRedacts checks a reply to interceptLine: one modify that removed the key.
func assertRedacts(t *testing.T, reply []byte) {
	t.Helper()
	var r struct {
		ID     string `json:"id"`
		Result struct {
			Effects []ahp.Effect `json:"effects"`
		} `json:"result"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || r.ID != "evt_cmd_1" || len(r.Result.Effects) != 1 {
		t.Fatalf("reply %s (%v)", reply, err)
	}
	e := r.Result.Effects[0]
	if e.Type != ahp.EffectModify || strings.Contains(string(e.Value), backendSecret) || !strings.Contains(string(e.Value), "[REDACTED:aws_access_key_id:") {
		t.Errorf("effect %+v: want a modify that removes the key", e)
	}
}

// startBackend runs `hookproxy backend` in-process on a free loopback port.
func startBackend(t *testing.T, args ...string) (url string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testsupport.LockedBuffer
	ready := make(chan string, 1)
	exit := make(chan int, 1)
	args = append(args, "--listen", "127.0.0.1:0")
	go func() {
		exit <- runBackendContext(ctx, args, strings.NewReader(""), io.Discard, &stderr, func(addr string) { ready <- addr })
	}()
	select {
	case addr := <-ready:
		url = "http://" + addr + "/"
	case code := <-exit:
		cancel()
		t.Fatalf("backend exited %d: %s", code, stderr.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("backend did not start")
	}
	return url, func() (int, string) {
		cancel()
		select {
		case code := <-exit:
			return code, stderr.String()
		case <-time.After(15 * time.Second):
			t.Fatal("backend did not stop")
			return -1, ""
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBackendCommandHTTP(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "policies.json", string(config.DefaultRegistration))
	cfg := writeFile(t, dir, "hookproxy.yaml", "registration: policies.json\nroutes:\n  - prefix: /openai\n    api: openai\n    upstream: https://api.openai.com\n")
	t.Setenv(config.EnvConfig, "")
	t.Setenv("HOOKPROXY_TEST_CMD_TOKEN", cmdToken)
	for _, tc := range []struct {
		desc string
		args []string
	}{
		{"a registration document", []string{"--config", reg}},
		{"a configuration file naming one", []string{"--config", cfg}},
		{"no --config: the embedded default", nil},
		{"a bearer token", []string{"--token-env", "HOOKPROXY_TEST_CMD_TOKEN"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			url, stop := startBackend(t, tc.args...)
			req, err := http.NewRequest(http.MethodPost, url+"any/path", strings.NewReader(interceptLine))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+cmdToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			assertRedacts(t, body)
			code, logs := stop()
			if code != 0 {
				t.Errorf("exit %d after the stop signal: %s", code, logs)
			}
			if !strings.Contains(logs, "hookproxy backend listening") {
				t.Errorf("no startup log on stderr: %s", logs)
			}
		})
	}
}

// TestBackendCommandStdio: stdout carries exactly one protocol line per request and
// nothing else; logs go to stderr.
func TestBackendCommandStdio(t *testing.T) {
	t.Setenv(config.EnvConfig, "")
	in := interceptLine + "\n" + `{"jsonrpc":"2.0","method":"hooks/observe","params":{}}` + "\n" + "garbage\n"
	var stdout, stderr bytes.Buffer
	code := runBackendContext(context.Background(), []string{"--stdio"}, strings.NewReader(in), &stdout, &stderr, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var lines [][]byte
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want 2 (the intercept reply and the parse error):\n%s", len(lines), stdout.String())
	}
	for _, l := range lines {
		if err := ahp.ValidateStdioFrame(l); err != nil {
			t.Errorf("stdout line is not an AHP frame: %v: %s", err, l)
		}
		if bytes.Contains(l, []byte(`"id":"evt_cmd_1"`)) {
			assertRedacts(t, l)
		} else if !bytes.Contains(l, []byte(`"code":-32700`)) || !bytes.Contains(l, []byte(`"id":null`)) {
			t.Errorf("unexpected line %s", l)
		}
	}
	if !strings.Contains(stderr.String(), "serving on stdio") {
		t.Errorf("stderr %q: want the startup log there", stderr.String())
	}
}

func TestBackendCommandErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(config.EnvConfig, "")
	noReg := writeFile(t, dir, "plain.yaml", "registration: none\nroutes:\n  - prefix: /openai\n    api: openai\n    upstream: https://api.openai.com\n")
	httpOnly := writeFile(t, dir, "remote.json", `{"protocolVersion":"draft","hooks":[{"id":"com.example.remote","transport":{"type":"http","url":"https://policy.example.com/ahp"},`+
		`"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"body"}}]}]}`)
	invalid := writeFile(t, dir, "invalid.json", `{"protocolVersion":"draft","hooks":[{"id":"com.example.x","transport":{"type":"in_process","policy":"nope"},`+
		`"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":100,"failurePolicy":"fail-open","content":{"default":"body"}}]}]}`)
	for _, tc := range []struct {
		desc string
		args []string
		code int
		msg  string
	}{
		{"--stdio and --listen", []string{"--stdio", "--listen", "127.0.0.1:0"}, 2, "--stdio excludes"},
		{"--token-env unset", []string{"--token-env", "HOOKPROXY_TEST_UNSET_TOKEN"}, 2, "unset or empty"},
		{"unknown flag", []string{"--bogus"}, 2, ""},
		{"extra argument", []string{"serve"}, 2, "unexpected arguments"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "log level"},
		{"missing file", []string{"--config", filepath.Join(dir, "missing.json")}, 1, "no such file"},
		{"configuration with registration: none", []string{"--config", noReg}, 1, "registration: none"},
		{"no in_process entry", []string{"--config", httpOnly}, 1, "no in_process entry"},
		{"unknown policy", []string{"--config", invalid}, 1, "unknown built-in policy"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var stderr bytes.Buffer
			code := runBackendContext(context.Background(), tc.args, strings.NewReader(""), io.Discard, &stderr, nil)
			if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.msg)
			}
		})
	}
}

// TestDefaultRegistration: the embedded default registration is valid for `hookproxy
// validate` (no problem at all, not even a warning) and is what `hookproxy serve` with no
// configuration builds its chain from: secrets and tools in front of the public APIs.
func TestDefaultRegistration(t *testing.T) {
	cfg := config.Default()
	if len(cfg.RegistrationInline) == 0 {
		t.Fatal("config.Default() carries no registration")
	}
	doc, problems, err := registration.Parse(cfg.RegistrationInline, app.RegistrationOptions())
	if err != nil || len(problems) > 0 {
		t.Fatalf("default registration: %v %v", err, problems)
	}
	policiesSeen := map[string]bool{}
	for _, b := range doc.Hooks {
		policiesSeen[b.Transport.Policy] = b.Transport.Type == registration.TransportInProcess
		for _, s := range b.Subscriptions {
			if s.FailurePolicy != registration.FailClosed || s.TimeoutMs < 100 || s.TimeoutMs > 10000 {
				t.Errorf("%s: failurePolicy %s, timeoutMs %d", b.ID, s.FailurePolicy, s.TimeoutMs)
			}
		}
	}
	if !policiesSeen["secrets"] || !policiesSeen["tools"] {
		t.Errorf("in_process policies %v, want secrets and tools", policiesSeen)
	}
	upstreams := map[string]bool{}
	for _, r := range cfg.Routes {
		upstreams[r.Upstream] = true
	}
	if !upstreams["https://api.openai.com"] || !upstreams["https://api.anthropic.com"] {
		t.Errorf("default routes %+v", cfg.Routes)
	}

	// serve's own path: app.BuildChain on the default configuration.
	ch, err := app.BuildChain(cfg, cfg.Source, zap.NewNop())
	if err != nil || ch == nil {
		t.Fatalf("buildChain(default) = %v, %v", ch, err)
	}
	defer ch.Close()
	for ev, want := range map[string]bool{
		ahp.EventModelRequestBefore: true, ahp.EventToolBefore: true, ahp.EventToolAfter: true,
		ahp.EventModelResponseAfter: false, ahp.EventTurnStart: false,
	} {
		if in, _ := ch.Subscribed(ev); in != want {
			t.Errorf("default chain intercepts %s = %v, want %v", ev, in, want)
		}
	}

	// validate's own path: the default written out as files.
	dir := t.TempDir()
	writeFile(t, dir, "default-registration.json", string(config.DefaultRegistration))
	path := writeFile(t, dir, "hookproxy.yaml", string(config.DefaultYAML())+"registration: default-registration.json\n")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--config", path}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
		t.Errorf("validate the default: exit %d\n%s", code, stderr.String())
	}
}
