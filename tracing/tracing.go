package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hookproxy/hookproxy/config"
)

// ExtensionKey is the AHP event extension that carries the W3C trace context
// (AHP spec, execution-payloads.md).
const ExtensionKey = "org.w3c.trace_context"

// InstrumentationName names hookproxy's tracer.
const InstrumentationName = "github.com/hookproxy/hookproxy"

// defaultTracesPath is the OTLP/HTTP traces path, used when the endpoint names no path.
const defaultTracesPath = "/v1/traces"

// Setup installs the global tracer provider and W3C propagators described by cfg and
// returns the function that flushes and stops it. With no endpoint the no-op provider is
// installed and shutdown does nothing. Invalid settings are errors.
//
// Endpoint forms: "http://host:4318" or "https://host:4318[/path]" (the scheme decides
// TLS; no path means /v1/traces), or "host:4318" (TLS unless Insecure is set).
func Setup(ctx context.Context, cfg config.Tracing) (shutdown func(context.Context) error, err error) {
	// Propagators are installed even when export is off: the proxy still forwards a
	// caller's trace context to backends and upstreams.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	if cfg.Endpoint == "" {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}
	ratio := cfg.SampleRatio
	switch {
	case ratio < 0 || ratio > 1:
		return nil, fmt.Errorf("tracing: sampleRatio %v: want a value in (0, 1]; 0 or unset means 1", ratio)
	case ratio == 0:
		ratio = 1 // unset: sample everything the parent does not decide
	}
	opts, err := exporterOptions(cfg)
	if err != nil {
		return nil, err
	}
	// New does not connect; an unreachable collector shows up as export errors later,
	// logged by the OpenTelemetry error handler, never as a blocked request.
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = config.DefaultServiceName
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("tracing: resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		// Parent-based: a caller that already decided to sample (or not) keeps its trace whole.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		// Later spans go nowhere rather than to a stopped provider.
		otel.SetTracerProvider(noop.NewTracerProvider())
		return tp.Shutdown(ctx)
	}, nil
}

func exporterOptions(cfg config.Tracing) ([]otlptracehttp.Option, error) {
	ep := cfg.Endpoint
	if !strings.Contains(ep, "://") {
		if strings.ContainsAny(ep, "/?#") {
			return nil, fmt.Errorf("tracing: endpoint %q: a path needs a scheme (http:// or https://)", ep)
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(ep), otlptracehttp.WithURLPath(defaultTracesPath)}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return opts, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return nil, fmt.Errorf("tracing: endpoint %q: %w", ep, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("tracing: endpoint %q: scheme must be http or https", ep)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("tracing: endpoint %q: no host", ep)
	}
	if u.User != nil {
		// Credentials in a URL end up in logs; collectors take headers via OTEL_EXPORTER_OTLP_HEADERS.
		return nil, fmt.Errorf("tracing: endpoint: credentials in the URL are not accepted")
	}
	path := u.Path
	if path == "" || path == "/" {
		path = defaultTracesPath
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return opts, nil
}

// Tracer returns hookproxy's tracer from the global provider (no-op until Setup enables
// export).
func Tracer() trace.Tracer { return otel.Tracer(InstrumentationName) }

// TraceContextExtension renders the span context of ctx as the AHP event extension
// {"traceparent": "...", "tracestate": "..."} (W3C Trace Context; tracestate only when
// not empty). ok is false when ctx carries no valid span context, in which case nothing
// should be added to the event.
func TraceContextExtension(ctx context.Context) (key string, value json.RawMessage, ok bool) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", nil, false
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tp := carrier.Get("traceparent")
	if tp == "" {
		return "", nil, false
	}
	ext := struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate,omitempty"`
	}{tp, carrier.Get("tracestate")}
	b, err := json.Marshal(ext)
	if err != nil {
		return "", nil, false
	}
	return ExtensionKey, b, true
}
