package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/internal/redistest"
	"github.com/hookproxy/hookproxy/state"
)

// Whatever the store remembers or forgets, no decided-on tool result reaches
// the upstream as it was. The control of every test is the same conversation sent
// straight to the recording upstream, which carries the secret.

// assertNoSecret fails when any upstream request carried secret, after checking the
// control: the body the client sent does carry it.
func assertNoSecret(t *testing.T, up *fakeUpstream, clientBody, secret string) {
	t.Helper()
	if !strings.Contains(clientBody, secret) {
		t.Fatalf("control: the client's body does not carry %q, so the test proves nothing", secret)
	}
	for i, r := range up.requests() {
		if strings.Contains(string(r.Body), secret) {
			t.Fatalf("upstream request %d carried the redacted secret: %s", i+1, r.Body)
		}
	}
}

// (a) The memory store across a restart of the only process: the restarted proxy does
// not know the settled result, settles it again (one more tool.after), and the upstream
// never sees the secret.
func TestFailSafeMemoryStoreAcrossRestart(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: redactToolOutput(t)}
			id1, id2 := c.callIDs()
			history := []string{c.user("deploy the app"), c.call(id1, "cat ~/.aws/credentials"),
				c.result(id1, "aws_access_key_id = "+awsKey)}
			first := c.body(history...)
			second := c.body(append(history, c.call(id2, "./deploy.sh"), c.result(id2, "deployed"))...)
			hdr := map[string]string{"Authorization": "Bearer k1", "X-Api-Key": "k1"}

			before := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolAfter)), Options{State: state.NewMemory(0, 0)})
			postOK(t, before.URL+c.path, first, hdr)
			before.Close() // the process ends; its memory with it

			var audit auditLog
			after := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolAfter)),
				Options{State: state.NewMemory(0, 0), Auditor: audit.auditor()})
			postOK(t, after.URL+c.path, second, hdr)
			postOK(t, after.URL+c.path, second, hdr) // known now: re-applied, not settled again

			// The audit log says which tool.after was a re-settlement of forgotten content.
			resettled := map[string]bool{}
			for _, r := range audit.of(ahp.EventToolAfter) {
				resettled[r.CallID] = r.Resettled
			}
			if len(resettled) != 2 || !resettled[id1] || resettled[id2] {
				t.Fatalf("audit resettled flags %v: want the forgotten %s only", resettled, id1)
			}

			assertNoSecret(t, up, second, awsKey)
			if got := upstreamBody(t, up, 1); !strings.Contains(got, "[REDACTED]") || !strings.Contains(got, "deployed") {
				t.Fatalf("after the restart: %s", got)
			}
			if n := toolAfterCalls(pol); n[id1] != 2 || n[id2] != 1 {
				t.Fatalf("tool.after per call %v: want the forgotten result settled once more (2) and the new one once", n)
			}
		})
	}
}

// (b) Eviction: a store bounded to 10 sessions serving 50 interleaved tool loops. Each
// loop's results carry the loop's own secret; none ever reaches the upstream, although
// the store keeps forgetting (shown by the tool.after calls beyond one per result).
func TestFailSafeEvictionBoundedStore(t *testing.T) {
	const sessions, steps = 50, 3
	c := conversations[0]
	up := newUpstream(t, nil)
	secretOf := func(s, k int) string { return fmt.Sprintf("AKIA%04dSTEP%dEXAMPLE", s, k) }
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventToolAfter {
			return nil
		}
		text := textOf(ev.Items)
		i := strings.Index(text, "AKIA")
		if i < 0 {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetOutput, Operation: ahp.OpReplace,
			Value: msgs(t, replaceText(ev.Items, text[i:i+20], "[REDACTED]")...)}}
	}}
	store := state.NewMemory(10, 0)
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolAfter)), Options{State: store})
	body := func(s, step int) string {
		m := []string{c.user(fmt.Sprintf("session %d: check the keys", s))}
		for k := 1; k <= step; k++ {
			id := fmt.Sprintf("call_%d_%d", s, k)
			m = append(m, c.call(id, "cat key"+fmt.Sprint(k)), c.result(id, "key = "+secretOf(s, k)))
		}
		return c.body(m...)
	}
	for step := 1; step <= steps; step++ {
		for s := range sessions {
			postOK(t, px.URL+c.path, body(s, step), map[string]string{"X-Hookproxy-Session": fmt.Sprint("loop-", s)})
			if store.Sessions() > 10 {
				t.Fatalf("the store holds %d sessions, bound 10", store.Sessions())
			}
		}
	}
	for s := range sessions {
		for k := 1; k <= steps; k++ {
			assertNoSecret(t, up, body(s, steps), secretOf(s, k))
		}
	}
	results := sessions * steps
	if n := len(pol.callsOf(ahp.EventToolAfter)); n <= results {
		t.Fatalf("%d tool.after for %d results: the bounded store should have forgotten and re-settled some", n, results)
	}
}

