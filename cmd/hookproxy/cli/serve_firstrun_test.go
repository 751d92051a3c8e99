package cli

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// TestServeTakenPort: `serve` on a port another process holds exits 1 with one line on
// stderr that names the address, says it is in use and names the flag to change it; no
// log record, no stack trace. The same for the admin port.
func TestServeTakenPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	bin := hookproxyBinary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().String()
	for _, tc := range []struct {
		desc, flag string
		args       []string
	}{
		{"proxy port", "--listen", []string{"serve", "--listen", taken, "--admin", testsupport.FreeAddr(t)}},
		{"admin port", "--admin", []string{"serve", "--listen", testsupport.FreeAddr(t), "--admin", taken}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, bin, tc.args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			line := strings.TrimSuffix(stderr, "\n")
			if strings.Contains(line, "\n") || strings.Contains(line, "goroutine") || strings.Contains(line, ".go:") || strings.Contains(line, "{") {
				t.Errorf("want one plain line without a stack trace, got:\n%s", stderr)
			}
			for _, want := range []string{"hookproxy serve: cannot listen on " + taken, "already in use", tc.flag + " ADDR"} {
				if !strings.Contains(line, want) {
					t.Errorf("stderr lacks %q: %s", want, line)
				}
			}
		})
	}
	// A flag value that is no address is a usage error, not a bind failure later.
	if code, _, stderr := runBinary(t, bin, "serve", "--listen", "8081"); code != 2 || !strings.Contains(stderr, "want host:port") {
		t.Errorf("serve --listen 8081: exit %d, stderr %q; want 2 and a hint", code, stderr)
	}
}

// TestServeCopiedDefaultKeepsPolicies: config/default.yaml copied with its upstreams
// pointed elsewhere (the newcomer's first edit) still redacts a credential in the prompt,
// and its startup log names the policies; the addresses come from --listen and --admin.
// Control: the same copy with `registration: none` lets the credential reach the
// upstream and says loudly that no policy is in force.
func TestServeCopiedDefaultKeepsPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	bin := hookproxyBinary(t)
	const key = "AKIAZ7COPIED4CONFIG9"
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	defer up.Close()
	copied := string(config.DefaultYAML())
	for _, public := range []string{"https://api.openai.com", "https://api.anthropic.com", "https://generativelanguage.googleapis.com"} {
		copied = strings.ReplaceAll(copied, public, up.URL)
	}

	for _, tc := range []struct {
		desc, extra  string
		wantRedacted bool
		wantLog      []string
	}{
		{"copy as is", "", true, []string{`"policies":["tools","secrets"]`}},
		{"control: registration none", "registration: none\n", false, []string{`"policies":[]`, "NO POLICIES IN FORCE"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			path := filepath.Join(t.TempDir(), "hookproxy.yaml")
			if err := os.WriteFile(path, []byte(copied+tc.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			listen, adminAddr := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
			var logs testsupport.LockedBuffer
			cmd := exec.Command(bin, "serve", "--config", path, "--listen", listen, "--admin", adminAddr)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
			waitReady(t, "http://"+adminAddr+"/readyz", &logs)

			resp, err := http.Post("http://"+listen+"/openai/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"deploy with `+key+` now"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			mu.Lock()
			seen := strings.Join(got, "\n")
			mu.Unlock()
			if seen == "" {
				t.Fatal("the upstream received nothing")
			}
			if redacted := !strings.Contains(seen, key) && strings.Contains(seen, "[REDACTED:aws_access_key_id:"); redacted != tc.wantRedacted {
				t.Errorf("redacted = %v, want %v; the upstream received:\n%s", redacted, tc.wantRedacted, seen)
			}
			for _, want := range append(tc.wantLog, `"listen":"`+listen+`"`, `"admin":"`+adminAddr+`"`) {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %s:\n%s", want, logs.String())
				}
			}
		})
	}
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, url string, logs *testsupport.LockedBuffer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready at %s: %v\n%s", url, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
