//go:build unix

package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/cmd/hookproxy/cli"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/hookproxybin"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// Environment of the suite.
const (
	// EnvAgentsDir is the npm prefix the agents are installed under (.ci/run sets it).
	// When it is set, missing agents fail the tests instead of skipping them.
	EnvAgentsDir = "HOOKPROXY_AGENTS_DIR"
	// EnvRecord names a directory that gets one JSON file per agent run with every
	// request the imitation received.
	EnvRecord = "HOOKPROXY_AGENTS_RECORD"
	// EnvHookproxy names a hookproxy binary to test instead of this checkout's (the test
	// binary started as hookproxy), to run the suite against another build.
	EnvHookproxy = "HOOKPROXY_AGENTS_HOOKPROXY"
)

// agentTimeout bounds one agent run; the scripted conversation takes a few seconds.
const agentTimeout = 2 * time.Minute

// agentsDir is where the npm packages are installed, and whether it was named explicitly.
func agentsDir() (string, bool) {
	if d := os.Getenv(EnvAgentsDir); d != "" {
		return d, true
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", false
	}
	return filepath.Join(cache, "hookproxy-agents"), false
}

// agentBin returns the path of an installed agent CLI, or skips the test (fails it when
// EnvAgentsDir was set: then the install step was meant to put it there).
func agentBin(t *testing.T, name string) string {
	t.Helper()
	dir, explicit := agentsDir()
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("agent %q is not installed at %s (%v); install it with: d=%s; mkdir -p \"$d\" && "+
			"cp e2e/agents/npm/package.json e2e/agents/npm/package-lock.json \"$d\"/ && npm ci --prefix \"$d\" (or run .ci/run)",
			name, bin, err, dir)
		if explicit {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// pinnedVersion reads the exact version of an npm package from npm/package.json.
func pinnedVersion(t *testing.T, pkg string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("npm", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pj struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		t.Fatal(err)
	}
	return pj.Dependencies[pkg]
}

// checkVersion runs `bin --version` and fails the test unless it names the pinned version.
func checkVersion(t *testing.T, bin, pkg string) string {
	t.Helper()
	want := pinnedVersion(t, pkg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	got := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(want) + `($|[^0-9.])`).MatchString(got) {
		t.Fatalf("%s --version = %q, want %s %s (npm/package.json); reinstall the agents", bin, got, pkg, want)
	}
	t.Logf("%s: %s", pkg, got)
	return got
}

// hookproxyBin returns the hookproxy binary the agents talk to: $EnvHookproxy, else this
// test binary started as hookproxy (hookproxybin; see TestMain), so no go build is needed.
func hookproxyBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(EnvHookproxy); bin != "" {
		return bin
	}
	return hookproxybin.Path(t)
}

func TestMain(m *testing.M) {
	hookproxybin.RunIfInvoked(cli.Main)
	os.Exit(m.Run())
}

// proxy is a running hookproxy child process.
type proxy struct {
	url    string // http://127.0.0.1:PORT
	admin  string // http://127.0.0.1:PORT of the admin listener
	dir    string
	stderr *testsupport.LockedBuffer
	stop   func() // SIGTERM (graceful: the audit log and capture flushed), then SIGKILL; idempotent
}

// auditLog returns the decision log written so far.
func (p *proxy) auditLog() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "audit.jsonl"))
	return string(b)
}

// denyReason is the reason of the suite's own tools rule, which the agent should be shown.
const denyReason = "Deleting the scratch directory is blocked (hookproxy agents e2e rule)."

