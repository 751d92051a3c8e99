package tracing

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookproxy/hookproxy/config"
)

// These tests swap the process-global tracer provider, so none of them runs in parallel.

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// useInMemory installs an SDK provider that records synchronously into an in-memory exporter.
func useInMemory(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

func TestSpansRecorded(t *testing.T) {
	exp := useInMemory(t)
	ctx, span := Tracer().Start(context.Background(), "boundary tool.before")
	_, child := Tracer().Start(ctx, "interceptor policy")
	child.End()
	span.End()

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("recorded %d spans, want 2", len(spans))
	}
	if spans[0].Name != "interceptor policy" || spans[1].Name != "boundary tool.before" {
		t.Fatalf("span names %q, %q", spans[0].Name, spans[1].Name)
	}
	if spans[0].Parent.SpanID() != spans[1].SpanContext.SpanID() {
		t.Fatal("child span is not parented to the boundary span")
	}
	if got := spans[0].InstrumentationScope.Name; got != InstrumentationName {
		t.Fatalf("instrumentation scope %q", got)
	}
}

func TestTraceContextExtension(t *testing.T) {
	useInMemory(t)
	ctx, span := Tracer().Start(context.Background(), "boundary")
	defer span.End()

	key, val, ok := TraceContextExtension(ctx)
	if !ok || key != "org.w3c.trace_context" {
		t.Fatalf("extension = %q, ok %v", key, ok)
	}
	var ext map[string]string
	if err := json.Unmarshal(val, &ext); err != nil {
		t.Fatalf("extension value is not a JSON object of strings: %v (%s)", err, val)
	}
	m := traceparentRE.FindStringSubmatch(ext["traceparent"])
	if m == nil {
		t.Fatalf("traceparent %q is not W3C version 00", ext["traceparent"])
	}
	sc := span.SpanContext()
	if m[1] != sc.TraceID().String() || m[2] != sc.SpanID().String() || m[3] != "01" {
		t.Fatalf("traceparent %q does not name the active span %s/%s (sampled)", ext["traceparent"], sc.TraceID(), sc.SpanID())
	}
	if _, has := ext["tracestate"]; has {
		t.Fatalf("empty tracestate must be omitted: %s", val)
	}
	for k := range ext {
		if k != "traceparent" && k != "tracestate" {
			t.Fatalf("unexpected member %q", k)
		}
	}
}

func TestTraceContextExtensionCarriesTracestate(t *testing.T) {
	useInMemory(t)
	ts, err := trace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:     trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
		Remote:     true,
	})
	ctx, span := Tracer().Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "boundary")
	defer span.End()
	_, val, ok := TraceContextExtension(ctx)
	if !ok {
		t.Fatal("no extension")
	}
	var ext map[string]string
	if err := json.Unmarshal(val, &ext); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ext["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-") {
		t.Fatalf("traceparent %q does not continue the caller's trace", ext["traceparent"])
	}
	if ext["tracestate"] != "vendor=abc,other=1" {
		t.Fatalf("tracestate %q", ext["tracestate"])
	}
}

func TestTraceContextExtensionWithoutSpan(t *testing.T) {
	if key, val, ok := TraceContextExtension(context.Background()); ok || key != "" || val != nil {
		t.Fatalf("got %q %s %v for a context without a span", key, val, ok)
	}
}

func TestSetupWithoutEndpointIsNoop(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	shutdown, err := Setup(context.Background(), config.Tracing{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := Tracer().Start(context.Background(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("span recorded with tracing off")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSetupRejectsBadSettings(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	for _, tc := range []struct {
		desc string
		cfg  config.Tracing
	}{
		{"ratio above one", config.Tracing{Endpoint: "http://127.0.0.1:4318", SampleRatio: 1.5}},
		{"negative ratio", config.Tracing{Endpoint: "http://127.0.0.1:4318", SampleRatio: -0.1}},
		{"unknown scheme", config.Tracing{Endpoint: "grpc://127.0.0.1:4317"}},
		{"credentials in URL", config.Tracing{Endpoint: "https://user:pw@collector:4318"}},
		{"path without scheme", config.Tracing{Endpoint: "collector:4318/v1/traces"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := Setup(context.Background(), tc.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestSetupExportsOverOTLPHTTP runs the real exporter against a loopback collector stub:
// the endpoint without a path posts to /v1/traces, and shutdown flushes the batch.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	var posts atomic.Int32
	var path atomic.Value
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path.Store(r.URL.Path)
		_, _ = io.Copy(io.Discard, r.Body)
		posts.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shutdown, err := Setup(ctx, config.Tracing{Endpoint: srv.URL, ServiceName: "hookproxy-test", SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, span := Tracer().Start(ctx, "boundary")
	if !span.IsRecording() {
		t.Fatal("span not recording with an endpoint set")
	}
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if posts.Load() == 0 {
		t.Fatal("no export reached the collector")
	}
	if p, _ := path.Load().(string); p != "/v1/traces" {
		t.Fatalf("exported to %q, want /v1/traces", p)
	}
}
