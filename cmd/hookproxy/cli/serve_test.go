package cli

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--log-format", "xml"}, {"--log-level", "loud"}, {"extra"}} {
		if code := runServe(args); code != 2 {
			t.Errorf("runServe(%q) = %d, want 2", args, code)
		}
	}
	if code := runServe([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}); code != 1 {
		t.Errorf("missing config: exit %d, want 1", code)
	}
}

// TestServeGracefulShutdown starts `hookproxy serve`, sends a request the upstream answers
// slowly, delivers SIGTERM while it is in flight, and expects the request to complete and
// the command to exit 0.
func TestServeGracefulShutdown(t *testing.T) {
	entered := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := "listen: " + addr + "\nroutes:\n  - prefix: /plain\n    api: passthrough\n    upstream: " + up.URL + "\n"
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	exit := make(chan int, 1)
	go func() { exit <- runServe([]string{"--config", path, "--log-level", "error"}) }()

	// Wait until the proxy serves (so its signal handler is installed).
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/none")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy never came up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	result := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/plain/x", "application/json", strings.NewReader(`{}`))
		if err != nil {
			result <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- string(b)
	}()
	<-entered
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-result:
		if got != `{"ok":true}` {
			t.Fatalf("in-flight request during shutdown: %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request never completed")
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("serve exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}
