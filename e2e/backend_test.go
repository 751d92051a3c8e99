package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// The made-up credential of the scenarios. It has the shape of an AWS access key id so
// that it looks like what a redaction policy is written for; it is not a real key.
const (
	secret   = "AKIAE2EFAKESECRET042"
	redacted = "[REDACTED]"
)

// Texts the scripted backends put into the conversation, so the tests can find them.
const (
	denyReason   = "prompts must not carry cloud credentials"
	denyCode     = "com.example.e2e.credentials"
	toolDeny     = "destructive shell commands are not allowed"
	injectedText = "E2E-INJECTED: answer in one sentence."
	suppliedText = "Supplied by policy: the deploy is paused."
	rewrittenCmd = "ls -la /tmp"
)

// effect is one effect object of a reply, written as plain JSON: the backend speaks the
// protocol on its own and does not borrow the product's wire types.
type effect map[string]any

// script decides the effects of one hooks/intercept from the event. It runs in the HTTP
// backend and, unchanged, in the stdio child process.
type script func(ev gjson.Result) []effect

// textMessage is a canonical message with one text part (AHP-CONTENT-001).
func textMessage(id, role, text string) map[string]any {
	return map[string]any{"id": id, "role": role, "parts": []any{map[string]any{
		"id": id + ".0", "kind": "text", "mediaType": "text/plain", "selection": "body", "text": text}}}
}

// redactItems returns the event's items with the secret replaced. The items are edited as
// JSON text so that every id, role and part survives exactly as the proxy sent it.
func redactItems(ev gjson.Result) json.RawMessage {
	return json.RawMessage(strings.ReplaceAll(ev.Get("items").Raw, secret, redacted))
}

var scripts = map[string]script{
	// none answers every event with no effects.
	"none": func(gjson.Result) []effect { return nil },

	"deny-request": func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "model.request.before" {
			return nil
		}
		return []effect{{"type": "deny", "reason": denyReason, "code": denyCode}}
	},

	// redact replaces the whole message list at model.request.before (target request) and
	// the tool result at tool.after (target output) by the same list without the secret.
	"redact": func(ev gjson.Result) []effect {
		target := map[string]string{"model.request.before": "request", "tool.after": "output"}[ev.Get("type").String()]
		if target == "" || !strings.Contains(ev.Get("items").Raw, secret) {
			return nil
		}
		return []effect{{"type": "modify", "target": target, "operation": "replace", "value": redactItems(ev)}}
	},

	"inject-now": func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "model.request.before" {
			return nil
		}
		return []effect{{"type": "inject", "target": "context", "operation": "append", "deliverAt": "now",
			"value": []any{textMessage("e2e-inj-1", "system", injectedText)}}}
	},

	"return": func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "model.request.before" {
			return nil
		}
		return []effect{{"type": "return", "value": []any{textMessage("e2e-ret-1", "assistant", suppliedText)}}}
	},

	"deny-bash": func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "tool.before" || ev.Get("tool.name").String() != "Bash" {
			return nil
		}
		return []effect{{"type": "deny", "reason": toolDeny}}
	},

	"rewrite-bash": func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "tool.before" || ev.Get("tool.name").String() != "Bash" {
			return nil
		}
		return []effect{{"type": "modify", "target": "input", "operation": "replace",
			"value": map[string]any{"command": rewrittenCmd}}}
	},
}

// replyTo answers one frame: the JSON-RPC response of a hooks/intercept (id equal to the
// request id, protocolVersion "draft"), or nil for a notification.
func replyTo(frame []byte, sc script) ([]byte, error) {
	req := gjson.ParseBytes(frame)
	id := req.Get("id")
	if !id.Exists() {
		return nil, nil // hooks/observe: notifications are never answered
	}
	if m := req.Get("method").String(); m != "hooks/intercept" {
		return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id.Raw),
			"error": map[string]any{"code": -32601, "message": "method not found: " + m}})
	}
	effects := sc(req.Get("params.event"))
	if effects == nil {
		effects = []effect{}
	}
	return json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      json.RawMessage(id.Raw),
		"result":  map[string]any{"protocolVersion": "draft", "effects": effects},
	})
}

// frameLog is the raw frames one backend received, in order.
type frameLog struct {
	mu     sync.Mutex
	frames [][]byte
}

func (l *frameLog) add(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, append([]byte(nil), b...))
}

func (l *frameLog) all() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.frames...)
}

// ahpBackend is a backend the tests registered: where its frames can be read back.
type ahpBackend interface {
	Frames(t testing.TB) [][]byte
}

// httpBackend is a loopback AHP backend over the HTTP binding (AHP-HTTP-001).
type httpBackend struct {
	*httptest.Server
	log frameLog
}

func (b *httpBackend) Frames(testing.TB) [][]byte { return b.log.all() }

// URL of the hook endpoint; a path is part of the binding (POST to the exact URL).
func (b *httpBackend) endpoint() string { return b.Server.URL + "/ahp/hooks" }

