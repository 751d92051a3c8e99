package chain

// Behaviour of the whole chain over real transports: loopback HTTP backends (httptest on
// 127.0.0.1) and real stdio child processes (this test binary re-executed as a backend).
// Each case asserts what the failure policy makes of the failure (AHP-FAIL-001).

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// runChildBackend is a small AHP stdio backend used by the stdio tests. Modes:
//
//	deny        deny every request (reason "child deny")
//	noeffect    answer every request with no effects
//	crash-once  DIR: on the first request ever (marker file absent in DIR) exit 3 without
//	            answering; afterwards deny with reason "recovered"
//	stale-first before each answer, write a deny for another id, then the real no-effect reply
//	garbage     answer with a line that is not JSON
//	wrong-id    answer with another id
//	rpc-error   answer with a JSON-RPC error object
func runChildBackend(mode string, args []string) int {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return 0
		}
		var req struct {
			ID *string `json:"id"`
		}
		if json.Unmarshal(line, &req) != nil {
			return 9
		}
		if req.ID == nil {
			continue // a notification: never answered
		}
		id := *req.ID
		switch mode {
		case "deny":
			out.Write(reply(id, `{"type":"deny","reason":"child deny"}`))
		case "noeffect":
			out.Write(reply(id))
		case "crash-once":
			marker := filepath.Join(args[0], "crashed")
			if _, err := os.Stat(marker); err != nil {
				_ = os.WriteFile(marker, nil, 0o600)
				return 3
			}
			out.Write(reply(id, `{"type":"deny","reason":"recovered"}`))
		case "stale-first":
			out.Write(reply("evt_previous_"+id, `{"type":"deny","reason":"stale"}`))
			out.WriteByte('\n')
			out.Write(reply(id))
		case "garbage":
			out.WriteString("this is not json")
		case "wrong-id":
			out.Write(reply("other", `{"type":"deny","reason":"wrong"}`))
		case "rpc-error":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%q,"error":{"code":-32004,"message":"internal secret detail"}}`, id)
		default:
			return 8
		}
		out.WriteByte('\n')
		if out.Flush() != nil {
			return 7
		}
	}
}

func childTransport(mode string, lifecycle string, args ...string) registration.Transport {
	exe, _ := os.Executable()
	return registration.Transport{Type: registration.TransportStdio, Command: exe, Args: append([]string{childBackendArg, mode}, args...), Lifecycle: lifecycle}
}

// newRealChain builds a chain with the production transports.
func newRealChain(t *testing.T, doc *registration.Document, opts Options) *Chain {
	t.Helper()
	if opts.ObserveTimeout == 0 {
		opts.ObserveTimeout = testObserveTimeout
	}
	c, err := New(doc, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// httpAnswer answers a hooks/intercept POST; it receives the request id.
type httpAnswer func(w http.ResponseWriter, r *http.Request, id string)

func ahpServer(t *testing.T, answer httpAnswer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		if req.ID == "" { // hooks/observe notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer(w, r, req.ID)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func jsonAnswer(body func(id string) []byte) httpAnswer {
	return func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body(id))
	}
}

// TestHTTPBackendFailures: every kind of HTTP backend failure under both policies
// (AHP-FAIL-001): fail-open continues with the next interceptor, fail-closed denies naming
// the backend — as hookproxy.backend_invalid_reply when the reply itself was refused.
func TestHTTPBackendFailures(t *testing.T) {
	reset := func(w http.ResponseWriter, _ *http.Request, _ string) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with RST
		}
		_ = conn.Close()
	}
	tests := []struct {
		desc     string
		answer   httpAnswer
		maxReply int64
		wantKind transport.Kind
		// wantViolation/wantEffect: a reply refused for a protocol reason is a protocol
		// fault (CodeBackendInvalidReply), not an outage (CodeFailClosed).
		wantViolation transport.Violation
		wantEffect    string
		effects       []string // advertised effects (nil: the full bound)
	}{
		{desc: "garbage JSON", answer: jsonAnswer(func(string) []byte { return []byte(`{"jsonrpc":"2.0",`) }), wantKind: transport.KindMalformed,
			wantViolation: transport.ViolationMalformed},
		{desc: "wrong id", answer: jsonAnswer(func(string) []byte { return reply("evt_someone_else", `{"type":"allow"}`) }), wantKind: transport.KindMalformed,
			wantViolation: transport.ViolationWrongID},
		{desc: "error object", answer: jsonAnswer(func(id string) []byte {
			return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"error":{"code":-32003,"message":"db password is hunter2"}}`, id))
		}), wantKind: transport.KindRPCError},
		{desc: "oversized reply", maxReply: 1024, answer: jsonAnswer(func(id string) []byte {
			return reply(id, `{"type":"message","text":"`+strings.Repeat("x", 4096)+`"}`)
		}), wantKind: transport.KindOversized},
		{desc: "HTTP 500", answer: func(w http.ResponseWriter, _ *http.Request, _ string) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, wantKind: transport.KindHTTPStatus},
		{desc: "redirect is not followed", answer: func(w http.ResponseWriter, r *http.Request, _ string) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, wantKind: transport.KindRedirect},
		{desc: "reset connection", answer: reset, wantKind: transport.KindConnection},
		{desc: "invalid effect", answer: jsonAnswer(func(id string) []byte {
			return reply(id, `{"type":"message","text":"must not display"}`, `{"type":"unknown"}`)
		}), wantKind: transport.KindInvalid, wantViolation: transport.ViolationUnknownEffect, wantEffect: "unknown"},
		// The Rust SDK's example policy answers allow to a harness that advertises only deny.
		{desc: "unadvertised effect", effects: []string{"deny"}, answer: jsonAnswer(func(id string) []byte {
			return reply(id, `{"type":"allow"}`)
		}), wantKind: transport.KindInvalid, wantViolation: transport.ViolationUnadvertisedEffect, wantEffect: "allow"},
	}
	for _, tc := range tests {
		for _, policy := range []string{registration.FailClosed, registration.FailOpen} {
			t.Run(tc.desc+"/"+policy, func(t *testing.T) {
				srv := ahpServer(t, tc.answer)
				next := ahpServer(t, jsonAnswer(func(id string) []byte { return reply(id) }))
				doc := docOf(
					registration.Backend{ID: "com.example.flaky", Transport: registration.Transport{Type: registration.TransportHTTP, URL: srv.URL + "/ahp"},
						Subscriptions: []registration.Subscription{icpt(policy, 2000, "tool.before")}},
					registration.Backend{ID: "com.example.next", Transport: registration.Transport{Type: registration.TransportHTTP, URL: next.URL},
						Subscriptions: []registration.Subscription{icpt(registration.FailOpen, 2000, "tool.before")}},
				)
				c := newRealChain(t, doc, Options{MaxReplyBytes: tc.maxReply})
				caps := hostCaps(ahp.EventToolBefore, 0)
				if tc.effects != nil {
					caps = ahp.Capabilities{Effects: tc.effects}
				}
				st := c.Intercept(context.Background(), toolBefore("evt_http_fail"), caps)
				st.Wait()
				r := st.Records[0]
				if r.Outcome != OutcomeFailed || r.FailureKind != tc.wantKind || r.Violation != tc.wantViolation || r.OffendingEffect != tc.wantEffect {
					t.Fatalf("record = %+v, want failed with kind %s violation %q effect %q", r, tc.wantKind, tc.wantViolation, tc.wantEffect)
				}
				if len(st.Messages) != 0 {
					t.Errorf("messages from a rejected reply were published: %q", st.Messages)
				}
				if policy == registration.FailClosed {
					wantCode := CodeFailClosed
					if tc.wantViolation != "" {
						wantCode = CodeBackendInvalidReply
					}
					if !st.Refused() || st.Denial == nil || !st.Denial.Synthetic || st.Denial.Code != wantCode ||
						!strings.Contains(st.Denial.Reason, "com.example.flaky") || strings.Contains(st.Denial.Reason, "hunter2") {
						t.Fatalf("fail-closed settlement: permission=%s denial=%+v", st.Permission, st.Denial)
					}
					if st.Records[1].Outcome != OutcomeObserved {
						t.Errorf("next interceptor after fail-closed: %+v, want observed", st.Records[1])
					}
				} else {
					if st.Refused() || st.Records[1].Outcome != OutcomeNoEffect {
						t.Fatalf("fail-open settlement: permission=%s next=%+v", st.Permission, st.Records[1])
					}
				}
			})
		}
	}
}

