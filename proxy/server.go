package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/pinning"
	"github.com/hookproxy/hookproxy/state"
)

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Logger receives operational logs (default: no-op). hookproxy never logs header
	// values or bodies.
	Logger *zap.Logger
	// Auditor receives one record per settled boundary (default: none).
	Auditor Auditor
	// State holds the conversation state across requests: settlement records and
	// deferred injections (default: state.NewMemory(0, 0)). Share one Redis store when
	// several replicas run; keep one store across configuration reloads. The Server does
	// not close it.
	State state.Store
	// StoreHealth tracks outages of State, so that one is logged once; share it across
	// the servers of consecutive reloads (default: one per Server).
	StoreHealth *StoreHealth
	// Transport overrides the upstream round tripper (default: one shared
	// *http.Transport built from cfg.Limits).
	Transport http.RoundTripper
	// MCPHandler builds the handler of an `api: mcp` route. While nil, such routes are
	// rejected by New.
	MCPHandler MCPHandlerFactory
	// Metrics receives request and upstream measurements (default: none).
	Metrics Metrics
	// Tracer makes the request, boundary and interceptor spans (default: none; a caller's
	// incoming trace context is still passed on to backends).
	Tracer trace.Tracer
	// Approvals is the approval path (nil: none; ask is not advertised).
	Approvals *Approvals
	// Pins pins tool definitions on every route (default: none; pins.go).
	Pins *pinning.Pinner
}

// MCPHandlerFactory builds the handler of one `api: mcp` route. The handler receives
// requests with the route prefix already stripped from the URL path and must forward only
// to env.Upstream.
type MCPHandlerFactory func(env MCPRoute) (http.Handler, error)

// MCPRoute is what an MCP route handler gets from the server.
type MCPRoute struct {
	Route     config.Route
	Upstream  string
	Chain     *chain.Chain // nil when nothing is registered
	Transport http.RoundTripper
	Source    string
	Limits    config.Limits
	Logger    *zap.Logger
	Auditor   Auditor
	Tracer    trace.Tracer    // nil when tracing is off; see traceIntercept
	Approvals *Approvals      // nil: no approval path (ask not advertised)
	Pins      *pinning.Pinner // nil when pinning is off (mcp_pins.go)
}

// Server is the proxy's http.Handler.
type Server struct {
	cfg       *config.Config
	chain     *chain.Chain
	log       *zap.Logger
	auditor   Auditor
	state     state.Store
	health    *StoreHealth
	transport http.RoundTripper
	source    string
	limits    config.Limits
	routes    []*route
	mux       *chi.Mux
	metrics   Metrics
	tracer    trace.Tracer
	approvals *Approvals
	pins      *pinEnv // nil when pinning is off
	// active counts requests in progress and held the bytes of bodies held in memory, for
	// limits.maxConcurrentRequests and limits.maxHeldBytes.
	active, held atomic.Int64
}

var _ http.Handler = (*Server)(nil)

// New builds the proxy for cfg. ch may be nil: then nothing is intercepted and every
// request takes the fast path. The caller keeps ownership of ch.
func New(cfg *config.Config, ch *chain.Chain, opts Options) (*Server, error) {
	if cfg == nil {
		return nil, fmt.Errorf("proxy: nil configuration")
	}
	s := &Server{
		cfg:       cfg,
		chain:     ch,
		log:       opts.Logger,
		auditor:   opts.Auditor,
		state:     opts.State,
		health:    opts.StoreHealth,
		transport: opts.Transport,
		source:    cfg.Source,
		limits:    cfg.Limits.WithDefaults(),
		metrics:   opts.Metrics,
		tracer:    opts.Tracer,
		approvals: opts.Approvals,
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.state == nil {
		s.state = state.NewMemory(0, 0)
	}
	if s.health == nil {
		s.health = &StoreHealth{}
	}
	if s.source == "" {
		s.source = config.DefaultSource()
	}
	if s.transport == nil {
		t := newTransport(s.limits)
		if cfg.UpstreamProxy != "" {
			// Only a proxy the configuration names is used.
			pu, err := url.Parse(cfg.UpstreamProxy)
			if err != nil {
				return nil, fmt.Errorf("upstreamProxy: %w", err)
			}
			t.Proxy = http.ProxyURL(pu)
		}
		s.transport = t
	}
	if s.metrics != nil {
		s.transport = &meteredTransport{base: s.transport, metrics: s.metrics}
	}
	if s.auditor != nil {
		s.auditor = scopedAuditor{next: s.auditor}
	}
	if opts.Pins != nil {
		s.pins = &pinEnv{pinner: opts.Pins, chain: ch, auditor: s.auditor, log: s.log, source: s.source}
	}
	s.mux = chi.NewRouter()
	s.mux.Use(s.instrument, s.recoverer)
	seen := map[string]bool{}
	for i, rc := range cfg.Routes {
		rt, err := s.newRoute(rc, opts)
		if err != nil {
			return nil, fmt.Errorf("proxy: routes[%d] (prefix %q): %w", i, rc.Prefix, err)
		}
		if seen[rt.prefix] {
			return nil, fmt.Errorf("proxy: routes[%d]: duplicate prefix %q", i, rt.prefix)
		}
		seen[rt.prefix] = true
		s.routes = append(s.routes, rt)
		s.mux.Mount(rt.prefix, rt)
	}
	s.mux.NotFound(s.notFound)
	s.mux.MethodNotAllowed(s.notFound)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases idle upstream connections. It does not close the chain.
func (s *Server) Close() error {
	if t, ok := s.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// RouteSummary describes one configured route (for the startup log line).
type RouteSummary struct {
	Prefix   string `json:"prefix"`
	API      string `json:"api"`
	Upstream string `json:"upstream"`
}

// Routes lists the routes the server serves, in configuration order.
func (s *Server) Routes() []RouteSummary {
	out := make([]RouteSummary, 0, len(s.routes))
	for _, rt := range s.routes {
		u := *rt.upstream
		u.RawQuery = "" // a query may carry an API key; summaries end up in logs
		out = append(out, RouteSummary{Prefix: rt.prefix, API: rt.api, Upstream: u.String()})
	}
	return out
}

// Source is the AHP event source this server stamps on its events.
func (s *Server) Source() string { return s.source }

// notFound answers requests outside every route. Nothing is forwarded: the proxy only
// ever talks to the upstreams the configuration names.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": "hookproxy has no route for this path", "type": "not_found_error", "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(b)
}

// recoverer turns a panic in request handling into a logged 500 instead of a dropped
// connection with a stack trace on stderr. http.ErrAbortHandler (used by the reverse
// proxy to abort a broken stream) is passed on.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.logAt(r.Context(), zapcore.ErrorLevel, "panic while handling a request", zap.String("path", r.URL.Path), zap.Any("panic", v))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"message":"hookproxy internal error","type":"server_error","code":null}}`))
		}()
		next.ServeHTTP(w, r)
	})
}
