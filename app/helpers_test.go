package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// Credentials every test request carries. "CANARY" appears nowhere else, so finding it in
// a log or the audit file means a credential leaked.
const (
	canaryBearer = "Bearer sk-proj-CANARYbearer0123456789abcdefghij"
	canaryAPIKey = "sk-ant-api03-CANARYapikey0123456789abcdefghij"
)

// chatAnswer is the upstream's answer to every chat request.
const chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-ok","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

// slowChunks and slowGap shape the upstream's slow stream (/slow): long enough to act on
// it mid-stream, short enough to keep the tests quick.
const (
	slowChunks = 6
	slowGap    = 150 * time.Millisecond
)

// upstream is a loopback model API that records what reached it.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	// streaming receives a value when a slow stream has sent its first chunk.
	streaming chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{streaming: make(chan struct{}, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(body))
		u.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/slow") {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range slowChunks {
				fmt.Fprintf(w, "data: chunk %d\n\n", i)
				w.(http.Flusher).Flush()
				if i == 0 {
					u.streaming <- struct{}{}
				}
				time.Sleep(slowGap)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatAnswer)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// wantSlowStream is the whole body of a slow stream.
func wantSlowStream() string {
	var b strings.Builder
	for i := range slowChunks {
		fmt.Fprintf(&b, "data: chunk %d\n\n", i)
	}
	return b.String()
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	// Write a sibling and rename it over the target, as editors and deployment tools do,
	// so a watcher never reads a half-written file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configYAML is a configuration with an audit log, the registration hooks.json and two
// routes to up; extra is appended verbatim.
func configYAML(t *testing.T, up string, extra string) string {
	return "listen: 127.0.0.1:0\n" +
		"admin: " + testsupport.FreeAddr(t) + "\n" +
		"registration: hooks.json\n" +
		"source: urn:hookproxy:test\n" +
		"audit:\n  path: audit.jsonl\n" +
		"routes:\n" +
		"  - prefix: /openai\n    api: openai\n    upstream: " + up + "\n" +
		"  - prefix: /plain\n    api: passthrough\n    upstream: " + up + "\n" +
		extra
}

// modelsAndSecrets is a registration document: the models policy allows only the given
// model ids (deny otherwise), then the secrets policy redacts credentials in the request,
// both at model.request.before.
func modelsAndSecrets(allow ...string) string {
	q := make([]string, len(allow))
	for i, a := range allow {
		q[i] = strconv.Quote(a)
	}
	sub := `{"events":["model.request.before"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"body"}}`
	return `{"protocolVersion":"draft","hooks":[` +
		`{"id":"org.example.models","transport":{"type":"in_process","policy":"models","config":{"allow":[` + strings.Join(q, ",") + `]}},"subscriptions":[` + sub + `]},` +
		`{"id":"org.example.secrets","transport":{"type":"in_process","policy":"secrets","config":{"action":"redact"}},"subscriptions":[` + sub + `]}]}`
}

// testServer is Run on loopback ports, stopped at the end of the test.
type testServer struct {
	dir    string
	proxy  string // base URL
	admin  string // base URL
	logs   *testsupport.LockedBuffer
	reload chan struct{}

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan error
	err      error
}

// startServer writes configuration and registration into dir and runs the server.
func startServer(t *testing.T, dir, configText, registration string) *testServer {
	t.Helper()
	cfgPath := filepath.Join(dir, "hookproxy.yaml")
	writeFile(t, cfgPath, configText, 0o600)
	if registration != "" {
		writeFile(t, filepath.Join(dir, "hooks.json"), registration, 0o600)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s := &testServer{dir: dir, logs: &testsupport.LockedBuffer{}, reload: make(chan struct{}, 1), done: make(chan error, 1)}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(s.logs), zapcore.DebugLevel))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	started := make(chan [2]string, 1)
	go func() {
		s.done <- Run(ctx, Options{
			Config: cfg, ConfigPath: cfgPath, Logger: logger, Reload: s.reload,
			ReloadDebounce: 50 * time.Millisecond,
			Started:        func(p, a string) { started <- [2]string{p, a} },
		})
	}()
	select {
	case a := <-started:
		s.proxy, s.admin = "http://"+a[0], "http://"+a[1]
	case err := <-s.done:
		cancel()
		t.Fatalf("Run: %v\nlogs:\n%s", err, s.logs)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the server did not start")
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", s.logs)
		}
	})
	return s
}

// stop shuts the server down gracefully and returns Run's result.
func (s *testServer) stop() error {
	s.stopOnce.Do(func() {
		s.cancel()
		select {
		case s.err = <-s.done:
		case <-time.After(30 * time.Second):
			s.err = fmt.Errorf("Run did not return after cancel")
		}
	})
	return s.err
}

// chat sends a chat completion through the proxy with the canary credentials.
func (s *testServer) chat(t *testing.T, model, prompt, requestID string) (int, string) {
	t.Helper()
	body := `{"model":` + strconv.Quote(model) + `,"messages":[{"role":"user","content":` + strconv.Quote(prompt) + `}]}`
	req, err := http.NewRequest(http.MethodPost, s.proxy+"/openai/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", canaryBearer)
	req.Header.Set("X-Api-Key", canaryAPIKey)
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// slowStream starts a GET of the upstream's slow stream through the passthrough route
// and returns once its first chunk has arrived; the channel delivers the whole body.
func (s *testServer) slowStream(t *testing.T, up *upstream) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	resp, err := http.Get(s.proxy + "/plain/slow")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.streaming:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow stream did not start")
	}
	go func() {
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		out <- string(b)
	}()
	return out
}

func (s *testServer) get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of one sample of the admin listener's /metrics, 0 when the
// series does not exist. series is the exposition text before the value, such as
// `hookproxy_requests_total{route="/openai",status="200"}`.
func (s *testServer) metric(t *testing.T, series string) float64 {
	t.Helper()
	status, body := s.get(t, s.admin+"/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// eventually polls cond until it holds or 10 s have passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
