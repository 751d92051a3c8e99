package proxy

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
)

// The leaked credential of these tests (AWS's documentation example key).
const awsKey = "AKIAIOSFODNN7EXAMPLE"

// conversation is one tool loop in one provider's native format: the user's prompt, the
// model's tool calls and their results, each as a native message.
type conversation struct {
	name, path string
	body       func(msgs ...string) string
	user       func(text string) string
	call       func(id, command string) string // assistant message with one tool call
	result     func(id, output string) string  // the result of that call
}

var conversations = []conversation{
	{
		name: "openai", path: chatPath,
		body: func(m ...string) string {
			return `{"model":"gpt-4o","messages":[` + strings.Join(m, ",") + `]}`
		},
		user: func(text string) string { return `{"role":"user","content":` + strconv.Quote(text) + `}` },
		call: func(id, cmd string) string {
			return `{"role":"assistant","content":null,"tool_calls":[{"id":"` + id +
				`","type":"function","function":{"name":"Bash","arguments":` + strconv.Quote(`{"command":`+strconv.Quote(cmd)+`}`) + `}}]}`
		},
		result: func(id, out string) string {
			return `{"role":"tool","tool_call_id":"` + id + `","content":` + strconv.Quote(out) + `}`
		},
	},
	{
		name: "anthropic", path: msgsPath,
		body: func(m ...string) string {
			return `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[` + strings.Join(m, ",") + `]}`
		},
		user: func(text string) string { return `{"role":"user","content":` + strconv.Quote(text) + `}` },
		call: func(id, cmd string) string {
			return `{"role":"assistant","content":[{"type":"tool_use","id":"` + id +
				`","name":"Bash","input":{"command":` + strconv.Quote(cmd) + `}}]}`
		},
		result: func(id, out string) string {
			return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id +
				`","content":` + strconv.Quote(out) + `}]}`
		},
	},
}

// callIDs are the native ids of the two tool calls of a conversation.
func (c conversation) callIDs() (string, string) {
	if c.name == "anthropic" {
		return "toolu_1", "toolu_2"
	}
	return "call_1", "call_2"
}

// replaceText copies items with old replaced by repl in every text part.
func replaceText(items []ahp.Message, old, repl string) []ahp.Message {
	out := cloneMessages(items)
	for i := range out {
		for j := range out[i].Parts {
			if p := &out[i].Parts[j]; p.Text != nil {
				s := strings.ReplaceAll(*p.Text, old, repl)
				p.Text = &s
			}
		}
	}
	return out
}

// redactToolOutput is a tool.after policy: modify(output) over any result holding the key.
func redactToolOutput(t testing.TB) func(ev *ahp.Event) []ahp.Effect {
	return func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventToolAfter || !strings.Contains(textOf(ev.Items), awsKey) {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetOutput, Operation: ahp.OpReplace,
			Value: msgs(t, replaceText(ev.Items, awsKey, "[REDACTED]")...)}}
	}
}

// auditLog collects BoundaryRecords.
type auditLog struct {
	mu   sync.Mutex
	recs []BoundaryRecord
}

func (a *auditLog) auditor() Auditor {
	return AuditorFunc(func(_ context.Context, r BoundaryRecord) {
		a.mu.Lock()
		a.recs = append(a.recs, r)
		a.mu.Unlock()
	})
}

func (a *auditLog) of(typ string) []BoundaryRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []BoundaryRecord
	for _, r := range a.recs {
		if r.EventType == typ {
			out = append(out, r)
		}
	}
	return out
}

// toolAfterCalls counts the intercepted tool.after events per call id.
func toolAfterCalls(p *fakePolicy) map[string]int {
	n := map[string]int{}
	for _, c := range p.callsOf(ahp.EventToolAfter) {
		n[c.Event.Call.ID]++
	}
	return n
}

// postOK posts body and fails the test unless the proxy answers 200.
func postOK(t *testing.T, url, body string, header map[string]string) {
	t.Helper()
	if status, _, got := post(t, url, body, header); status != 200 {
		t.Fatalf("status %d %s", status, got)
	}
}

// upstreamBody is the body of the upstream's n-th request.
func upstreamBody(t *testing.T, u *fakeUpstream, n int) string {
	t.Helper()
	reqs := u.requests()
	if len(reqs) <= n {
		t.Fatalf("upstream received %d requests, want at least %d", len(reqs), n+1)
	}
	return string(reqs[n].Body)
}

