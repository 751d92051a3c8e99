package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/policies"
)

// askPushPolicy is the built-in tools policy asking for Bash calls that run git push.
func askPushPolicy(t *testing.T) ahp.Interceptor {
	t.Helper()
	p, err := policies.NewTools(policies.ToolsConfig{Deny: []policies.ToolRule{
		{Name: "push", Tool: "Bash", Command: "git", InputPattern: "push", Action: "ask"}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newApprovals(t *testing.T, timeout time.Duration) *approvals.Service {
	t.Helper()
	s, err := approvals.New(approvals.Options{Store: approvals.NewMemory(), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pendingOne waits for exactly one pending record.
func pendingOne(t *testing.T, s *approvals.Service) approvals.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		recs, _ := s.List(context.Background(), "pending")
		if len(recs) == 1 {
			return recs[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pending approval")
	return approvals.Record{}
}

// streamUntil reads the response body until it contains want, returning what was read.
func streamUntil(t *testing.T, r *bufio.Reader, want string) string {
	t.Helper()
	var b strings.Builder
	for !strings.Contains(b.String(), want) {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended before %q: %v\n%s", want, err, b.String())
		}
	}
	return b.String()
}

func openStream(t *testing.T, url, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// A streamed call that the policy asks about waits; the text before it reaches the client
// meanwhile; approved, the call is emitted exactly as judged; denied or expired, removed
// with a note naming the decider or the timeout.
func TestStreamedAskHeldThenDecided(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decide   func(t *testing.T, s *approvals.Service, id string)
		timeout  time.Duration
		wantCall bool
		note     string
		decision string
	}{
		{"approved", func(t *testing.T, s *approvals.Service, id string) {
			if _, err := s.Decide(context.Background(), id, approvals.DecisionApprove, "alice", "", ""); err != nil {
				t.Fatal(err)
			}
		}, time.Minute, true, "", "approved"},
		{"denied", func(t *testing.T, s *approvals.Service, id string) {
			if _, err := s.Decide(context.Background(), id, approvals.DecisionDeny, "alice", "not on Fridays", ""); err != nil {
				t.Fatal(err)
			}
		}, time.Minute, false, "Tool call Bash was denied by alice: not on Fridays.", "denied"},
		{"expired", func(*testing.T, *approvals.Service, string) {}, 500 * time.Millisecond, false, "Tool call Bash was not run: approval timed out.", "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, sseResponder(chatTextThenCall("Pushing now.", `{"command":"git push origin main"}`)...))
			svc := newApprovals(t, tc.timeout)
			log := &auditLog{}
			px := startProxy(t, testConfig(up.URL), newTestChainWith(t, askPushPolicy(t), intercept("tool.before")),
				Options{Auditor: log.auditor(), Approvals: &Approvals{Service: svc, Generation: "g"}})
			resp, r := openStream(t, px.URL+chatPath, chatStreamReq)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			// The text arrives while the call is held.
			head := streamUntil(t, r, "Pushing now.")
			rec := pendingOne(t, svc)
			if strings.Contains(head, `"name":"Bash"`) || rec.Tool.Name != "Bash" || !strings.Contains(string(rec.Tool.Input), "git push origin main") ||
				rec.Route != "/openai" || len(rec.AskedBy) != 1 || len(rec.Reasons) != 1 || !strings.Contains(rec.Reasons[0], "needs approval (rule push)") {
				t.Fatalf("held record %+v; head %s", rec, head)
			}
			tc.decide(t, svc, rec.ID)
			rest, _ := io.ReadAll(r)
			s := head + string(rest)
			if got := strings.Contains(s, `"name":"Bash"`); got != tc.wantCall {
				t.Fatalf("call emitted = %v, want %v:\n%s", got, tc.wantCall, s)
			}
			if tc.wantCall && !strings.Contains(s, `git push origin main`) {
				t.Fatalf("the call changed:\n%s", s)
			}
			if tc.note != "" && !strings.Contains(s, tc.note) {
				t.Fatalf("note %q missing:\n%s", tc.note, s)
			}
			recs := log.of("tool.before")
			if len(recs) != 1 || recs[0].Approval == nil || recs[0].Approval.ID != rec.ID || recs[0].Approval.Decision != tc.decision {
				t.Fatalf("audit %+v", recs)
			}
			want := enforcement.Forwarded
			if !tc.wantCall {
				want = enforcement.Refused
			}
			if recs[0].Enforcement != want || recs[0].Permission != ahp.PermissionAsk {
				t.Fatalf("audit enforcement %s permission %s", recs[0].Enforcement, recs[0].Permission)
			}
		})
	}
}

// A client that goes away while its call waits ends the wait: the record expires at once
// (long before its timeout) with the reason that says the request ended, so a person
// looking at the queue sees the call was abandoned rather than timed out or decided, and
// a later decision is refused.
func TestAbandonedAskExpires(t *testing.T) {
	up := newUpstream(t, sseResponder(chatTextThenCall("Pushing now.", `{"command":"git push origin main"}`)...))
	svc := newApprovals(t, time.Minute)
	px := startProxy(t, testConfig(up.URL), newTestChainWith(t, askPushPolicy(t), intercept("tool.before")),
		Options{Approvals: &Approvals{Service: svc, Generation: "g"}})
	resp, r := openStream(t, px.URL+chatPath, chatStreamReq)
	streamUntil(t, r, "Pushing now.")
	rec := pendingOne(t, svc)
	resp.Body.Close() // the agent gives up on the request
	deadline := time.Now().Add(10 * time.Second)
	for rec.State == approvals.StatePending && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		var err error
		if rec, err = svc.Get(context.Background(), rec.ID); err != nil {
			t.Fatal(err)
		}
	}
	if rec.State != approvals.StateExpired || rec.Reason != approvals.AbandonedReason || rec.Reason == approvals.TimedOutReason {
		t.Fatalf("after the client left, record %+v", rec)
	}
	if _, err := svc.Decide(context.Background(), rec.ID, approvals.DecisionApprove, "alice", "", ""); err == nil {
		t.Fatal("a decision on an abandoned record was accepted")
	}
}

// While a streamed call waits, the client gets keep-alives in the provider's own form.
func TestHeldStreamKeepAlives(t *testing.T) {
	saved := approvalKeepAlive
	approvalKeepAlive = 100 * time.Millisecond
	t.Cleanup(func() { approvalKeepAlive = saved })
	anth := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Pushing now.\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{}}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"git push\\\"}\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
	for _, tc := range []struct {
		name, path, body, ping string
		events                 []string
	}{
		{"anthropic", msgsPath, `{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"push"}]}`,
			"event: ping\ndata: {\"type\": \"ping\"}\n\n", anth},
		{"chat", chatPath, chatStreamReq, ": keep-alive\n\n", chatTextThenCall("Pushing now.", `{"command":"git push"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, sseResponder(tc.events...))
			svc := newApprovals(t, time.Minute)
			px := startProxy(t, testConfig(up.URL), newTestChainWith(t, askPushPolicy(t), intercept("tool.before")),
				Options{Approvals: &Approvals{Service: svc, Generation: "g"}})
			_, r := openStream(t, px.URL+tc.path, tc.body)
			head := streamUntil(t, r, "Pushing now.")
			rec := pendingOne(t, svc)
			pings := streamUntil(t, r, tc.ping+strings.TrimSuffix(tc.ping, "\n")) // two in a row
			if strings.Contains(pings, "Bash") {
				t.Fatalf("the call went out before the decision: %s%s", head, pings)
			}
			if _, err := svc.Decide(context.Background(), rec.ID, approvals.DecisionApprove, "alice", "", ""); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(r)
			if !strings.Contains(string(rest), "Bash") {
				t.Fatalf("approved call missing: %s", rest)
			}
		})
	}
}

// A JSON answer is held whole while its call waits.
func TestJSONAskHeldWhole(t *testing.T) {
	body := `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Pushing.","tool_calls":[{"id":"call_a","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"git push\"}"}}]},"finish_reason":"tool_calls"}]}`
	up := newUpstream(t, jsonResponder(200, body))
	svc := newApprovals(t, time.Minute)
	px := startProxy(t, testConfig(up.URL), newTestChainWith(t, askPushPolicy(t), intercept("tool.before")),
		Options{Approvals: &Approvals{Service: svc, Generation: "g"}})
	done := make(chan string, 1)
	go func() {
		_, _, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"push"}]}`, nil)
		done <- string(got)
	}()
	rec := pendingOne(t, svc)
	select {
	case got := <-done:
		t.Fatalf("answered before the decision: %s", got)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := svc.Decide(context.Background(), rec.ID, approvals.DecisionApprove, "alice", "", ""); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !strings.Contains(got, `"name":"Bash"`) {
		t.Fatalf("approved call missing: %s", got)
	}
}

