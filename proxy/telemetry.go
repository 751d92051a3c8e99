package proxy

// Telemetry of the proxy, not AHP observation (that is the chain's): a request id and
// scope per request, Prometheus-style metrics through a small interface, OpenTelemetry
// spans, and request-scoped log lines.
// Everything here is optional and cheap when off: with no Metrics and no Tracer a request
// costs one scope (request id, route, status) and nothing else.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/tracing"
)

// Metrics receives the measurements only the HTTP side can take. Boundary decisions and
// interceptor latencies reach the Auditor in BoundaryRecord, so they are counted there and
// not here (one place per fact). *metrics.Metrics satisfies it; the proxy does not import
// the metrics package, so it carries no Prometheus dependency.
type Metrics interface {
	// ObserveRequest counts one answered client request.
	ObserveRequest(route string, status int)
	// UpstreamLatency is the upstream call's duration until its body was read to the end.
	UpstreamLatency(route string, d time.Duration)
	// UpstreamTTFB is the time until the upstream's response headers arrived.
	UpstreamTTFB(route string, d time.Duration)
	// StreamStarted counts an SSE response in progress and returns the function that ends
	// it (safe to call more than once).
	StreamStarted(route string, mode enforcement.StreamMode) func()
	// ForwardedUnexamined counts a request forwarded to an endpoint the route does not map
	// (routes[].unmapped: forward).
	ForwardedUnexamined(route string)
}

// RequestIDHeader carries the request id: a client's value is accepted (when it is a
// short printable token) and echoed; otherwise hookproxy generates one. The client's
// header is forwarded upstream like every other header; a generated id is not added to
// the upstream request (hookproxy adds no headers of its own).
const RequestIDHeader = "X-Request-Id"

// routeNone labels requests that match no route (answered 404).
const routeNone = "none"

// requestScope is the per-request operational state, carried in the request context from
// the outermost middleware to the transport, the boundaries and the log lines.
type requestScope struct {
	id    string
	route string

	mu     sync.Mutex
	events []string // ids of the events settled or observed for this request, in order
}

type scopeKey struct{}

func scopeFrom(ctx context.Context) *requestScope {
	sc, _ := ctx.Value(scopeKey{}).(*requestScope)
	return sc
}

// RequestID returns the id of the request ctx belongs to ("" outside a proxied request).
// Auditors use it to tag their log lines.
func RequestID(ctx context.Context) string {
	if sc := scopeFrom(ctx); sc != nil {
		return sc.id
	}
	return ""
}

func (sc *requestScope) addEvent(id string) {
	sc.mu.Lock()
	sc.events = append(sc.events, id)
	sc.mu.Unlock()
}

func (sc *requestScope) eventIDs() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]string(nil), sc.events...)
}

// fields are the log fields that tie a line to its request.
func (sc *requestScope) fields() []zap.Field {
	f := []zap.Field{zap.String("requestId", sc.id)}
	if ids := sc.eventIDs(); len(ids) > 0 {
		f = append(f, zap.Strings("eventIds", ids))
	}
	return f
}

// unexamined records a forward of input the chain did not see: counted, and logged at
// info so an operator who opened the route can see what goes through it.
func (s *Server) unexamined(ctx context.Context, rt *route, method, endpoint string) {
	if s.metrics != nil {
		s.metrics.ForwardedUnexamined(rt.prefix)
	}
	if s.auditor != nil {
		s.auditor.OnBoundary(ctx, BoundaryRecord{Time: time.Now(), Route: rt.prefix, API: rt.api,
			EventID: "unmapped_" + randomHex(), Enforcement: enforcement.ForwardedUnexamined})
	}
	s.logAt(ctx, zapcore.InfoLevel, "forwarded unexamined (unmapped endpoint)", zap.String("route", rt.prefix),
		zap.String("method", method), zap.String("endpoint", endpoint))
}

// logAt writes a log line about the request of ctx: it carries the request id and the
// event ids settled so far. Fields are only built when the level is enabled.
func (s *Server) logAt(ctx context.Context, lvl zapcore.Level, msg string, fields ...zap.Field) {
	ce := s.log.Check(lvl, msg)
	if ce == nil {
		return
	}
	if sc := scopeFrom(ctx); sc != nil {
		fields = append(sc.fields(), fields...)
	}
	ce.Write(fields...)
}

// Request ids hookproxy generates: a random per-process prefix and a counter, unique
// without a random read per request.
var (
	requestIDPrefix  = "req_" + randomHex()[:16] + "_"
	requestIDCounter atomic.Uint64
)

func requestIDFor(client string) string {
	if validRequestID(client) {
		return client
	}
	var buf [48]byte
	b := append(buf[:0], requestIDPrefix...)
	return string(strconv.AppendUint(b, requestIDCounter.Add(1), 16))
}

