package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// TestServeSIGTERMDuringSlowStream runs the real binary: SIGTERM arrives while a model
// stream is in flight; the proxy stops accepting connections, the client still receives
// the whole stream, the audit line of the request is flushed, and the process exits 0.
func TestServeSIGTERMDuringSlowStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	bin := hookproxyBinary(t)
	dir := t.TempDir()

	const chunks, gap = 10, 200 * time.Millisecond
	chunk := func(i int) string {
		return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"part %d "},"finish_reason":null}]}`+"\n\n", i)
	}
	var want strings.Builder
	for i := range chunks {
		want.WriteString(chunk(i))
	}
	want.WriteString("data: [DONE]\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range chunks {
			_, _ = io.WriteString(w, chunk(i))
			w.(http.Flusher).Flush()
			time.Sleep(gap)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()

	listen, adminAddr := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	reg := `{"protocolVersion":"draft","hooks":[{"id":"org.example.secrets","transport":{"type":"in_process","policy":"secrets","config":{"action":"redact"}},` +
		`"subscriptions":[{"events":["model.request.before"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`
	cfg := "listen: " + listen + "\nadmin: " + adminAddr + "\nregistration: hooks.json\naudit:\n  path: audit.jsonl\n" +
		"limits:\n  shutdownTimeout: 20s\nroutes:\n  - prefix: /openai\n    api: openai\n    upstream: " + up.URL + "\n"
	cfgPath := filepath.Join(dir, "hookproxy.yaml")
	for name, content := range map[string]string{cfgPath: cfg, filepath.Join(dir, "hooks.json"): reg} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var stderr testsupport.LockedBuffer
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("hookproxy stderr:\n%s", stderr.String())
		}
		_ = cmd.Process.Kill()
	}()

	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + adminAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hookproxy never became ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/openai/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-proj-CANARY0123456789abcdefghij")
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("first line of the stream: %v", err)
	}
	got.WriteString(first)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Stop accepting: new connections are refused while the stream still flows.
	refused := false
	for end := time.Now().Add(chunks * gap / 2); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", listen, 200*time.Millisecond)
		if err != nil {
			refused = true
			break
		}
		c.Close()
	}
	if !refused {
		t.Error("the proxy still accepted connections after SIGTERM")
	}

	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the stream was cut after SIGTERM: %v (got %q)", err, got.String()+string(rest))
	}
	got.Write(rest)
	if got.String() != want.String() {
		t.Fatalf("stream after SIGTERM:\n got %q\nwant %q", got.String(), want.String())
	}

	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("hookproxy exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("hookproxy did not exit after SIGTERM")
	}

	// The audit line of the streamed request was flushed before exit.
	b, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		EventType   string `json:"eventType"`
		Enforcement string `json:"enforcement"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &line); err != nil || line.EventType != "model.request.before" || line.Enforcement != "forwarded" {
		t.Errorf("audit log after shutdown (%v): %s", err, b)
	}
	if strings.Contains(string(b)+stderr.String(), "CANARY") {
		t.Error("a credential reached the audit log or the process log")
	}
}
