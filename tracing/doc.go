// Package tracing sets up OpenTelemetry for hookproxy. Tracing is off unless the
// configuration names an OTLP/HTTP endpoint; when off, the global tracer provider is the
// no-op provider, so instrumented code costs next to nothing and needs no checks.
//
// Independently of export, the W3C trace context of the current span can be handed to
// hook backends as the AHP event extension "org.w3c.trace_context" (TraceContextExtension),
// so a backend's own spans join the caller's trace.
package tracing