func TestHTTPBackendDecision(t *testing.T) {
	srv := ahpServer(t, jsonAnswer(func(id string) []byte {
		return reply(id, `{"type":"modify","target":"input","operation":"merge","value":{"command":"git push"}}`, `{"type":"message","text":"Removed --force."}`)
	}))
	doc := docOf(registration.Backend{ID: "com.example.policy", Transport: registration.Transport{Type: registration.TransportHTTP, URL: srv.URL},
		Subscriptions: []registration.Subscription{icpt(registration.FailClosed, 2000, "tool.before")}})
	c := newRealChain(t, doc, Options{})
	st := c.Intercept(context.Background(), toolBefore("evt_http_ok"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if st.Refused() || !st.Modified || string(st.Event.Tool.Input) != `{"command":"git push","opts":{"a":1}}` || len(st.Messages) != 1 {
		t.Fatalf("settlement: %+v input=%s", st, st.Event.Tool.Input)
	}
}

func TestStdioBackends(t *testing.T) {
	tests := []struct {
		desc       string
		transport  func(t *testing.T) registration.Transport
		policy     string
		wantOut    Outcome
		wantKind   transport.Kind
		wantDenial string // explicit deny reason; "" = no explicit deny
		timeoutMs  int
	}{
		{desc: "per_event deny", transport: func(*testing.T) registration.Transport { return childTransport("deny", registration.LifecyclePerEvent) },
			policy: registration.FailOpen, wantOut: OutcomeAccepted, wantDenial: "child deny"},
		{desc: "persistent garbage", transport: func(*testing.T) registration.Transport {
			return childTransport("garbage", registration.LifecyclePersistent)
		},
			policy: registration.FailClosed, wantOut: OutcomeFailed, wantKind: transport.KindMalformed},
		{desc: "per_event wrong id", transport: func(*testing.T) registration.Transport {
			return childTransport("wrong-id", registration.LifecyclePerEvent)
		},
			policy: registration.FailClosed, wantOut: OutcomeFailed, wantKind: transport.KindMalformed},
		{desc: "persistent wrong id is never taken as the reply", transport: func(*testing.T) registration.Transport {
			return childTransport("wrong-id", registration.LifecyclePersistent)
		},
			policy: registration.FailOpen, wantOut: OutcomeFailed, wantKind: transport.KindTimeout, timeoutMs: 200},
		{desc: "per_event error object", transport: func(*testing.T) registration.Transport {
			return childTransport("rpc-error", registration.LifecyclePerEvent)
		},
			policy: registration.FailClosed, wantOut: OutcomeFailed, wantKind: transport.KindRPCError},
		{desc: "stale frame is not consumed as the live reply", transport: func(*testing.T) registration.Transport {
			return childTransport("stale-first", registration.LifecyclePersistent)
		}, policy: registration.FailClosed, wantOut: OutcomeNoEffect},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			doc := docOf(registration.Backend{ID: "com.example.local", Transport: tc.transport(t),
				Subscriptions: []registration.Subscription{icpt(tc.policy, cmp.Or(tc.timeoutMs, 5000), "tool.before")}})
			c := newRealChain(t, doc, Options{})
			st := c.Intercept(context.Background(), toolBefore("evt_stdio"), hostCaps(ahp.EventToolBefore, 0))
			st.Wait()
			r := st.Records[0]
			if r.Outcome != tc.wantOut || r.FailureKind != tc.wantKind {
				t.Fatalf("record = %+v, want outcome %s kind %q", r, tc.wantOut, tc.wantKind)
			}
			switch {
			case tc.wantDenial != "":
				if st.Denial == nil || st.Denial.Synthetic || st.Denial.Reason != tc.wantDenial {
					t.Fatalf("denial = %+v, want explicit %q", st.Denial, tc.wantDenial)
				}
			case tc.wantKind != "" && tc.policy == registration.FailClosed:
				if st.Denial == nil || !st.Denial.Synthetic {
					t.Fatalf("denial = %+v, want synthetic", st.Denial)
				}
			default:
				if st.Denial != nil {
					t.Fatalf("denial = %+v, want none", st.Denial)
				}
			}
		})
	}
}

