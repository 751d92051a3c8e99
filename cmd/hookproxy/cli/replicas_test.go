package cli

// Shared state across replicas, end to end with real processes: `hookproxy serve` children built from this
// repository, a real redis-server child, a tool.after backend on loopback HTTP speaking
// AHP (not the built-in secrets policy: no defence in depth hides a lost decision), and a
// recording model upstream. Real children rather than two in-process servers, because
// what is under test is what a second process or a restart does not share: only the
// configured store crosses the process boundary.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/internal/redistest"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

const replicaSecret = "AKIAIOSFODNN7EXAMPLE"

// recordingUpstream answers chat completions (SSE when asked to stream) and keeps every
// body it received.
type recordingUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		if gjson.GetBytes(b, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":null}]}`+"\n\n"+
				`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
				"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *recordingUpstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// redactingBackend is a tool.after backend over AHP HTTP: it replaces the secret in the
// tool output (modify output replace) and counts the tool.after events per call id.
type redactingBackend struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newRedactingBackend(t *testing.T) *redactingBackend {
	b := &redactingBackend{calls: map[string]int{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		frame, _ := io.ReadAll(r.Body)
		req := gjson.ParseBytes(frame)
		ev := req.Get("params.event")
		var effects []any
		if ev.Get("type").String() == "tool.after" {
			b.mu.Lock()
			b.calls[ev.Get("call.id").String()]++
			b.mu.Unlock()
			if items := ev.Get("items").Raw; strings.Contains(items, replicaSecret) {
				effects = append(effects, map[string]any{"type": "modify", "target": "output", "operation": "replace",
					"value": json.RawMessage(strings.ReplaceAll(items, replicaSecret, "[REDACTED]"))})
			}
		}
		if effects == nil {
			effects = []any{}
		}
		reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(req.Get("id").Raw),
			"result": map[string]any{"protocolVersion": "draft", "effects": effects}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *redactingBackend) count(callID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[callID]
}

// replica is one `hookproxy serve` child.
type replica struct {
	listen string
	cmd    *exec.Cmd
	stderr *testsupport.LockedBuffer
	done   chan struct{}
}

func startReplica(t *testing.T, bin, cfgPath, listen, admin string) *replica {
	t.Helper()
	r := &replica{listen: listen, stderr: &testsupport.LockedBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("replica %s stderr:\n%s", listen, r.stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return r
			}
		}
		select {
		case <-r.done:
			t.Fatalf("replica exited at start: %s", r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never became ready: %v\n%s", err, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *replica) stop() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// writeReplicaConfig writes one replica's configuration and returns its path.
func writeReplicaConfig(t *testing.T, dir, name, listen, admin, upstream, backend, stateBlock string) string {
	t.Helper()
	reg := `{"protocolVersion":"draft","hooks":[{"id":"com.example.redactor","transport":{"type":"http","url":"` + backend + `/ahp/hooks"},` +
		`"subscriptions":[{"events":["tool.after"],"mode":"intercept","timeoutMs":5000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`
	cfg := "listen: " + listen + "\nadmin: " + admin + "\nregistration: hooks.json\n" +
		"routes:\n  - prefix: /openai\n    api: openai\n    upstream: " + upstream + "\n" + stateBlock
	if err := os.WriteFile(filepath.Join(dir, "hooks.json"), []byte(reg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// toolLoop is the k-th request of one agent's tool loop: the prompt, then k tool calls
// with their results; the first result carries the secret.
func toolLoop(k int, stream bool) string {
	msgs := []string{`{"role":"user","content":"deploy the app"}`}
	for i := 1; i <= k; i++ {
		id := fmt.Sprint("call_", i)
		out := "step " + strconv.Itoa(i) + " ok"
		if i == 1 {
			out = "aws_access_key_id = " + replicaSecret
		}
		msgs = append(msgs,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"`+id+`","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"step `+strconv.Itoa(i)+`\"}"}}]}`,
			`{"role":"tool","tool_call_id":"`+id+`","content":`+strconv.Quote(out)+`}`)
	}
	return `{"model":"gpt-4o","stream":` + strconv.FormatBool(stream) + `,"messages":[` + strings.Join(msgs, ",") + `]}`
}

func postLoop(t *testing.T, listen, session, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/openai/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test-replicas-0123456789")
	req.Header.Set("X-Hookproxy-Session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(got), "done") {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
}

// TestReplicasShareStateOnRedis: one tool loop whose requests alternate between two
// replicas sharing one Redis. The secret the backend redacted at the first request never
// reaches the upstream again, and the other replica knows the decision: the backend is
// asked about the secret's result exactly once.
func TestReplicasShareStateOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	rds := redistest.Start(t)
	bin := hookproxyBinary(t)
	up, backend := newRecordingUpstream(t), newRedactingBackend(t)
	stateBlock := "state:\n  backend: redis\n  redis:\n    url: " + rds.URL() + "\n    keyPrefix: \"replicas-test:\"\n    timeoutMs: 1000\n"
	var reps []*replica
	for i := range 2 {
		dir := t.TempDir()
		listen, admin := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
		cfg := writeReplicaConfig(t, dir, "hookproxy.yaml", listen, admin, up.URL, backend.URL, stateBlock)
		if code, _, stderr := runBinary(t, bin, "validate", "--config", cfg); code != 0 {
			t.Fatalf("replica %d config does not validate: %s", i, stderr)
		}
		reps = append(reps, startReplica(t, bin, cfg, listen, admin))
	}
	const steps = 4
	for _, stream := range []bool{false, true} {
		session := "loop-" + strconv.FormatBool(stream)
		for k := 1; k <= steps; k++ {
			postLoop(t, reps[k%2].listen, session, toolLoop(k, stream))
		}
	}
	bodies := up.received()
	if len(bodies) != 2*steps {
		t.Fatalf("upstream received %d requests, want %d", len(bodies), 2*steps)
	}
	if !strings.Contains(toolLoop(steps, true), replicaSecret) {
		t.Fatal("control: the client's body carries no secret")
	}
	for i, b := range bodies {
		if strings.Contains(b, replicaSecret) || !strings.Contains(b, "[REDACTED]") {
			t.Fatalf("upstream request %d: %s", i+1, b)
		}
	}
	// call_1 was decided once per loop (two loops), by whichever replica saw it first; the
	// other replica re-applied the shared record instead of asking again.
	if n := backend.count("call_1"); n != 2 {
		t.Fatalf("tool.after for the redacted result: %d, want 2 (once per loop): the replicas do not share the decision", n)
	}
	for k := 2; k <= steps; k++ {
		if n := backend.count(fmt.Sprint("call_", k)); n != 2 {
			t.Fatalf("tool.after for call_%d: %d, want 2", k, n)
		}
	}
}

// TestRestartWithMemoryStoreReSettles: the only process restarts mid-loop with the memory
// store; the restarted process does not know the decision, asks the backend again, and
// the secret does not leak.
func TestRestartWithMemoryStoreReSettles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	bin := hookproxyBinary(t)
	up, backend := newRecordingUpstream(t), newRedactingBackend(t)
	dir := t.TempDir()
	listen, admin := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	cfg := writeReplicaConfig(t, dir, "hookproxy.yaml", listen, admin, up.URL, backend.URL, "")
	for _, stream := range []bool{false, true} {
		session := "restart-" + strconv.FormatBool(stream)
		first := startReplica(t, bin, cfg, listen, admin)
		postLoop(t, listen, session, toolLoop(1, stream))
		postLoop(t, listen, session, toolLoop(2, stream))
		first.stop()
		second := startReplica(t, bin, cfg, listen, admin)
		postLoop(t, listen, session, toolLoop(3, stream))
		second.stop()
	}
	if !strings.Contains(toolLoop(3, false), replicaSecret) {
		t.Fatal("control: the client's body carries no secret")
	}
	for i, b := range up.received() {
		if strings.Contains(b, replicaSecret) || !strings.Contains(b, "[REDACTED]") {
			t.Fatalf("upstream request %d: %s", i+1, b)
		}
	}
	// Per loop: decided at the first request, re-applied at the second, decided again
	// after the restart (at least once).
	if n := backend.count("call_1"); n != 4 {
		t.Fatalf("tool.after for the redacted result: %d, want 4 (twice per loop)", n)
	}
}