// registration is the embedded default registration (config.DefaultRegistration: the
// built-in tools policy with its destructive-command list, then the secrets policy, both
// fail-closed) with one operator rule added to the tools policy: a recursive rm of the
// scratch victim directory is denied. The default list refuses `rm -r` of /, ~ or a bare
// *, but not of an ordinary directory, and Claude Code refuses those three forms itself
// even with permissions bypassed, so the scripted destructive call is `rm -rf <victim>`.
func registration(t *testing.T, victim string) []byte {
	t.Helper()
	if id := gjson.GetBytes(config.DefaultRegistration, "hooks.0.id").String(); id != "hookproxy.builtin.tools" {
		t.Fatalf("the default registration's first hook is %q, want hookproxy.builtin.tools", id)
	}
	rule := map[string]any{"name": "scratch_victim", "argument": "*",
		"pattern": `\brm[ \t]+(?:-[^\s;&|]+[ \t]+)*` + regexp.QuoteMeta(victim), "reason": denyReason,
		"code": "org.hookproxy.e2e.scratch"}
	reg, err := sjson.SetBytes(config.DefaultRegistration, "hooks.0.transport.config.deny", []any{rule})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// startProxy runs `hookproxy serve` with reg as its registration document and the three
// model routes pointed at upstream. It is stopped (SIGTERM, then SIGKILL) when the test ends.
func startProxy(t *testing.T, upstream string, reg []byte, extraConfig ...string) *proxy {
	t.Helper()
	return startProxyWith(t, upstream, reg, strings.Join(extraConfig, ""))
}

// startProxyWith is startProxy with extra configuration appended verbatim.
func startProxyWith(t *testing.T, upstream string, reg []byte, extra string) *proxy {
	t.Helper()
	bin := hookproxyBin(t)
	dir := t.TempDir()
	listen, admin := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	cfg := "listen: " + listen + "\nadmin: " + admin + "\nregistration: hooks.json\n" +
		"audit:\n  path: audit.jsonl\n" +
		"routes:\n" +
		"  - prefix: /openai\n    api: openai\n    upstream: " + upstream + "\n" +
		"  - prefix: /anthropic\n    api: anthropic\n    upstream: " + upstream + "\n" +
		"  - prefix: /gemini\n    api: gemini\n    upstream: " + upstream + "\n" + extra
	if err := os.WriteFile(filepath.Join(dir, "hookproxy.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hooks.json"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proxy{url: "http://" + listen, admin: "http://" + admin, dir: dir, stderr: &testsupport.LockedBuffer{}}
	cmd := exec.Command(bin, "serve", "--config", filepath.Join(dir, "hookproxy.yaml"), "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var stopOnce sync.Once
	p.stop = func() {
		stopOnce.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("hookproxy log (last 8 KB):\n%s", tail(p.stderr.String(), 8<<10))
			t.Logf("hookproxy audit log (last 8 KB):\n%s", tail(p.auditLog(), 8<<10))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("hookproxy exited before it was ready:\n%s", p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hookproxy never became ready: %v\n%s", err, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// egressTrap is an HTTP(S) forward proxy that the agents are pointed at through
// HTTPS_PROXY/HTTP_PROXY (with NO_PROXY for loopback, where the model API is): every
// attempt to reach any other host lands here, is recorded and refused with 403. It shows
// what non-essential traffic an agent would send (this machine has no internet anyway).
type egressTrap struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []string
	count int
}

func newEgressTrap(t *testing.T) *egressTrap {
	e := &egressTrap{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Method + " " + r.Host
		if r.Method != http.MethodConnect {
			target = r.Method + " " + r.URL.String()
		}
		e.mu.Lock()
		e.count++
		if len(e.seen) < 200 {
			e.seen = append(e.seen, target)
		}
		e.mu.Unlock()
		http.Error(w, "egress refused by the hookproxy agents test", http.StatusForbidden)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *egressTrap) attempts() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

// env returns the proxy variables that route all non-loopback traffic to the trap.
func (e *egressTrap) env() []string {
	u := e.URL
	noProxy := "127.0.0.1,localhost,::1"
	return []string{"HTTPS_PROXY=" + u, "https_proxy=" + u, "HTTP_PROXY=" + u, "http_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=" + noProxy, "no_proxy=" + noProxy}
}

// result is what one agent run did.
type result struct {
	exitCode int
	stdout   string
	stderr   string
	elapsed  time.Duration
	timedOut bool
}

// runAgent runs an agent CLI in its own process group with a closed stdin, the given
// environment only, in dir, bounded by agentTimeout; the whole group is killed at the end.
func runAgent(t *testing.T, bin string, args, env []string, dir string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	var stdout, stderr testsupport.LockedBuffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the agent left behind
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.timedOut, res.exitCode = true, -1
	case errors.As(err, &ee):
		res.exitCode = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", bin, err)
	}
	return res
}

// baseEnv is the environment every agent run starts from: PATH (for bash, cat, rm),
// a temporary HOME, a plain terminal and locale, and the egress trap.
func baseEnv(home string, trap *egressTrap) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8", "NO_COLOR=1",
		"TMPDIR=" + os.TempDir()}
	return append(env, trap.env()...)
}

// saveRecord writes one run's record to $HOOKPROXY_AGENTS_RECORD/<test>.json.
func saveRecord(t *testing.T, version string, res result, im *imitation, trap *egressTrap) {
	dir := os.Getenv(EnvRecord)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	rec := map[string]any{"test": t.Name(), "agent": version, "exit": res.exitCode, "elapsed": res.elapsed.String(),
		"stdout": res.stdout, "stderr": tail(res.stderr, 16<<10), "requests": im.requests(), "egress": trap.attempts()}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Error(err)
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + ".json"
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Error(err)
	}
}

// scratch is the agent's working directory: notes.txt holds the secret the agent reads
// in turn 1; victim/ is what the destructive command of turn 2 deletes.
type scratch struct {
	work, victim, sentinel string
}

// File secret: an AWS access key pair in a credentials-file shape.
const (
	promptKeyID = "AKIAPROMPTKEY7VNX2K4"
	fileKeyID   = "AKIAFILEKEY0Q3X7Z9WB"
)

func newScratch(t *testing.T) scratch {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	victim := filepath.Join(root, "victim")
	for _, d := range []string{work, filepath.Join(victim, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := scratch{work: work, victim: victim, sentinel: filepath.Join(victim, "src", "keep.txt")}
	for name, content := range map[string]string{
		s.sentinel:                         "this file must survive\n",
		filepath.Join(victim, "README.md"): "scratch\n",
		filepath.Join(work, "notes.txt"): "deploy notes\n[default]\naws_access_key_id = " + fileKeyID +
			"\nregion = eu-west-1\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// script reads notes.txt in turn 1 and runs `<rm> <victim>` in turn 2.
func (s scratch) script(rm string) script {
	return script{readCmd: "cat " + filepath.Join(s.work, "notes.txt"), destroyCmd: rm + " " + s.victim}
}

func (s scratch) survived() bool {
	_, err := os.Stat(s.sentinel)
	return err == nil
}

// prompt is what the user types: the marker that starts the scripted conversation and a
// secret of its own.
func prompt() string {
	return "[" + promptMarker + "] Read notes.txt, then clean up the victim directory. " +
		"Use the AWS key " + promptKeyID + " if anything asks for one."
}