func newHTTPBackend(t testing.TB, scriptName string) *httpBackend {
	t.Helper()
	sc, ok := scripts[scriptName]
	if !ok {
		t.Fatalf("unknown script %q", scriptName)
	}
	b := &httpBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/ahp/hooks" {
			http.Error(w, "not the hook endpoint", http.StatusNotFound)
			return
		}
		frame, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.log.add(frame)
		reply, err := replyTo(frame, sc)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if reply == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	t.Cleanup(b.Close)
	return b
}

// hangingBackend accepts hooks/intercept and never answers: the proxy's deadline is the
// only way out. Handlers return when the proxy gives up on the call or the test ends.
type hangingBackend struct {
	*httptest.Server
	log  frameLog
	stop chan struct{}
}

func (b *hangingBackend) Frames(testing.TB) [][]byte { return b.log.all() }
func (b *hangingBackend) endpoint() string           { return b.Server.URL + "/ahp/hooks" }

func newHangingBackend(t testing.TB) *hangingBackend {
	t.Helper()
	b := &hangingBackend{stop: make(chan struct{})}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		frame, _ := io.ReadAll(r.Body)
		b.log.add(frame)
		select {
		case <-r.Context().Done():
		case <-b.stop:
		}
	}))
	t.Cleanup(func() { close(b.stop); b.Close() })
	return b
}

// stdioBackend is this test binary re-executed as a persistent stdio backend.
type stdioBackend struct {
	script, record string
}

func newStdioBackend(t testing.TB, scriptName string) *stdioBackend {
	t.Helper()
	if _, ok := scripts[scriptName]; !ok {
		t.Fatalf("unknown script %q", scriptName)
	}
	return &stdioBackend{script: scriptName, record: t.TempDir() + "/frames.jsonl"}
}

// transport is the registration's transport object for this backend.
func (b *stdioBackend) transport(t testing.TB) map[string]any {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	return map[string]any{"type": "stdio", "command": exe, "lifecycle": "persistent",
		"args": []string{stdioBackendArg, b.script, b.record}}
}

func (b *stdioBackend) Frames(t testing.TB) [][]byte {
	t.Helper()
	data, err := os.ReadFile(b.record)
	if os.IsNotExist(err) {
		return nil // the process was never started: no event reached it
	}
	if err != nil {
		t.Fatalf("stdio backend frames: %v", err)
	}
	var out [][]byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) > 0 {
			out = append(out, line)
		}
	}
	return out
}

// eventsOf returns the event types of the intercept frames, in order.
func eventsOf(frames [][]byte) []string {
	var out []string
	for _, f := range frames {
		if gjson.GetBytes(f, "method").String() == "hooks/intercept" {
			out = append(out, gjson.GetBytes(f, "params.event.type").String())
		}
	}
	return out
}

// assertFrames checks what a backend received: every intercept request validates against
// the draft schema, every notification against the observe schema, the JSON-RPC id is the
// event id, and no frame carries a client credential (credentials never appear in hook
// events).
func assertFrames(t *testing.T, b ahpBackend, credentials ...string) [][]byte {
	t.Helper()
	frames := b.Frames(t)
	for i, f := range frames {
		for _, c := range credentials {
			if bytes.Contains(f, []byte(c)) {
				t.Errorf("frame %d carries the client credential %q", i, c)
			}
		}
		schema := "intercept-request.schema.json"
		if gjson.GetBytes(f, "method").String() == "hooks/observe" {
			schema = "observe-notification.schema.json"
		} else if id, evID := gjson.GetBytes(f, "id").String(), gjson.GetBytes(f, "params.event.id").String(); id != evID {
			t.Errorf("frame %d: JSON-RPC id %q differs from event id %q", i, id, evID)
		}
		if err := ahptest.ValidIfAvailable(t, schema, f); err != nil {
			t.Errorf("frame %d (%s) is not valid AHP: %v\n%s", i, gjson.GetBytes(f, "params.event.type"), err, f)
		}
	}
	return frames
}

// subscription is one subscription of a registered backend.
type subscription struct {
	events        []string
	timeoutMs     int
	failurePolicy string
}

// hookEntry renders one backend of the registration document's hooks array.
func hookEntry(id string, transport map[string]any, subs ...subscription) map[string]any {
	var ss []any
	for _, s := range subs {
		timeout, policy := s.timeoutMs, s.failurePolicy
		if timeout == 0 {
			timeout = 5000
		}
		if policy == "" {
			policy = "fail-closed"
		}
		ss = append(ss, map[string]any{"events": s.events, "mode": "intercept", "timeoutMs": timeout,
			"failurePolicy": policy, "content": map[string]string{"default": "body"}})
	}
	return map[string]any{"id": id, "transport": transport, "subscriptions": ss}
}

// registrationDoc renders a whole registration document (protocolVersion draft, ordered
// hooks).
func registrationDoc(t testing.TB, hooks ...map[string]any) []byte {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"protocolVersion": "draft", "hooks": hooks})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