// (a) A tool result redacted at tool.after stays redacted for the rest of the tool loop,
// although the agent re-sends the original and tool.after is not emitted for it again.
func TestRewriteToolAfterPersistsAcrossTheLoop(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: redactToolOutput(t)}
			var audit auditLog
			ch := newTestChain(t, pol, intercept(ahp.EventToolAfter, ahp.EventModelRequestBefore))
			px := startProxy(t, testConfig(up.URL), ch, Options{Auditor: audit.auditor()})
			id1, id2 := c.callIDs()
			history := []string{c.user("deploy the app"), c.call(id1, "cat ~/.aws/credentials"),
				c.result(id1, "aws_access_key_id = "+awsKey)}
			first := c.body(history...)
			second := c.body(append(history, c.call(id2, "./deploy.sh"), c.result(id2, "deployed"))...)

			postOK(t, px.URL+c.path, first, nil)
			postOK(t, px.URL+c.path, first, nil) // the client retries the same request
			postOK(t, px.URL+c.path, second, nil)

			for n := range 3 {
				got := upstreamBody(t, up, n)
				if strings.Contains(got, awsKey) || !strings.Contains(got, "aws_access_key_id = [REDACTED]") {
					t.Fatalf("upstream request %d: %s", n+1, got)
				}
			}
			if !strings.Contains(upstreamBody(t, up, 2), "deployed") {
				t.Fatalf("the new tool result is missing: %s", upstreamBody(t, up, 2))
			}
			if n := toolAfterCalls(pol); n[id1] != 1 || n[id2] != 1 {
				t.Fatalf("tool.after per call: %v, want one each", n)
			}
			mrb := pol.callsOf(ahp.EventModelRequestBefore)
			if len(mrb) != 3 {
				t.Fatalf("%d model.request.before", len(mrb))
			}
			for _, p := range mrb[1:] {
				if s := textOf(p.Event.Items); strings.Contains(s, awsKey) || !strings.Contains(s, "[REDACTED]") {
					t.Fatalf("model.request.before does not see the settled content: %s", s)
				}
			}
			recs := audit.of(ahp.EventModelRequestBefore)
			if len(recs) != 3 || recs[0].Reapplied != 0 || recs[0].Enforcement != enforcement.Forwarded ||
				recs[1].Reapplied != 1 || recs[1].Enforcement != enforcement.Rewritten ||
				recs[2].Reapplied != 1 || recs[2].Enforcement != enforcement.Rewritten {
				t.Fatalf("model.request.before audit records: %+v", recs)
			}
			assertValidIntercepts(t, pol)
		})
	}
}

// (b) A prompt rewritten at turn.start stays rewritten in the tool-loop requests of its
// turn. The effective prompt has more messages than the client's, so later indexes
// shift; a new tool result after it is still found and decided.
func TestRewriteTurnStartPromptPersistsInTheToolLoop(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type == ahp.EventTurnStart && strings.Contains(textOf(ev.Items), awsKey) {
					eff := append(replaceText(ev.Items, awsKey, "[REDACTED]"),
						textMessage("note", ahp.RoleUser, "(a credential was removed from this prompt)"))
					return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetPrompt, Operation: ahp.OpReplace,
						Value: msgs(t, eff...)}}
				}
				return redactToolOutput(t)(ev)
			}}
			ch := newTestChain(t, pol, intercept(ahp.EventTurnStart, ahp.EventToolAfter, ahp.EventModelRequestBefore))
			px := startProxy(t, testConfig(up.URL), ch, Options{})
			id1, _ := c.callIDs()
			prompt := c.user("my key is " + awsKey + ", deploy with it")
			postOK(t, px.URL+c.path, c.body(prompt), nil)
			postOK(t, px.URL+c.path, c.body(prompt, c.call(id1, "env"), c.result(id1, "AWS_KEY="+awsKey)), nil)

			for n := range 2 {
				got := upstreamBody(t, up, n)
				if strings.Contains(got, awsKey) || !strings.Contains(got, "my key is [REDACTED], deploy with it") ||
					!strings.Contains(got, "a credential was removed") {
					t.Fatalf("upstream request %d: %s", n+1, got)
				}
			}
			if got := upstreamBody(t, up, 1); !strings.Contains(got, "AWS_KEY=[REDACTED]") {
				t.Fatalf("the new tool result was not decided: %s", got)
			}
			if n := len(pol.callsOf(ahp.EventTurnStart)); n != 1 {
				t.Fatalf("turn.start emitted %d times, want once", n)
			}
			if n := toolAfterCalls(pol); n[id1] != 1 {
				t.Fatalf("tool.after per call: %v", n)
			}
			mrb := pol.callsOf(ahp.EventModelRequestBefore)
			if len(mrb) != 2 || strings.Contains(textOf(mrb[1].Event.Items), awsKey) {
				t.Fatalf("model.request.before sees the original prompt")
			}
			assertValidIntercepts(t, pol)
		})
	}
}