// Without an approval path ask is not advertised, and a backend that asks anyway is a
// protocol fault its failure policy handles (fail-closed here): the call never goes out.
func TestAskWithoutApprovalPath(t *testing.T) {
	for _, path := range []bool{false, true} {
		up := newUpstream(t, sseResponder(chatTextThenCall("Pushing now.", `{"command":"git push"}`)...))
		pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
			if ev.Type == ahp.EventToolBefore {
				return []ahp.Effect{{Type: ahp.EffectAsk}}
			}
			return nil
		}}
		opts := Options{}
		var svc *approvals.Service
		if path {
			svc = newApprovals(t, 300*time.Millisecond)
			opts.Approvals = &Approvals{Service: svc, Generation: "g"}
		}
		px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), opts)
		_, _, got := post(t, px.URL+chatPath, chatStreamReq, nil)
		calls := pol.callsOf(ahp.EventToolBefore)
		if len(calls) != 1 {
			t.Fatalf("path=%v: %d tool.before calls", path, len(calls))
		}
		advertised := calls[0].Capabilities.Has(ahp.EffectAsk)
		if advertised != path {
			t.Fatalf("path=%v: ask advertised = %v", path, advertised)
		}
		if strings.Contains(string(got), `"name":"Bash"`) {
			t.Fatalf("path=%v: the asked call went out undecided: %s", path, got)
		}
		if path && !strings.Contains(string(got), "approval timed out") {
			t.Fatalf("with a path the call should have expired: %s", got)
		}
	}
}
