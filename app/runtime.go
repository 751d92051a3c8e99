package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/hookproxy/hookproxy/approvals"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/metrics"
	"github.com/hookproxy/hookproxy/pinning"
	"github.com/hookproxy/hookproxy/proxy"
	"github.com/hookproxy/hookproxy/state"
)

// retireFlushTimeout bounds the audit flush of a configuration generation retired by a
// reload (its last request has finished, so only queued lines remain).
const retireFlushTimeout = 10 * time.Second

// Runtime is the proxy handler of a running server. It serves every request on the
// configuration generation that is current when the request arrives, and keeps that
// generation alive until the request is done: a reload swaps the current generation
// atomically, and the previous one is closed (proxy connections, audit writer if no
// longer shared, chain with its backend processes) only when its last request finished.
type Runtime struct {
	log        *zap.Logger
	metrics    *metrics.Metrics   // nil without an admin listener
	tracer     trace.Tracer       // nil when tracing is off
	store      state.Store        // shared by every generation: conversation state survives reloads
	pinStore   pinning.Store      // tool-definition pins, shared by every generation (pins.go)
	health     *proxy.StoreHealth // the store's outage state, shared by every generation
	approvals  *approvals.Service // nil without an admin listener (no approval path)
	configPath string             // "" = the embedded default
	level      *zap.AtomicLevel   // nil: the level is fixed (set by flag)
	load       func(path string) (*config.Config, error)
	decisions  proxy.Auditor // nil: only the audit log, metrics and logs hear of a boundary
	window     *admin.Window // the console's recent decisions; nil without an admin listener
	// override, when set, is applied to every configuration loaded (serve's --listen and
	// --admin flags), so a reload neither undoes a flag nor reports it as a change.
	override func(*config.Config)

	cur      atomic.Pointer[generation]
	seq      atomic.Uint64
	draining atomic.Bool

	mu         sync.Mutex // serializes reloads and Close
	closed     bool
	lastDigest [sha256.Size]byte // files of the last reload attempt (change detection)

	liveMu sync.Mutex
	live   map[*generation]struct{} // every generation not yet closed
}

// generation is one loaded configuration with everything built from it.
type generation struct {
	rt    *Runtime
	seq   uint64
	cfg   *config.Config
	chain *chain.Chain // nil: nothing registered
	// rollout is the shadow chain and capture writer behind the live chain's tap.
	rollout *rollout
	// policies names the hooks in force, in chain order (PolicyNames).
	policies []string
	hooks    []admin.HookView // the chain in force, for the console's Health page
	srv      *proxy.Server
	audit    *auditLog
	pins     *pinning.Pinner // nil: pinning is off

	// refs counts the requests using this generation, plus one while it is current. The
	// generation closes when it drops to zero; it is never raised again from zero.
	refs      atomic.Int64
	closeOnce sync.Once
	closed    chan struct{}
}

// auditLog is an audit writer shared by consecutive generations whose audit settings are
// equal, so a reload that does not touch them keeps one file handle and one queue.
type auditLog struct {
	cfg  config.Audit
	w    *audit.Writer
	refs atomic.Int64
}

// runtimeOptions configure newRuntime.
type runtimeOptions struct {
	Logger     *zap.Logger
	Metrics    *metrics.Metrics
	Tracer     trace.Tracer
	ConfigPath string
	Level      *zap.AtomicLevel
	Load       func(path string) (*config.Config, error)
	Decisions  proxy.Auditor
	Override   func(*config.Config)
	Window     *admin.Window
}

func newRuntime(o runtimeOptions) *Runtime {
	rt := &Runtime{
		log:        o.Logger,
		metrics:    o.Metrics,
		tracer:     o.Tracer,
		health:     &proxy.StoreHealth{},
		configPath: o.ConfigPath,
		level:      o.Level,
		load:       o.Load,
		decisions:  o.Decisions,
		window:     o.Window,
		override:   o.Override,
		live:       map[*generation]struct{}{},
	}
	if rt.log == nil {
		rt.log = zap.NewNop()
	}
	if rt.load == nil {
		rt.load = config.Load
	}
	return rt
}