// stateMetrics records StoreFailure calls (the optional StoreMetrics capability).
type stateMetrics struct {
	mu       sync.Mutex
	failures map[string]int
}

func (m *stateMetrics) ObserveRequest(string, int)                          {}
func (m *stateMetrics) UpstreamLatency(string, time.Duration)               {}
func (m *stateMetrics) UpstreamTTFB(string, time.Duration)                  {}
func (m *stateMetrics) StreamStarted(string, enforcement.StreamMode) func() { return func() {} }
func (m *stateMetrics) ForwardedUnexamined(string)                          {}
func (m *stateMetrics) StoreFailure(op, mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failures == nil {
		m.failures = map[string]int{}
	}
	m.failures[op+"/"+mode]++
}

func (m *stateMetrics) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failures[key]
}

func redisStore(t *testing.T, srv *redistest.Server) *state.Redis {
	t.Helper()
	s, err := state.NewRedis(state.RedisOptions{URL: srv.URL(), KeyPrefix: "proxy-test:", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// (c) Redis stopped mid-conversation and started again on the same port: each
// onStoreFailure mode does what it says, the failure is counted and logged once per
// outage, and the proxy recovers without a restart.
func TestRedisOutageMidConversation(t *testing.T) {
	for _, mode := range []string{config.StateReSettle, config.StateFailClosed} {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			c := conversations[0]
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: redactToolOutput(t)}
			core, logs := observer.New(zap.InfoLevel)
			met := &stateMetrics{}
			cfg := testConfig(up.URL)
			cfg.State.OnStoreFailure = mode
			px := startProxy(t, cfg, newTestChain(t, pol, intercept(ahp.EventToolAfter)),
				Options{State: redisStore(t, srv), Logger: zap.New(core), Metrics: met})
			id1, id2 := c.callIDs()
			history := []string{c.user("deploy the app"), c.call(id1, "cat ~/.aws/credentials"),
				c.result(id1, "aws_access_key_id = "+awsKey)}
			first := c.body(history...)
			second := c.body(append(history, c.call(id2, "./deploy.sh"), c.result(id2, "deployed"))...)
			hdr := map[string]string{"X-Hookproxy-Session": "outage-" + mode}

			postOK(t, px.URL+c.path, first, hdr)
			postOK(t, px.URL+c.path, second, hdr)
			if n := toolAfterCalls(pol); n[id1] != 1 {
				t.Fatalf("with Redis up the result is settled once, got %v", n)
			}

			srv.Stop()
			upstreamBefore := len(up.requests())
			const during = 3
			for range during {
				status, _, body := post(t, px.URL+c.path, second, hdr)
				switch mode {
				case config.StateReSettle:
					if status != 200 {
						t.Fatalf("re-settle: status %d %s", status, body)
					}
				case config.StateFailClosed:
					if status != 503 || !strings.Contains(string(body), "hookproxy.state_unavailable") {
						t.Fatalf("fail-closed: status %d %s", status, body)
					}
				}
			}
			switch mode {
			case config.StateReSettle:
				// Everything was unknown: each request settled the old result again.
				if n := toolAfterCalls(pol); n[id1] != 1+during {
					t.Fatalf("re-settle: tool.after for the redacted result %d times, want %d", n[id1], 1+during)
				}
				if got := len(up.requests()) - upstreamBefore; got != during {
					t.Fatalf("re-settle: %d upstream calls during the outage, want %d", got, during)
				}
			case config.StateFailClosed:
				if got := len(up.requests()) - upstreamBefore; got != 0 {
					t.Fatalf("fail-closed: %d upstream calls during the outage", got)
				}
			}
			if met.count("load/"+mode) != during {
				t.Fatalf("store failures counted: %v", met.failures)
			}
			if n := logs.FilterMessageSnippet("state store unavailable").Len(); n != 1 {
				t.Fatalf("the outage was logged %d times, want once", n)
			}

			srv.Restart() // empty: no persistence, as after a Redis failover without replication
			var status int
			deadline := time.Now().Add(10 * time.Second)
			for {
				var body []byte
				status, _, body = post(t, px.URL+c.path, second, hdr)
				if status == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no recovery after Redis returned: %d %s", status, body)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if logs.FilterMessageSnippet("state store available again").Len() != 1 {
				t.Fatal("the end of the outage was not logged")
			}
			// Recovered: the records are kept again, so the next request settles nothing.
			settled := toolAfterCalls(pol)[id1]
			postOK(t, px.URL+c.path, second, hdr)
			if n := toolAfterCalls(pol)[id1]; n != settled {
				t.Fatalf("after recovery the result was settled again (%d → %d): records are not kept", settled, n)
			}
			assertNoSecret(t, up, second, awsKey)
		})
	}
}

