package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// blockingPolicy waits in Intercept until its context ends and reports that it did.
type blockingPolicy struct {
	fakePolicy
	entered, cancelled chan struct{}
}

func (b *blockingPolicy) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	close(b.entered)
	select {
	case <-ctx.Done():
		close(b.cancelled)
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return ahp.NoEffects(), nil
	}
}

func TestClientDisconnectCancelsPendingHook(t *testing.T) {
	up := newUpstream(t, nil)
	pol := &blockingPolicy{entered: make(chan struct{}), cancelled: make(chan struct{})}
	ch := newTestChainWith(t, pol, intercept("model.request.before"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", px.URL+chatPath, strings.NewReader(chatSecret))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-pol.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("hook never called")
	}
	cancel()
	select {
	case <-pol.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the pending hook call was not cancelled when the client went away")
	}
	<-done
	if len(up.requests()) != 0 {
		t.Fatal("upstream called for a request whose client went away during the hook")
	}
}

func TestToolBeforeFlowStopRemovesThisAndLaterCalls(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatTwoCalls))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "Bash" {
			return []ahp.Effect{{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: "agent is looping"}}
		}
		return nil
	}}
	ch := newTestChain(t, pol, intercept("tool.before"), observe("tool.after"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	_, h, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, nil)
	m := decodeChat(t, h, got)
	if len(m.ToolCalls) != 0 || m.FinishReason != "stop" || m.Content == nil || !strings.Contains(*m.Content, "agent is looping") {
		t.Fatalf("answer %+v", m)
	}
	if n := len(pol.callsOf("tool.before")); n != 1 {
		t.Fatalf("tool.before called %d times after a stop", n)
	}
	ta := waitObserved(t, pol, "tool.after", 2)
	if len(ta) != 2 {
		t.Fatalf("%d cancelled tool.after observations", len(ta))
	}
	for _, ev := range ta {
		// Only the call whose tool.before stopped the flow has a parent event.
		if ev.Outcome != "cancelled" || ev.Execution.Reason != "policy" || (ev.Call.ID == "call_b") != (ev.ParentEventID == "") {
			t.Fatalf("cancelled tool.after observation %+v", ev)
		}
	}
	assertValidObservations(t, pol)
}

func TestToolAfterFlowStopAnswersWithoutModel(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolAfter {
			return []ahp.Effect{{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: "exfiltration detected"}}
		}
		return nil
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.after", "model.request.before")), Options{})
	_, h, got := post(t, px.URL+chatPath, chatToolLoop, nil)
	m := decodeChat(t, h, got)
	if m.Content == nil || !strings.Contains(*m.Content, "exfiltration detected") {
		t.Fatalf("answer %+v", m)
	}
	if len(up.requests()) != 0 || len(pol.callsOf("model.request.before")) != 0 {
		t.Fatal("work continued after flow stop at tool.after")
	}
}

func TestHeldStreamErrorEventPassesThrough(t *testing.T) {
	events := []string{
		chatTextSSE[0],
		`data: {"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}` + "\n\n",
	}
	up := newUpstream(t, sseResponder(events...))
	pol := &fakePolicy{}
	ch := newTestChain(t, pol, intercept("tool.before"), observe("model.error"))
	px := startProxy(t, testConfig(up.URL), ch, Options{})
	status, _, got := post(t, px.URL+chatPath, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if status != 200 || string(got) != strings.Join(events, "") {
		t.Fatalf("stream with an error event was not passed through unchanged: %d %q", status, got)
	}
	me := waitObserved(t, pol, "model.error", 1)
	if len(me) != 1 || !strings.Contains(me[0].Error.Message, "overloaded") || me[0].Error.Class != "provider_http" {
		t.Fatalf("model.error %+v", me)
	}
	assertValidObservations(t, pol)
}

func TestHopByHopHeadersNotForwarded(t *testing.T) {
	up := newUpstream(t, nil)
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	post(t, px.URL+"/plain/x", `{}`, map[string]string{"Connection": "X-Drop", "X-Drop": "1", "X-Keep": "1"})
	got := up.only(t)
	if got.Header.Get("X-Drop") != "" || got.Header.Get("X-Keep") != "1" {
		t.Fatalf("upstream headers %v", got.Header)
	}
}