// (c) Records belong to their session and tenant: another session, or another tenant
// with the same session id, is not given the conversation's records; the store does not
// know the result there, so its tool.after runs again (fail-safe) and the secret is
// redacted all the same. The conversation itself re-applies its record without a hook call.
func TestRewriteIsScopedToSessionAndTenant(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: redactToolOutput(t)}
			px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolAfter)), Options{})
			id1, id2 := c.callIDs()
			history := []string{c.user("deploy the app"), c.call(id1, "cat ~/.aws/credentials"),
				c.result(id1, "aws_access_key_id = "+awsKey)}
			second := c.body(append(history, c.call(id2, "./deploy.sh"), c.result(id2, "deployed"))...)
			hdr := func(session, key string) map[string]string {
				return map[string]string{"X-Hookproxy-Session": session, "Authorization": "Bearer " + key, "X-Api-Key": key}
			}

			steps := []struct {
				desc, session, key string
				body               string
				wantID1            int // tool.after calls for the redacted result at this request
			}{
				{"the first request", "s-A", "k1", c.body(history...), 1},
				{"another session", "s-B", "k1", second, 1},
				{"another tenant, same session id", "s-A", "k2", second, 1},
				{"the conversation itself", "s-A", "k1", second, 0},
			}
			for i, st := range steps {
				before := toolAfterCalls(pol)[id1]
				postOK(t, px.URL+c.path, st.body, hdr(st.session, st.key))
				if got := toolAfterCalls(pol)[id1] - before; got != st.wantID1 {
					t.Errorf("%s: tool.after for the redacted result ran %d times, want %d", st.desc, got, st.wantID1)
				}
				if got := upstreamBody(t, up, i); strings.Contains(got, awsKey) || !strings.Contains(got, "[REDACTED]") {
					t.Fatalf("%s: the secret reached the upstream: %s", st.desc, got)
				}
			}
			// Control: the same body straight to the upstream carries the secret.
			if !strings.Contains(second, awsKey) {
				t.Fatal("the test body carries no secret")
			}
		})
	}
}

// (d) A client that changed the remembered message sent new content: it is not
// rewritten with the remembered replacement, and its tool.after runs again, as old
// history or as a new result (the store does not know that content).
func TestRewriteSkipsChangedContent(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			pol := &fakePolicy{effects: redactToolOutput(t)}
			ch := newTestChain(t, pol, intercept(ahp.EventToolAfter, ahp.EventModelRequestBefore))
			px := startProxy(t, testConfig(up.URL), ch, Options{})
			id1, id2 := c.callIDs()
			opening := []string{c.user("deploy the app"), c.call(id1, "cat ~/.aws/credentials")}
			postOK(t, px.URL+c.path, c.body(append(opening, c.result(id1, "aws_access_key_id = "+awsKey))...), nil)

			// The same call, answered differently: as old history, then as a new result.
			changed := c.result(id1, "aws_access_key_id = (rotated)")
			postOK(t, px.URL+c.path, c.body(append(opening, changed, c.call(id2, "./deploy.sh"), c.result(id2, "deployed"))...), nil)
			changedKey := c.result(id1, "aws_access_key_id = "+awsKey+" (second key)")
			postOK(t, px.URL+c.path, c.body(append(opening, changedKey)...), nil)

			if got := upstreamBody(t, up, 1); !strings.Contains(got, "aws_access_key_id = (rotated)") || strings.Contains(got, "[REDACTED]") {
				t.Fatalf("changed content was rewritten: %s", got)
			}
			if mrb := pol.callsOf(ahp.EventModelRequestBefore); len(mrb) != 3 || !strings.Contains(textOf(mrb[1].Event.Items), "(rotated)") {
				t.Fatalf("model.request.before does not see the client's new content")
			}
			if got := upstreamBody(t, up, 2); strings.Contains(got, awsKey) || !strings.Contains(got, "[REDACTED] (second key)") {
				t.Fatalf("a changed new result was not decided again: %s", got)
			}
			// id1: its first result, the changed old one (unknown, so settled again), the
			// changed new one.
			if n := toolAfterCalls(pol); n[id1] != 3 || n[id2] != 1 {
				t.Fatalf("tool.after per call: %v", n)
			}
		})
	}
}

// A rewrite in a refused request is not remembered: the model saw nothing, so the retry
// is decided again from scratch.
func TestRewriteOfRefusedRequestIsNotRemembered(t *testing.T) {
	up := newUpstream(t, nil)
	var mu sync.Mutex
	refuse := true
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Type == ahp.EventTurnStart:
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetPrompt, Operation: ahp.OpReplace,
				Value: msgs(t, replaceText(ev.Items, awsKey, "[REDACTED]")...)}}
		case ev.Type == ahp.EventModelRequestBefore && refuse:
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "budget exhausted"}}
		}
		return nil
	}}
	ch := newTestChain(t, pol, intercept(ahp.EventTurnStart, ahp.EventModelRequestBefore))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"key ` + awsKey + `"}]}`
	if status, _, got := post(t, px.URL+chatPath, body, nil); status != 403 {
		t.Fatalf("status %d %s", status, got)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	postOK(t, px.URL+chatPath, body, nil)
	if n := len(pol.callsOf(ahp.EventTurnStart)); n != 2 {
		t.Fatalf("turn.start emitted %d times; the refused request's rewrite was remembered", n)
	}
	if got := string(up.only(t).Body); strings.Contains(got, awsKey) {
		t.Fatalf("upstream body %s", got)
	}
	postOK(t, px.URL+chatPath, body, nil) // a retry of the forwarded request: settled now
	if n := len(pol.callsOf(ahp.EventTurnStart)); n != 2 {
		t.Fatalf("turn.start re-emitted for a settled prompt (%d)", n)
	}
	if got := upstreamBody(t, up, 1); strings.Contains(got, awsKey) {
		t.Fatalf("upstream body %s", got)
	}
}