// (d) A next_turn injection accepted on replica A is delivered exactly once, by replica
// B: two servers with their own Redis clients on one Redis.
func TestNextTurnInjectionTakenOnceAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, nil)
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventTurnStart || !strings.Contains(textOf(ev.Items), "first") {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend, DeliverAt: ahp.DeliverNextTurn,
			Value: msgs(t, textMessage("n1", ahp.RoleUser, "Remember the budget."))}}
	}}
	a := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventTurnStart)), Options{State: redisStore(t, srv)})
	b := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventTurnStart)), Options{State: redisStore(t, srv)})
	hdr := map[string]string{"X-Hookproxy-Session": "inj-1", "Authorization": "Bearer k1"}
	turn1 := `{"model":"m","messages":[{"role":"user","content":"first"}]}`
	turn2 := `{"model":"m","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"ok"},{"role":"user","content":"second"}]}`
	turn3 := `{"model":"m","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"ok"},{"role":"user","content":"second"},{"role":"assistant","content":"ok"},{"role":"user","content":"third"}]}`
	postOK(t, a.URL+chatPath, turn1, hdr)
	if strings.Contains(upstreamBody(t, up, 0), "Remember the budget") {
		t.Fatal("a next_turn injection was delivered in the turn that accepted it")
	}
	// Both replicas race for the next turn; exactly one delivers it, and never again.
	var wg sync.WaitGroup
	for _, px := range []string{a.URL, b.URL} {
		wg.Go(func() { postOK(t, px+chatPath, turn2, hdr) })
	}
	wg.Wait()
	postOK(t, b.URL+chatPath, turn3, hdr)
	delivered := 0
	for _, r := range up.requests() {
		delivered += strings.Count(string(r.Body), "Remember the budget")
	}
	if delivered != 1 {
		t.Fatalf("the injection was delivered %d times over %d requests, want exactly once", delivered, len(up.requests()))
	}
	// Sequentially: accepted on A, delivered by B.
	hdr2 := map[string]string{"X-Hookproxy-Session": "inj-2", "Authorization": "Bearer k1"}
	n := len(up.requests())
	postOK(t, a.URL+chatPath, turn1, hdr2)
	postOK(t, b.URL+chatPath, turn2, hdr2)
	postOK(t, a.URL+chatPath, turn3, hdr2)
	reqs := up.requests()[n:]
	if !strings.Contains(string(reqs[1].Body), "Remember the budget") || strings.Contains(string(reqs[2].Body), "Remember the budget") {
		t.Fatalf("replica B did not deliver A's injection exactly once: %s / %s", reqs[1].Body, reqs[2].Body)
	}
}

// (e) A "now" injection accepted at tool.before on replica A belongs to the next model
// call, the one carrying the call's result: replica B delivers it, once.
func TestToolBeforeNowInjectionTakenOnceAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"role":"tool"`) {
			_, _ = io.WriteString(w, chatText)
			return
		}
		_, _ = io.WriteString(w, chatTwoCalls)
	})
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventToolBefore || ev.Call == nil || ev.Call.ID != "call_b" {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend, DeliverAt: ahp.DeliverNow,
			Value: msgs(t, textMessage("n1", ahp.RoleUser, "Check the exit code."))}}
	}}
	a := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolBefore)), Options{State: redisStore(t, srv)})
	b := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolBefore)), Options{State: redisStore(t, srv)})
	hdr := map[string]string{"X-Hookproxy-Session": "now-1", "Authorization": "Bearer k1"}
	prompt := `{"role":"user","content":"clean up"}`
	calls := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}},{"id":"call_b","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a.txt\"}"}}]}`
	results := `{"role":"tool","tool_call_id":"call_a","content":"done"},{"role":"tool","tool_call_id":"call_b","content":"text"}`
	postOK(t, a.URL+chatPath, `{"model":"m","messages":[`+prompt+`]}`, hdr)
	loop := `{"model":"m","messages":[` + prompt + `,` + calls + `,` + results + `]}`
	postOK(t, b.URL+chatPath, loop, hdr)
	postOK(t, a.URL+chatPath, loop, hdr) // a retry: the injection was taken already
	reqs := up.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	if strings.Contains(string(reqs[0].Body), "Check the exit code") || !strings.Contains(string(reqs[1].Body), "Check the exit code") ||
		strings.Contains(string(reqs[2].Body), "Check the exit code") {
		t.Fatalf("the injection was not delivered exactly once, by the next call:\n%s\n%s\n%s", reqs[0].Body, reqs[1].Body, reqs[2].Body)
	}
}

