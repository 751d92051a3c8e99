package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/tracing"
)

func init() {
	// Install the W3C propagators as the serve command does (tracing.Setup); with no
	// endpoint nothing is exported.
	if _, err := tracing.Setup(context.Background(), config.Tracing{}); err != nil {
		panic(err)
	}
}

// callerTraceparent is the trace context a client sends (W3C example values).
const (
	callerTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParentSpan = "00f067aa0ba902b7"
	callerTrace      = "00-" + callerTraceID + "-" + callerParentSpan + "-01"
)

func traceContextOf(t *testing.T, ev *ahp.Event) (traceparent string) {
	t.Helper()
	raw, ok := ev.Extensions[tracing.ExtensionKey]
	if !ok {
		return ""
	}
	var tc struct {
		Traceparent string `json:"traceparent"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		t.Fatalf("extension %s: %v", raw, err)
	}
	return tc.Traceparent
}

// TestTracingSpans: with a tracer, a request makes a server span (child of the caller's
// trace), a span for its boundary and one for the interceptor call, and the backend
// receives the boundary span's trace context in extensions["org.w3c.trace_context"].
func TestTracingSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{}
	srv := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventModelRequestBefore)),
		Options{Tracer: tp.Tracer("test")})
	status, _, _ := post(t, srv.URL+chatPath, chatSecret, map[string]string{"Traceparent": callerTrace})
	if status != 200 {
		t.Fatalf("status %d", status)
	}

	// The request span ends when the handler returns, which may be just after the client
	// has read the answer.
	spans := map[string]tracetest.SpanStub{}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		for _, s := range exp.GetSpans() {
			spans[s.Name] = s
		}
		if len(spans) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	req, ok := spans["POST /openai"]
	if !ok {
		t.Fatalf("no request span; spans: %v", names(exp.GetSpans()))
	}
	if req.SpanContext.TraceID().String() != callerTraceID || req.Parent.SpanID().String() != callerParentSpan {
		t.Errorf("request span does not continue the caller's trace: trace %s parent %s",
			req.SpanContext.TraceID(), req.Parent.SpanID())
	}
	boundary, ok := spans["ahp "+ahp.EventModelRequestBefore]
	if !ok || boundary.Parent.SpanID() != req.SpanContext.SpanID() {
		t.Fatalf("boundary span missing or not a child of the request span; spans: %v", names(exp.GetSpans()))
	}
	call, ok := spans[tracing.SpanGuardrailInternal]
	if !ok || call.Parent.SpanID() != boundary.SpanContext.SpanID() {
		t.Fatalf("interceptor span missing or not a child of the boundary span; spans: %v", names(exp.GetSpans()))
	}
	if call.StartTime.Before(boundary.StartTime) || call.EndTime.After(boundary.EndTime) {
		t.Errorf("interceptor span [%v, %v] lies outside its boundary [%v, %v]",
			call.StartTime, call.EndTime, boundary.StartTime, boundary.EndTime)
	}

	calls := pol.callsOf(ahp.EventModelRequestBefore)
	if len(calls) != 1 {
		t.Fatalf("%d intercepts", len(calls))
	}
	want := "00-" + callerTraceID + "-" + boundary.SpanContext.SpanID().String() + "-01"
	if got := traceContextOf(t, calls[0].Event); got != want {
		t.Errorf("backend trace context %q, want %q (the boundary span)", got, want)
	}
	assertValidIntercepts(t, pol)
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestTraceContextWithoutTracer: tracing off still hands a caller's trace context to the
// backends, and adds nothing when the caller sent none.
func TestTraceContextWithoutTracer(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	pol := &fakePolicy{}
	srv := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventModelRequestBefore)), Options{})
	post(t, srv.URL+chatPath, chatSecret, map[string]string{"Traceparent": callerTrace})
	post(t, srv.URL+chatPath, chatSecret, nil)
	calls := pol.callsOf(ahp.EventModelRequestBefore)
	if len(calls) != 2 {
		t.Fatalf("%d intercepts", len(calls))
	}
	if got := traceContextOf(t, calls[0].Event); got != callerTrace {
		t.Errorf("with a caller trace: extension %q, want %q", got, callerTrace)
	}
	if _, ok := calls[1].Event.Extensions[tracing.ExtensionKey]; ok {
		t.Errorf("without a caller trace: unexpected extension %s", calls[1].Event.Extensions[tracing.ExtensionKey])
	}
	assertValidIntercepts(t, pol)
}

// TestRequestID: a client's X-Request-Id is echoed, an unusable one replaced, one is
// generated when absent, and an upstream's own X-Request-Id is left as the provider sent it.
func TestRequestID(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.URL.Path == "/provider-id" {
			w.Header().Set("X-Request-Id", "req_provider")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	})
	srv := startProxy(t, testConfig(up.URL), nil, Options{})
	for _, tc := range []struct {
		desc, path, sent, want string
	}{
		{desc: "client id echoed", path: "/plain/x", sent: "client-42", want: "client-42"},
		{desc: "refusal by hookproxy carries it", path: "/nowhere", sent: "client-43", want: "client-43"},
		{desc: "unusable id replaced", path: "/plain/x", sent: "two words", want: "req_"},
		{desc: "generated when absent", path: "/plain/x", want: "req_"},
		{desc: "provider id kept", path: "/plain/provider-id", sent: "client-44", want: "req_provider"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := map[string]string{}
			if tc.sent != "" {
				h["X-Request-Id"] = tc.sent
			}
			_, hdr, _ := post(t, srv.URL+tc.path, `{}`, h)
			got := hdr.Values("X-Request-Id")
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("X-Request-Id %q, want one value starting %q", got, tc.want)
			}
		})
	}
	// The client's header still reaches the upstream; a generated one is not added.
	for _, r := range up.requests() {
		if v := r.Header.Get("X-Request-Id"); strings.HasPrefix(v, "req_") {
			t.Errorf("a generated request id reached the upstream: %q", v)
		}
	}
}

// fakeMetrics records what the proxy reports.
type fakeMetrics struct {
	mu        sync.Mutex
	requests  []string // route status
	latencies []string // route
	ttfbs     []string // route
	streams   map[string]int
	maxActive map[string]int
}

func (m *fakeMetrics) ObserveRequest(route string, status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, route+" "+http.StatusText(status))
}

func (m *fakeMetrics) UpstreamLatency(route string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.latencies = append(m.latencies, route)
}

func (m *fakeMetrics) UpstreamTTFB(route string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ttfbs = append(m.ttfbs, route)
}

func (m *fakeMetrics) ForwardedUnexamined(route string) {}

func (m *fakeMetrics) StreamStarted(route string, mode enforcement.StreamMode) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := route + " " + string(mode)
	m.streams[k]++
	m.maxActive[k] = max(m.maxActive[k], m.streams[k])
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.streams[k]--
			m.mu.Unlock()
		})
	}
}

var _ Metrics = (*fakeMetrics)(nil)

// TestMetricsHooks: requests are counted by route and status, upstream calls measured,
// and SSE responses counted while in progress under the mode that carried them:
// passthrough, held whole, or streamed with each tool call held. A stream answering a
// request that asked for JSON is held whole, and counted so.
func TestMetricsHooks(t *testing.T) {
	stream := sseResponder(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`+"\n\n",
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n",
		"data: [DONE]\n\n")
	up := newUpstream(t, stream)
	streamBody := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	jsonBody := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

	for _, tc := range []struct {
		desc      string
		intercept string // the event an interceptor subscribes to, or none
		body      string
		mode      enforcement.StreamMode
	}{
		{desc: "passthrough", body: streamBody, mode: enforcement.StreamPassthrough},
		{desc: "held", intercept: ahp.EventModelResponseAfter, body: streamBody, mode: enforcement.StreamHeld},
		{desc: "tool calls", intercept: ahp.EventToolBefore, body: streamBody, mode: enforcement.StreamToolCalls},
		{desc: "mislabelled", intercept: ahp.EventToolBefore, body: jsonBody, mode: enforcement.StreamHeld},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m := &fakeMetrics{streams: map[string]int{}, maxActive: map[string]int{}}
			var srvURL string
			if tc.intercept != "" {
				ch := newTestChain(t, &fakePolicy{}, intercept(tc.intercept))
				srvURL = startProxy(t, testConfig(up.URL), ch, Options{Metrics: m}).URL
			} else {
				srvURL = startProxy(t, testConfig(up.URL), nil, Options{Metrics: m}).URL
			}
			if status, _, body := post(t, srvURL+chatPath, tc.body, nil); status != 200 || !strings.Contains(string(body), "[DONE]") {
				t.Fatalf("stream: status %d body %s", status, body)
			}
			post(t, srvURL+"/nowhere", `{}`, nil)

			deadline := time.Now().Add(2 * time.Second)
			for {
				m.mu.Lock()
				n := len(m.requests)
				m.mu.Unlock()
				if n == 2 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if got := strings.Join(m.requests, ","); got != "/openai OK,none Not Found" {
				t.Errorf("requests %q", got)
			}
			if len(m.ttfbs) != 1 || m.ttfbs[0] != "/openai" || len(m.latencies) != 1 || m.latencies[0] != "/openai" {
				t.Errorf("upstream measurements: ttfb %q latency %q", m.ttfbs, m.latencies)
			}
			k := "/openai " + string(tc.mode)
			if m.maxActive[k] != 1 || m.streams[k] != 0 {
				t.Errorf("stream %s: max active %d, active after %d (all: %v)", k, m.maxActive[k], m.streams[k], m.maxActive)
			}
		})
	}
}