// TestPersistentStdioCrashRecovery: a persistent backend that crashes mid-exchange fails
// that call under its policy; the next call runs on a fresh process and is decided by it.
func TestPersistentStdioCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	doc := docOf(registration.Backend{ID: "com.example.crashy", Transport: childTransport("crash-once", registration.LifecyclePersistent, dir),
		Subscriptions: []registration.Subscription{icpt(registration.FailClosed, 5000, "tool.before")}})
	c := newRealChain(t, doc, Options{})

	st := c.Intercept(context.Background(), toolBefore("evt_crash_1"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if r := st.Records[0]; r.Outcome != OutcomeFailed || r.FailureKind != transport.KindProcess || st.Denial == nil || !st.Denial.Synthetic {
		t.Fatalf("crash: record=%+v denial=%+v", r, st.Denial)
	}
	st = c.Intercept(context.Background(), toolBefore("evt_crash_2"), hostCaps(ahp.EventToolBefore, 0))
	st.Wait()
	if st.Denial == nil || st.Denial.Synthetic || st.Denial.Reason != "recovered" {
		t.Fatalf("after recovery: record=%+v denial=%+v", st.Records[0], st.Denial)
	}
	if err := c.Ready(); err != nil {
		t.Errorf("Ready after recovery: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Ready(); err == nil {
		t.Errorf("Ready after Close = nil")
	}
}

// TestHTTPObserverDeadline: a real observer that never answers is abandoned at the
// observe timeout; Wait returns then, not later.
func TestHTTPObserverDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	defer close(release)
	doc := docOf(registration.Backend{ID: "com.example.audit", Transport: registration.Transport{Type: registration.TransportHTTP, URL: srv.URL},
		Subscriptions: []registration.Subscription{obsv("turn.end")}})
	c := newRealChain(t, doc, Options{ObserveTimeout: 100 * time.Millisecond})
	start := time.Now()
	c.Observe(context.Background(), turnEnd("evt_end"))
	if d := time.Since(start); d < 100*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("Observe returned after %v, want about the 100ms observe timeout", d)
	}
}