// (f) A Responses delta on server-held history (previous_response_id) carries only new
// content, whose derived ids repeat between deltas: the same prompt text in the next delta
// is a new turn and its turn.start runs, although a record with its id and fingerprint
// exists.
func TestDeltaRequestsAreAlwaysSettled(t *testing.T) {
	up := newUpstream(t, nil)
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventTurnStart)), Options{})
	hdr := map[string]string{"X-Hookproxy-Session": "delta-1"}
	for i, prev := range []string{"resp_1", "resp_2"} {
		postOK(t, px.URL+"/openai/v1/responses", `{"model":"gpt-5","previous_response_id":"`+prev+`","input":[{"role":"user","content":"continue"}]}`, hdr)
		if n := len(pol.callsOf(ahp.EventTurnStart)); n != i+1 {
			t.Fatalf("after delta %d: %d turn.start, want %d", i+1, n, i+1)
		}
	}
	// Control: the same full-history request repeated is a retry, settled once.
	full := `{"model":"gpt-5","input":[{"role":"user","content":"continue"}]}`
	postOK(t, px.URL+"/openai/v1/responses", full, hdr)
	postOK(t, px.URL+"/openai/v1/responses", full, hdr)
	if n := len(pol.callsOf(ahp.EventTurnStart)); n != 3 {
		t.Fatalf("a retried full request: %d turn.start in all, want 3", n)
	}
}

// (g) Redis slower than timeoutMs is a store failure like an outage: the request does not
// wait for it, it is served under re-settle (the redacted result is settled again) and
// the failure is counted.
func TestRedisSlowIsAStoreFailure(t *testing.T) {
	srv := redistest.StartWith(t, "--enable-debug-command", "yes")
	c := conversations[0]
	up := newUpstream(t, nil)
	pol := &fakePolicy{effects: redactToolOutput(t)}
	met := &stateMetrics{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolAfter)),
		Options{State: redisStore(t, srv), Metrics: met})
	id1, id2 := c.callIDs()
	history := []string{c.user("deploy the app"), c.call(id1, "cat ~/.aws/credentials"), c.result(id1, "aws_access_key_id = "+awsKey)}
	second := c.body(append(history, c.call(id2, "./deploy.sh"), c.result(id2, "deployed"))...)
	hdr := map[string]string{"X-Hookproxy-Session": "slow-1"}
	postOK(t, px.URL+c.path, c.body(history...), hdr)

	// DEBUG SLEEP blocks the whole server for 3 s; the store's timeout is 300 ms.
	raw, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := io.WriteString(raw, "DEBUG SLEEP 3\r\n"); err != nil {
		t.Fatal(err)
	}
	// The sleep has begun once a PING on another connection goes unanswered.
	for tries, blocked := 0, false; !blocked; tries++ {
		if tries == 40 {
			t.Fatal("redis-server never blocked on DEBUG SLEEP")
		}
		probe, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(probe, "PING\r\n")
		_ = probe.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err = probe.Read(make([]byte, 16))
		blocked = err != nil
		probe.Close()
	}
	postOK(t, px.URL+c.path, second, hdr)
	if met.count("load/re-settle") != 1 {
		t.Fatalf("a slow store was not counted as a failure: %v", met.failures)
	}
	if n := toolAfterCalls(pol); n[id1] != 2 {
		t.Fatalf("tool.after for the redacted result %d times, want 2 (settled again while the store was slow)", n[id1])
	}
	assertNoSecret(t, up, second, awsKey)
}
