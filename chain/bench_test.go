package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

const benchEventID = "evt_bench_0001"

// benchEvent is a model.request.before event of about 32 KiB of JSON: a conversation of
// 64 messages with ~370 bytes of text each.
func benchEvent(tb testing.TB) (*ahp.Event, []byte) {
	tb.Helper()
	var items []ahp.Message
	roles := []string{ahp.RoleUser, ahp.RoleAssistant}
	for i := 0; i < 64; i++ {
		text := fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum dolor sit amet, ", 13))
		items = append(items, textMsg(fmt.Sprintf("m%02d", i), roles[i%2], text))
	}
	ev := modelRequest(benchEventID, items...)
	raw, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	if len(raw) < 30<<10 || len(raw) > 34<<10 {
		tb.Fatalf("bench event is %d bytes, want about 32 KiB", len(raw))
	}
	return ev, raw
}

type noEffectPolicy struct{}

func (noEffectPolicy) Intercept(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	return ahp.NoEffects(), nil
}

func benchSettle(b *testing.B, c *Chain, ev *ahp.Event) {
	caps := hostCaps(ahp.EventModelRequestBefore, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st := c.Intercept(ctx, ev, caps)
		st.Wait()
		if st.Records[0].Outcome != OutcomeNoEffect {
			b.Fatalf("record = %+v", st.Records[0])
		}
	}
}

// BenchmarkSettleInProcess: one in-process no-effect interceptor through the real
// in_process transport.
func BenchmarkSettleInProcess(b *testing.B) {
	ev, _ := benchEvent(b)
	doc := docOf(registration.Backend{ID: "com.example.noop", Transport: registration.Transport{Type: registration.TransportInProcess, Policy: "noop"},
		Subscriptions: []registration.Subscription{icpt(registration.FailOpen, 1000, "model.request.before")}})
	c, err := New(doc, Options{ObserveTimeout: testObserveTimeout, Policies: map[string]transport.PolicyFactory{
		"noop": func(json.RawMessage) (ahp.Interceptor, error) { return noEffectPolicy{}, nil },
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchSettle(b, c, ev)
}

// BenchmarkSettleHTTP: one loopback HTTP backend that answers no effects.
func BenchmarkSettleHTTP(b *testing.B) {
	ev, _ := benchEvent(b)
	answer := reply(benchEventID)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	doc := docOf(registration.Backend{ID: "com.example.http", Transport: registration.Transport{Type: registration.TransportHTTP, URL: srv.URL},
		Subscriptions: []registration.Subscription{icpt(registration.FailOpen, 1000, "model.request.before")}})
	c, err := New(doc, Options{ObserveTimeout: testObserveTimeout})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchSettle(b, c, ev)
}

// BenchmarkEventUnmarshalMarshal is the reference: decoding and re-encoding the same event.
func BenchmarkEventUnmarshalMarshal(b *testing.B) {
	_, raw := benchEvent(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		var ev ahp.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(&ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateReplyNoEffect isolates the reply validation of the hot path.
func BenchmarkValidateReplyNoEffect(b *testing.B) {
	frame := reply(benchEventID)
	rc := ReplyContext{RequestID: benchEventID, EventType: ahp.EventModelRequestBefore}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateReply(frame, rc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSettleEngineOnly isolates the engine: a backend that answers a constant
// no-effect frame without copying or encoding anything.
func BenchmarkSettleEngineOnly(b *testing.B) {
	ev, _ := benchEvent(b)
	answer := reply(benchEventID)
	f := &constTransport{frame: answer}
	orig := newTransport
	newTransport = func(registration.Backend, Options) (transport.Transport, error) { return f, nil }
	c, err := New(docOf(fakeBackend("com.example.const", icpt(registration.FailOpen, 1000, "model.request.before"))), Options{ObserveTimeout: testObserveTimeout})
	newTransport = orig
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchSettle(b, c, ev)
}

type constTransport struct{ frame []byte }

func (c *constTransport) Intercept(context.Context, string, *ahp.InterceptParams) ([]byte, error) {
	return c.frame, nil
}
func (c *constTransport) Observe(context.Context, *ahp.ObserveParams) error { return nil }
func (c *constTransport) Close() error                                      { return nil }