// validRequestID accepts 1–128 visible ASCII characters: anything else could break a log
// line or be abused to smuggle content into logs.
func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// routeLabel is the prefix of the route that serves path (chi's Mount semantics: the
// prefix itself or the prefix followed by "/"), or routeNone.
func (s *Server) routeLabel(path string) string {
	best := ""
	for _, rt := range s.routes {
		p := rt.prefix
		ok := p == "/" || path == p || strings.HasPrefix(path, p) && len(path) > len(p) && path[len(p)] == '/'
		if ok && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return routeNone
	}
	return best
}

// instrument is the outermost middleware: request id, request span, status and
// duration, request metric and the request's summary log line.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// Scope and writer share one allocation.
		st := &struct {
			scope  requestScope
			writer statusWriter
		}{}
		sc, sw := &st.scope, &st.writer
		sc.id, sc.route = requestIDFor(r.Header.Get(RequestIDHeader)), s.routeLabel(r.URL.Path)
		sw.ResponseWriter, sw.id = w, sc.id
		ctx := context.WithValue(r.Context(), scopeKey{}, sc)
		var span trace.Span
		switch {
		case s.tracer != nil:
			// Continue the caller's trace when it sent one (parent-based sampling).
			ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = s.tracer.Start(ctx, r.Method+" "+sc.route,
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					attribute.String("http.request.method", r.Method),
					attribute.String("http.route", sc.route),
					attribute.String("url.path", r.URL.Path),
					attribute.String("hookproxy.request_id", sc.id)))
		case r.Header.Get("Traceparent") != "":
			// Export is off, but a caller's trace context still reaches the backends
			// (event extension org.w3c.trace_context), so their spans join its trace.
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		defer func() {
			// Deferred so that an aborted stream (http.ErrAbortHandler) is counted too.
			status := sw.status
			if status == 0 {
				status = http.StatusOK // net/http sends 200 for a handler that wrote nothing
				if ctx.Err() != nil {
					status = 499 // the client went away before an answer (nginx's convention)
				}
			}
			if s.metrics != nil {
				s.metrics.ObserveRequest(sc.route, status)
			}
			if span != nil {
				span.SetAttributes(attribute.Int("http.response.status_code", status))
				if status >= 500 {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
				span.End()
			}
			lvl := zapcore.DebugLevel
			if status >= 400 {
				lvl = zapcore.InfoLevel // refusals and failures are worth a line by default
			}
			if ce := s.log.Check(lvl, "request"); ce != nil { // no fields built when off
				ce.Write(append(sc.fields(),
					zap.String("route", sc.route), zap.String("method", r.Method), zap.String("path", r.URL.Path),
					zap.Int("status", status), zap.Duration("duration", time.Since(start)))...)
			}
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// statusWriter records the status and echoes the request id. It keeps streaming working:
// Flush is forwarded and Unwrap lets http.ResponseController reach the connection.
type statusWriter struct {
	http.ResponseWriter
	id     string
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
			w.ResponseWriter.WriteHeader(code) // informational: the final status is still to come
			return
		}
		w.begin(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.begin(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.begin(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// begin fixes the status and adds X-Request-Id unless the response already carries one:
// a provider's own request id (OpenAI and Anthropic send one, and their SDKs surface it
// for support requests) is never replaced.
func (w *statusWriter) begin(code int) {
	w.status = code
	h := w.Header()
	if _, ok := h[RequestIDHeader]; !ok {
		h[RequestIDHeader] = []string{w.id}
	}
}

// scopedAuditor notes each boundary's event id in the request scope (for log lines) and
// hands the record on.
type scopedAuditor struct{ next Auditor }

func (a scopedAuditor) OnBoundary(ctx context.Context, rec BoundaryRecord) {
	if sc := scopeFrom(ctx); sc != nil && rec.EventID != "" {
		sc.addEvent(rec.EventID)
	}
	a.next.OnBoundary(ctx, rec)
}

// ---- tracing ----

// intercept settles one boundary through the chain, traced: a span for the boundary, one
// child span per interceptor call, and the boundary's W3C trace context in the event's
// extensions so backends can join the trace.
func (s *Server) intercept(ctx context.Context, ev *ahp.Event, caps ahp.Capabilities, ext ...string) *chain.Settlement {
	return traceIntercept(ctx, s.tracer, s.chain, ev, caps, ext...)
}

// settledOrNone is the settlement of ev the lifecycles record: st, naming ev when the engine
// left its Event unset, or, defensively, one that decided nothing when the engine settled
// nothing.
func settledOrNone(st *chain.Settlement, ev *ahp.Event) *chain.Settlement {
	if st == nil { // defensive: an engine that settles nothing decided nothing
		st = &chain.Settlement{Event: ev, Permission: ahp.PermissionNone, Flow: ahp.FlowNone}
	}
	if st.Event == nil {
		st.Event = ev
	}
	return st
}

// traceIntercept is intercept for handlers that hold a chain and a tracer but no Server
// (MCP routes). tracer may be nil: then no span is made, and only a caller's incoming
// trace context is passed on to the backends.
func traceIntercept(ctx context.Context, tracer trace.Tracer, ch *chain.Chain, ev *ahp.Event, caps ahp.Capabilities, ext ...string) *chain.Settlement {
	if st := pinSettlement(ctx, ch, ev, caps, ext...); st != nil {
		return st
	}
	if tracer == nil || ev == nil {
		addTraceContext(ctx, ev)
		return ch.Intercept(ctx, ev, caps, ext...)
	}
	start := time.Now()
	// The boundary span starts at the same instant the interceptor spans are laid out from.
	ctx, span := tracer.Start(ctx, "ahp "+ev.Type, trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("ahp.event.id", ev.ID),
		attribute.String("ahp.event.type", ev.Type)))
	addTraceContext(ctx, ev)
	st := ch.Intercept(ctx, ev, caps, ext...)
	if st != nil {
		interceptorSpans(ctx, tracer, ch, start, ev, st)
		attrs := []attribute.KeyValue{
			attribute.String("ahp.permission", st.Permission),
			attribute.String("ahp.flow", st.Flow),
			attribute.Bool("ahp.modified", st.Modified),
		}
		if st.Denial != nil {
			attrs = append(attrs, attribute.String("ahp.denial.code", st.Denial.Code),
				attribute.Bool("ahp.denial.synthetic", st.Denial.Synthetic))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
	return st
}

// interceptorSpans records one span per interceptor call of a settled boundary, named and
// described in the OpenTelemetry GenAI guardrail vocabulary (development status; see
// tracing/genai.go): gen_ai.run_guardrail.internal for an in-process policy,
// gen_ai.run_guardrail.client for an HTTP or stdio backend, with the hook's verdict, what
// hookproxy enforced, and a gen_ai.security.finding event per finding; the ahp.*
// attributes say the same in the protocol's own words. Calls run serially
// (AHP-COMP-001), so each starts where the previous one ended; the durations are the
// chain's own measurements (Record.Latency). Reconstructing them here keeps the engine
// free of any tracing dependency.
func interceptorSpans(ctx context.Context, tracer trace.Tracer, ch *chain.Chain, start time.Time, ev *ahp.Event, st *chain.Settlement) {
	at := start
	action := guardrailAction(st)
	for i := range st.Records {
		r := &st.Records[i]
		switch r.Outcome {
		case chain.OutcomeNotCalled, chain.OutcomeObserved:
			continue // no call was made at decision time
		}
		end := at.Add(r.Latency)
		transport := ch.TransportOf(r.BackendID)
		name, kind := tracing.SpanGuardrailClient, trace.SpanKindClient
		if transport == registration.TransportInProcess {
			name, kind = tracing.SpanGuardrailInternal, trace.SpanKindInternal
		}
		verdict := guardrailVerdict(r)
		attrs := []attribute.KeyValue{
			attribute.String(tracing.AttrOperationName, tracing.OperationRunGuardrail),
			attribute.String(tracing.AttrGuardrailID, r.BackendID),
			attribute.String(tracing.AttrTargetType, tracing.TargetType(ev.Type)),
			attribute.String(tracing.AttrVerdictType, verdict),
			attribute.String(tracing.AttrActionType, action),
			attribute.Bool(tracing.AttrContentModified, slices.Contains(r.Effects, ahp.EffectModify)),
			attribute.String("ahp.backend.id", r.BackendID),
			attribute.String("ahp.backend.transport", transport),
			attribute.Int("ahp.subscription", r.Subscription),
			attribute.String("ahp.outcome", string(r.Outcome)),
			attribute.StringSlice("ahp.effects", r.Effects),
		}
		if ev.Session != nil && ev.Session.ID != "" {
			attrs = append(attrs, attribute.String(tracing.AttrConversationID, ev.Session.ID))
		}
		policy := ch.PolicyOf(r.BackendID)
		if policy != "" {
			attrs = append(attrs, attribute.String(tracing.AttrPolicyID, policy), attribute.String(tracing.AttrGuardrailName, policy))
		} else {
			attrs = append(attrs, attribute.String(tracing.AttrGuardrailName, r.BackendID))
		}
		// The rule: the deny code of this hook's denial (a built-in policy names its rule
		// class there, e.g. hookproxy.tools.destructive, hookproxy.secrets.github_token).
		rule := ""
		if d := st.Denial; d != nil && d.BackendID == r.BackendID && !d.Synthetic && d.Code != "" {
			rule = d.Code
			attrs = append(attrs, attribute.String(tracing.AttrVerdictCode, d.Code), attribute.String(tracing.AttrPolicyRuleID, d.Code))
		}
		_, span := tracer.Start(ctx, name, trace.WithTimestamp(at), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
		for _, eff := range r.Effects {
			if eff == ahp.EffectAllow || eff == ahp.EffectMessage {
				continue // not a finding: nothing was flagged
			}
			fa := []attribute.KeyValue{attribute.String(tracing.AttrVerdictType, eff),
				attribute.String(tracing.AttrTargetType, tracing.TargetType(ev.Type))}
			if eff == ahp.EffectDeny && rule != "" {
				fa = append(fa, attribute.String(tracing.AttrPolicyRuleID, rule))
			}
			if policy != "" {
				fa = append(fa, attribute.String(tracing.AttrPolicyID, policy))
			}
			span.AddEvent(tracing.EventFinding, trace.WithTimestamp(end), trace.WithAttributes(fa...))
		}
		if r.FailureKind != "" {
			span.SetAttributes(attribute.String("ahp.failure.kind", string(r.FailureKind)),
				attribute.String("ahp.failure.policy", r.Policy), attribute.String("error.type", string(r.FailureKind)))
			span.SetStatus(codes.Error, string(r.FailureKind))
		}
		span.End(trace.WithTimestamp(end))
		at = end
	}
}

// guardrailVerdict is one hook's answer as the proposal's verdict: its strongest accepted
// effect (deny, ask, flow, return, modify, inject, message, allow in that order), "allow"
// for an answer with none, "error" for a failed call.
func guardrailVerdict(r *chain.Record) string {
	if r.Outcome == chain.OutcomeFailed {
		return tracing.VerdictError
	}
	for _, e := range []string{ahp.EffectDeny, ahp.EffectAsk, ahp.EffectFlow, ahp.EffectReturn,
		ahp.EffectModify, ahp.EffectInject, ahp.EffectMessage, ahp.EffectAllow} {
		if slices.Contains(r.Effects, e) {
			return e
		}
	}
	return tracing.VerdictAllow
}

// guardrailAction is what hookproxy enforces for the settled boundary: block (denied,
// fail-closed, or flow stopped), modify (changed, injected or answered from a supplied
// result), else allow.
func guardrailAction(st *chain.Settlement) string {
	switch {
	case st.Refused() || st.Stopped():
		return tracing.ActionBlock
	case st.Modified || len(st.Injections) > 0 || st.Candidate != nil:
		return tracing.ActionModify
	}
	return tracing.ActionAllow
}

// traceObserved passes the trace context on to the observers of an observe-only event.
func (s *Server) traceObserved(ctx context.Context, ev *ahp.Event) { addTraceContext(ctx, ev) }

// addTraceContext sets extensions["org.w3c.trace_context"] from the span context of ctx.
// Nothing is allocated when ctx carries no trace.
func addTraceContext(ctx context.Context, ev *ahp.Event) {
	if ev == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	key, val, ok := tracing.TraceContextExtension(ctx)
	if !ok {
		return
	}
	if ev.Extensions == nil {
		ev.Extensions = make(map[string]json.RawMessage, 1)
	}
	ev.Extensions[key] = val
}

// ---- upstream measurements ----

// meteredTransport measures upstream calls for Metrics: time to response headers, time
// until the body was read, and SSE streams in progress.
type meteredTransport struct {
	base    http.RoundTripper
	metrics Metrics
	lc      *lifecycle // the boundary request it carries (lifecycle.forward), or nil
}

func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sc := scopeFrom(req.Context())
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	if err != nil || sc == nil {
		return resp, err
	}
	t.metrics.UpstreamTTFB(sc.route, time.Since(start))
	mb := &meteredBody{rc: resp.Body, metrics: t.metrics, route: sc.route, start: start}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && isEventStream(resp.Header.Get("Content-Type")) {
		mode := enforcement.StreamPassthrough
		if t.lc != nil {
			mode = t.lc.modeFor(resp).streamMode()
		}
		mb.endStream = t.metrics.StreamStarted(sc.route, mode)
	}
	resp.Body = mb
	return resp, nil
}

// CloseIdleConnections keeps Server.Close working through the wrapper.
func (t *meteredTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// meteredBody reports the upstream latency when the body ends (EOF, error or Close,
// whichever comes first) and ends the stream gauge.
type meteredBody struct {
	rc        io.ReadCloser
	metrics   Metrics
	route     string
	start     time.Time
	endStream func()
	done      atomic.Bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.finish()
	}
	return n, err
}

func (b *meteredBody) Close() error {
	b.finish()
	return b.rc.Close()
}

func (b *meteredBody) finish() {
	if b.done.Swap(true) {
		return
	}
	b.metrics.UpstreamLatency(b.route, time.Since(b.start))
	if b.endStream != nil {
		b.endStream()
	}
}
