package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/proxy"
)

// startProxy runs the real proxy for up on a loopback listener, with the given hooks as its
// registration document (none: a plain proxy), and returns its base URL. The configuration
// goes through config.Parse and the document through registration.Parse, exactly as
// `hookproxy serve` loads them, so the tests cannot build something the loaders reject.
func startProxy(t testing.TB, up *upstream, hooks ...map[string]any) string {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
source: urn:hookproxy:e2e
routes:
  - prefix: /openai
    api: openai
    upstream: %[1]s
  - prefix: /anthropic
    api: anthropic
    upstream: %[1]s
`, up.URL)), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	var ch *chain.Chain
	if len(hooks) > 0 {
		doc, problems, err := registration.Parse(registrationDoc(t, hooks...), registration.Options{})
		if err != nil {
			t.Fatalf("registration: %v (%v)", err, problems)
		}
		ch, err = chain.New(doc, chain.Options{Source: cfg.Source, ObserveTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("chain.New: %v", err)
		}
		t.Cleanup(func() { _ = ch.Close() }) // runs last: stops stdio children after the proxy
	}
	s, err := proxy.New(cfg, ch, proxy.Options{})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	srv := httptest.NewServer(s) // httptest listens on 127.0.0.1
	t.Cleanup(func() { srv.Close(); _ = s.Close() })
	return srv.URL
}

// backendKind says how a scripted backend is reached.
type backendKind string

const (
	viaHTTP  backendKind = "http"
	viaStdio backendKind = "stdio"
)

// newBackend starts a scripted backend of the given kind and returns its registration entry
// (id com.example.e2e.<kind>) subscribed to events, and the handle to read what it received.
func newBackend(t testing.TB, kind backendKind, scriptName string, events ...string) (map[string]any, ahpBackend) {
	t.Helper()
	switch kind {
	case viaHTTP:
		b := newHTTPBackend(t, scriptName)
		return hookEntry("com.example.e2e.http", map[string]any{"type": "http", "url": b.endpoint()},
			subscription{events: events}), b
	case viaStdio:
		b := newStdioBackend(t, scriptName)
		return hookEntry("com.example.e2e.stdio", b.transport(t), subscription{events: events}), b
	}
	t.Fatalf("unknown backend kind %q", kind)
	return nil, nil
}

// assertJSONEqual compares two JSON documents by value (member order and spacing aside).
func assertJSONEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: expected value is not JSON: %v\n%s", what, err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", what, got, want)
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

func assertBytesEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not byte-identical:\n got: %q\nwant: %q", what, got, want)
	}
}

func modeName(stream bool) string {
	if stream {
		return "stream"
	}
	return "json"
}

// withTimeout is the bound of one SDK call: every scenario ends well within it, so hitting
// it means the proxy hung, not that the machine was slow.
func withTimeout(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	t.Cleanup(cancel)
	return ctx
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

func mustNotContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			t.Errorf("%s contains %q:\n%s", what, sub, s)
		}
	}
}