// start installs the first generation, built from an already loaded configuration.
func (rt *Runtime) start(cfg *config.Config) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.store == nil {
		st, err := NewStateStore(cfg.State, rt.log)
		if err != nil {
			return err
		}
		rt.store = st
	}
	if err := rt.openApprovals(cfg); err != nil {
		return err
	}
	g, err := rt.build(cfg, nil)
	if err != nil {
		return err
	}
	rt.lastDigest = rt.digest(cfg)
	rt.install(g)
	g.startBackends()
	return nil
}

// ServeHTTP serves r on the current generation.
func (rt *Runtime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g := rt.acquire()
	if g == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"hookproxy is shutting down","type":"server_error","code":null}}`)
		return
	}
	defer g.release()
	g.srv.ServeHTTP(w, r)
}

// Ready is the admin listener's readiness: the configuration is loaded and every
// persistent stdio backend runs (chain.Ready starts one that is not running).
func (rt *Runtime) Ready() error {
	if rt.draining.Load() {
		return errors.New("shutting down")
	}
	g := rt.acquire()
	if g == nil {
		return errors.New("configuration not loaded")
	}
	defer g.release()
	if g.chain == nil {
		return nil
	}
	return g.chain.Ready()
}

// Config returns the configuration of the current generation (nil after Close).
func (rt *Runtime) Config() *config.Config {
	if g := rt.cur.Load(); g != nil {
		return g.cfg
	}
	return nil
}

// Generation is the sequence number of the current generation (1 for the configuration
// the server started with).
func (rt *Runtime) Generation() uint64 {
	if g := rt.cur.Load(); g != nil {
		return g.seq
	}
	return 0
}

// acquire returns the current generation with a reference taken, or nil after Close.
func (rt *Runtime) acquire() *generation {
	for {
		g := rt.cur.Load()
		if g == nil {
			return nil
		}
		if g.tryRef() {
			return g
		}
		// g lost its last reference between Load and tryRef, which only happens after it
		// was replaced: load the successor.
	}
}

func (g *generation) tryRef() bool {
	for {
		n := g.refs.Load()
		if n <= 0 {
			return false
		}
		if g.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *generation) release() {
	if g.refs.Add(-1) == 0 {
		// The last request of a replaced generation: close it off the request path.
		go g.close(retireFlushTimeout)
	}
}

// close releases what the generation owns. Order: idle upstream connections, the audit
// log (flushed, unless the successor shares it), then the chain, whose Close stops the
// generation's stdio backends (stdin EOF, a grace period, then kill).
func (g *generation) close(flush time.Duration) {
	g.closeOnce.Do(func() {
		defer close(g.closed)
		_ = g.srv.Close()
		// Before the audit log: queued shadow settlements still write their records.
		g.rollout.close(g.rt.log)
		ctx, cancel := context.WithTimeout(context.Background(), flush)
		defer cancel()
		if err := g.audit.release(ctx); err != nil {
			g.rt.log.Error("closing the audit log", zap.Uint64("generation", g.seq), zap.Error(err))
		}
		if g.chain != nil {
			if err := g.chain.Close(); err != nil {
				g.rt.log.Warn("closing the interceptor chain", zap.Uint64("generation", g.seq), zap.Error(err))
			}
		}
		g.rt.liveMu.Lock()
		delete(g.rt.live, g)
		g.rt.liveMu.Unlock()
		g.rt.log.Debug("configuration generation closed", zap.Uint64("generation", g.seq))
	})
}

// warnNoPolicies says loudly, at startup and after each reload, that nothing is enforced.
func (g *generation) warnNoPolicies() {
	if len(g.policies) == 0 {
		g.rt.log.Warn(NoPoliciesWarning, zap.String("registration", RegistrationSource(g.cfg)))
	}
}

// startBackends starts the persistent stdio backends now rather than at the first event,
// so a backend that cannot start is reported at load time (and by /readyz).
func (g *generation) startBackends() {
	if g.chain == nil {
		return
	}
	if err := g.chain.Ready(); err != nil {
		g.rt.log.Warn("a persistent backend is not running; /readyz reports not ready until it starts",
			zap.Uint64("generation", g.seq), zap.Error(err))
	}
}

func (a *auditLog) release(ctx context.Context) error {
	if a.refs.Add(-1) != 0 {
		return nil
	}
	return a.w.Close(ctx)
}

// build makes a generation from cfg: chain (validating the registration document), audit
// writer (shared with prev when its settings are unchanged) and proxy handler. Nothing is
// left running when it fails.
func (rt *Runtime) build(cfg *config.Config, prev *generation) (_ *generation, err error) {
	var al *auditLog
	if prev != nil && prev.audit.cfg == cfg.Audit {
		al = prev.audit
		al.refs.Add(1)
	} else {
		w, err := audit.NewWriter(cfg.Audit, rt.log.Named("audit"))
		if err != nil {
			return nil, err
		}
		al = &auditLog{cfg: cfg.Audit, w: w}
		al.refs.Store(1)
	}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = al.release(ctx)
		}
	}()
	seq := rt.seq.Load() + 1 // the number this generation gets if it is built
	ro, err := buildRollout(cfg, seq, al.w, rt.metrics, rt.window, rt.log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ro.close(rt.log)
		}
	}()
	ch, doc, err := buildChainTap(cfg, cfg.Source, rt.log, ro.tap.Func())
	if err != nil {
		return nil, err
	}
	names := PolicyNames(doc)
	defer func() {
		if err != nil && ch != nil {
			_ = ch.Close()
		}
	}()
	opts := proxy.Options{
		Logger: rt.log,
		Auditor: &Boundaries{Audit: al.w, Metrics: rt.metrics, Log: rt.log, Decisions: rt.decisions,
			Console: rt.window, Transports: ch},
		State:       rt.store,
		StoreHealth: rt.health,
		Tracer:      rt.tracer,
		MCPHandler:  proxy.NewMCPHandler,
		Approvals:   proxyApprovals(rt.approvals, cfg),
	}
	if rt.metrics != nil { // a nil *Metrics in the interface would still cost a call per hook
		opts.Metrics = rt.metrics
	}
	if opts.Pins, err = rt.newPinner(cfg); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = al.release(ctx)
		return nil, err
	}
	srv, err := proxy.New(cfg, ch, opts)
	if err != nil {
		return nil, err
	}
	g := &generation{rt: rt, seq: rt.seq.Add(1), cfg: cfg, chain: ch, rollout: ro, policies: names, hooks: hookViews(doc),
		srv: srv, audit: al, pins: opts.Pins, closed: make(chan struct{})}
	return g, nil
}

// install makes g current and releases the previous generation's "current" reference.
func (rt *Runtime) install(g *generation) {
	g.refs.Store(1)
	rt.liveMu.Lock()
	rt.live[g] = struct{}{}
	rt.liveMu.Unlock()
	old := rt.cur.Swap(g)
	rt.metrics.RegisterAudit(g.audit.w.QueueDepth, g.audit.w.Dropped)
	if old != nil {
		old.release()
	}
}

// Reload loads the configuration and registration files again and, when both are valid,
// swaps them in atomically. On any error the running configuration stays in place, the
// error is logged with its reason and counted as a failed reload.
func (rt *Runtime) Reload(trigger string) error {
	return rt.reload(trigger, true)
}

// reloadIfChanged reloads when the configuration or registration file differs from the
// last reload attempt, so that unrelated file events cause no reload.
func (rt *Runtime) reloadIfChanged(trigger string) error {
	return rt.reload(trigger, false)
}

func (rt *Runtime) reload(trigger string, force bool) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return errors.New("shutting down")
	}
	cur := rt.cur.Load()
	if !force {
		d := rt.digestOf(rt.configPath, RegistrationPath(cur.cfg), cur.cfg.Shadow.Registration)
		if d == rt.lastDigest {
			return nil
		}
	}
	fail := func(err error) error {
		rt.metrics.ReloadResult(false)
		rt.log.Error("configuration reload failed; the running configuration stays in effect",
			zap.String("trigger", trigger), zap.Uint64("generation", cur.seq), zap.Error(err))
		return err
	}
	var cfg *config.Config
	if rt.configPath == "" {
		cfg = config.Default()
	} else {
		c, err := rt.load(rt.configPath)
		if err != nil {
			rt.lastDigest = rt.digestOf(rt.configPath, RegistrationPath(cur.cfg), cur.cfg.Shadow.Registration)
			return fail(err)
		}
		cfg = c
	}
	if rt.override != nil {
		rt.override(cfg)
	}
	rt.lastDigest = rt.digest(cfg)
	g, err := rt.build(cfg, cur)
	if err != nil {
		return fail(err)
	}
	rt.restartNotes(cur.cfg, cfg)
	if rt.level != nil && cfg.Log.Level != "" {
		var lvl zapcore.Level
		if lvl.UnmarshalText([]byte(cfg.Log.Level)) == nil {
			rt.level.SetLevel(lvl)
		}
	}
	rt.install(g)
	rt.metrics.ReloadResult(true)
	rt.log.Info("configuration reloaded",
		zap.String("trigger", trigger), zap.Uint64("generation", g.seq),
		zap.Any("routes", g.srv.Routes()), zap.Strings("policies", g.policies),
		zap.String("registration", RegistrationSource(cfg)))
	g.warnNoPolicies()
	g.startBackends()
	return nil
}

// restartNotes warns about settings a reload cannot apply to a running process.
func (rt *Runtime) restartNotes(old, cfg *config.Config) {
	note := func(key, from, to string) {
		rt.log.Warn("this setting changed but takes effect only after a restart; the running value stays",
			zap.String("key", key), zap.String("running", from), zap.String("configured", to))
	}
	if old.Listen != cfg.Listen {
		note("listen", old.Listen, cfg.Listen)
	}
	if old.Admin != cfg.Admin {
		note("admin", old.Admin, cfg.Admin)
	}
	approvalRestartNotes(old, cfg, note)
	if old.Tracing != cfg.Tracing {
		note("tracing", old.Tracing.Endpoint, cfg.Tracing.Endpoint)
	}
	if old.Log.Format != cfg.Log.Format {
		note("log.format", old.Log.Format, cfg.Log.Format)
	}
	// The store is opened once: conversation state must outlive reloads. Only
	// state.onStoreFailure is read per request.
	was, now := old.State, cfg.State
	was.OnStoreFailure, now.OnStoreFailure = "", ""
	if was != now {
		note("state", was.Backend, now.Backend)
	}
}

// digest fingerprints the files cfg was loaded from.
func (rt *Runtime) digest(cfg *config.Config) [sha256.Size]byte {
	return rt.digestOf(rt.configPath, RegistrationPath(cfg), cfg.Shadow.Registration)
}

func (rt *Runtime) digestOf(paths ...string) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range paths {
		if p == "" {
			h.Write([]byte{0})
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(h, "\x01%s", err)
			continue
		}
		fmt.Fprintf(h, "\x02%d:", len(b))
		h.Write(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// watchPaths are the files whose changes trigger a reload.
func (rt *Runtime) watchPaths() []string {
	if rt.configPath == "" {
		return nil
	}
	paths := []string{rt.configPath}
	if g := rt.cur.Load(); g != nil {
		if p := RegistrationPath(g.cfg); p != "" {
			paths = append(paths, p)
		}
		if p := g.cfg.Shadow.Registration; p != "" {
			paths = append(paths, p) // the shadow is reloaded with the live registration
		}
	}
	return paths
}

// Close retires the current generation and waits, up to ctx, until every generation has
// closed: audit logs flushed, chains closed and their backends stopped. Generations still
// serving requests when ctx ends are closed anyway. The caller stops the listener first.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	rt.draining.Store(true)
	if old := rt.cur.Swap(nil); old != nil {
		old.release()
	}
	rt.liveMu.Lock()
	live := make([]*generation, 0, len(rt.live))
	for g := range rt.live {
		live = append(live, g)
	}
	rt.liveMu.Unlock()
	var errs []error
	for _, g := range live {
		select {
		case <-g.closed:
		case <-ctx.Done():
			// Requests still hold it (the listener's deadline passed): close it under them.
			errs = append(errs, fmt.Errorf("generation %d closed with requests in flight", g.seq))
			d := time.Second
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) > d {
				d = time.Until(dl)
			}
			g.close(d)
		}
	}
	if rt.approvals != nil {
		_ = rt.approvals.Close()
	}
	if rt.store != nil {
		if err := rt.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("state store: %w", err))
		}
	}
	return errors.Join(errs...)
}
