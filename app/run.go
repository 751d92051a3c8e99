package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/internal/listmemo"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
	"github.com/hookproxy/hookproxy/metrics"
	"github.com/hookproxy/hookproxy/policies"
	"github.com/hookproxy/hookproxy/proxy"
	"github.com/hookproxy/hookproxy/state"
	"github.com/hookproxy/hookproxy/tracing"
)

// Defaults of Options.
const (
	DefaultReloadDebounce = 250 * time.Millisecond
	// DefaultFlushTimeout bounds what follows the request drain at shutdown: flushing the
	// audit log and stopping backends, then flushing traces.
	DefaultFlushTimeout = 10 * time.Second
	// adminShutdownTimeout bounds the admin listener's drain; its requests are short.
	adminShutdownTimeout = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Config is the loaded configuration to start with (required).
	Config *config.Config
	// ConfigPath is the file Config was loaded from, read again on reload and watched for
	// changes. "" means the embedded default: nothing is watched and a reload rebuilds it.
	ConfigPath string
	// Logger receives every log line (default: no-op).
	Logger *zap.Logger
	// Level, when set, follows log.level of each reloaded configuration (leave it nil when
	// a command-line flag fixed the level).
	Level *zap.AtomicLevel
	// Reload delivers reload requests (SIGHUP).
	Reload <-chan struct{}
	// Started, when set, is called once both listeners accept connections, with their
	// addresses (adminAddr is "" without an admin listener).
	Started func(proxyAddr, adminAddr string)
	// ReloadDebounce is how long file events must pause before a reload (default 250ms):
	// one save is often several events.
	ReloadDebounce time.Duration
	// FlushTimeout bounds the audit flush, backend stop and trace flush at shutdown
	// (default 10s), after the request drain bounded by limits.shutdownTimeout.
	FlushTimeout time.Duration
	// Listener, when set, is the proxy listener, already open (Config.Listen is then not
	// listened on): the demo opens its own to name the flag in its error. Run closes it.
	Listener net.Listener
	// Decisions, when set, is also told of every settled boundary, after the audit log
	// and metrics (the demo prints each decision).
	Decisions proxy.Auditor
	// Override, when set, is applied to Config and to every configuration a reload loads:
	// the command line's --listen and --admin win over the file.
	Override func(*config.Config)
}

// ListenError is a listener that could not be opened: a taken port, an address that is
// not this machine's, a privileged port. Its message is one line that names the address,
// the reason and the flag that chooses another address.
type ListenError struct {
	Key  string // configuration key: listen | admin ("" when no configuration names it)
	Flag string // command-line flag of serve that overrides it
	Addr string
	Err  error
}

func (e *ListenError) Error() string {
	reason := e.Err.Error()
	switch {
	case errors.Is(e.Err, syscall.EADDRINUSE):
		reason = "the address is already in use (another hookproxy, or `hookproxy demo`?)"
	case errors.Is(e.Err, syscall.EACCES):
		reason = "permission denied (a port below 1024 needs privileges)"
	case errors.Is(e.Err, syscall.EADDRNOTAVAIL):
		reason = "the address is not one of this machine's"
	}
	msg := fmt.Sprintf("cannot listen on %s: %s; choose another address with %s ADDR", e.Addr, reason, e.Flag)
	if e.Key != "" {
		msg += fmt.Sprintf(" (or the configuration's %q key)", e.Key)
	}
	return msg
}

func (e *ListenError) Unwrap() error { return e.Err }

// Run serves the proxy (and the admin listener when configured) until ctx ends, then
// shuts down gracefully: it stops accepting, lets requests and streams in flight finish
// up to limits.shutdownTimeout, flushes the audit log, stops the backends and flushes
// traces. It returns nil after a clean shutdown and an error when startup failed or the
// drain deadline cut requests short.
func Run(ctx context.Context, opts Options) error {
	cfg := opts.Config
	if cfg == nil {
		return errors.New("app: no configuration")
	}
	if opts.Override != nil {
		opts.Override(cfg)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if opts.ReloadDebounce <= 0 {
		opts.ReloadDebounce = DefaultReloadDebounce
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}

	// Both listeners open first, before anything is started or logged: a taken port is the
	// commonest first-run failure and deserves a plain error of its own (ListenError).
	ln := opts.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", cfg.Listen)
		if err != nil {
			return &ListenError{Key: "listen", Flag: "--listen", Addr: cfg.Listen, Err: err}
		}
	}
	var adminLn net.Listener
	if cfg.Admin != "" {
		var err error
		adminLn, err = net.Listen("tcp", cfg.Admin)
		if err != nil {
			_ = ln.Close()
			return &ListenError{Key: "admin", Flag: "--admin", Addr: cfg.Admin, Err: err}
		}
	}
	closeListeners := func() {
		_ = ln.Close()
		if adminLn != nil {
			_ = adminLn.Close()
		}
	}

	shutdownTracing, err := tracing.Setup(ctx, cfg.Tracing)
	if err != nil {
		closeListeners()
		return err
	}
	var tracer trace.Tracer
	if cfg.Tracing.Endpoint != "" {
		tracer = tracing.Tracer()
	}
	// Metrics are only reachable through the admin listener: without one, none are kept.
	var m *metrics.Metrics
	var window *admin.Window // the console's recent decisions, kept only when it can be opened
	if cfg.Admin != "" {
		m = metrics.New()
		window = admin.NewWindow(admin.DefaultWindowSize)
		m.RegisterScanCache(func() (bytes, entries int64, hits, misses uint64) {
			bytes, entries, hits, misses = policies.ScanCacheStats()
			tb, te := transport.KnownTextStats()
			lb, le := mapping.KnownLiteralStats()
			hb, he := heldtexts.Stats()
			rb, re, _, _ := anthropic.ResumeStats()
			mb, me := listmemo.Stats()
			sb, se := state.LoadMemoStats()
			return bytes + tb + lb + hb + rb + mb + sb, entries + te + le + he + re + me + se, hits, misses
		})
	}
	rt := newRuntime(runtimeOptions{Logger: log, Metrics: m, Tracer: tracer, ConfigPath: opts.ConfigPath, Level: opts.Level,
		Decisions: opts.Decisions, Override: opts.Override, Window: window})
	// Anything that fails from here on must still release what was started.
	cleanup := func() {
		closeListeners()
		fctx, cancel := context.WithTimeout(context.Background(), opts.FlushTimeout)
		defer cancel()
		_ = rt.Close(fctx)
		if err := shutdownTracing(fctx); err != nil {
			log.Warn("flushing traces", zap.Error(err))
		}
	}
	if err := rt.start(cfg); err != nil {
		cleanup()
		return err
	}

	hs := &http.Server{
		Handler:           rt,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No read/write timeout: model streams legitimately run for minutes; the upstream
		// transport bounds connection setup and time to first header instead.
		ErrorLog: zap.NewStdLog(log.Named("http")),
	}
	var as *http.Server
	if adminLn != nil {
		as = &http.Server{
			Handler: admin.New(admin.Options{Ready: rt.Ready, Metrics: m.Handler(), Logger: log.Named("admin"), Auth: adminAuth(cfg, log.Named("admin")),
				Protected: rt.protectedRoutes(), Manifest: rt.manifest(),
				Console: &admin.ConsoleOptions{Window: window, Health: rt.consoleHealth,
					Shadow: rt.consoleShadow, Pins: rt.Pinner, Scrub: scrub}}),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          zap.NewStdLog(log.Named("admin-http")),
		}
	}

	serveErr := make(chan error, 2)
	go func() { serveErr <- hs.Serve(ln) }()
	adminAddr := ""
	if as != nil {
		adminAddr = adminLn.Addr().String()
		go func() { serveErr <- as.Serve(adminLn) }()
	}

	// The control loop: reload requests and file changes, one at a time.
	loopCtx, stopLoop := context.WithCancel(context.Background())
	var loopDone sync.WaitGroup
	loopDone.Go(func() { rt.control(loopCtx, opts.Reload, opts.ReloadDebounce) })

	cur := rt.cur.Load()
	log.Info("hookproxy listening",
		zap.String("listen", ln.Addr().String()), zap.String("admin", adminAddr),
		zap.Any("routes", cur.srv.Routes()), zap.Strings("policies", cur.policies),
		zap.String("registration", RegistrationSource(cfg)),
		zap.String("source", cfg.Source), zap.Bool("tracing", tracer != nil),
		zap.String("audit", cfg.Audit.Path))
	cur.warnNoPolicies()
	if opts.Started != nil {
		opts.Started(ln.Addr().String(), adminAddr)
	}

	var runErr error
	select {
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// Graceful shutdown.
	stopLoop()
	loopDone.Wait()
	rt.draining.Store(true) // /readyz answers 503 while requests drain
	timeout := rt.Config().Limits.ShutdownTimeout
	if timeout <= 0 {
		timeout = config.DefaultShutdownTimeout
	}
	log.Info("shutting down: no new connections; waiting for requests in flight", zap.Duration("timeout", timeout))
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// Deadline reached: the remaining connections (long streams) are cut.
		log.Warn("requests still in flight at the shutdown deadline; closing their connections", zap.Error(err))
		_ = hs.Close()
		if runErr == nil {
			runErr = fmt.Errorf("graceful shutdown: %w", err)
		}
	}
	if as != nil {
		actx, acancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
		if err := as.Shutdown(actx); err != nil {
			_ = as.Close()
		}
		acancel()
	}
	fctx, fcancel := context.WithTimeout(context.Background(), opts.FlushTimeout)
	defer fcancel()
	// Flush the audit log and stop the backends.
	if err := rt.Close(fctx); err != nil {
		log.Warn("closing the configuration", zap.Error(err))
	}
	if err := shutdownTracing(fctx); err != nil {
		log.Warn("flushing traces", zap.Error(err))
	}
	if runErr == nil {
		log.Info("stopped")
	}
	return runErr
}

// Serve is `hookproxy serve` once its flags are read: Run until SIGINT or SIGTERM, with
// SIGHUP as a reload request. opts.Reload is replaced by the SIGHUP channel. The process's
// garbage collector target is set here (tuneGC), not in Run, which tests share.
func Serve(opts Options) error {
	tuneGC()
	ctx, stop := StopSignals(context.Background())
	defer stop()
	reload, stopReload := ReloadSignals()
	defer stopReload()
	opts.Reload = reload
	return Run(ctx, opts)
}

// control runs reloads: on every reload request, and when a watched file changed and
// its events have paused for debounce. It returns when ctx ends.
func (rt *Runtime) control(ctx context.Context, reload <-chan struct{}, debounce time.Duration) {
	var (
		events <-chan fsnotify.Event
		errs   <-chan error
		fw     *fileWatcher
	)
	if rt.configPath != "" {
		w, err := newFileWatcher(rt.log)
		if err != nil {
			rt.log.Warn("file watching unavailable; reload with SIGHUP", zap.Error(err))
		} else {
			fw = w
			defer fw.close()
			fw.set(rt.watchPaths())
			events, errs = fw.w.Events, fw.w.Errors
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			_ = rt.Reload("signal")
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if fw.relevant(ev) {
				timer.Reset(debounce)
			}
			continue
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			rt.log.Warn("file watcher", zap.Error(err))
			continue
		case <-timer.C:
			_ = rt.reloadIfChanged("file change")
		}
		if fw != nil {
			// A reload may name another registration file.
			fw.set(rt.watchPaths())
		}
	}
}

// LoadConfig loads the configuration file at path, or the embedded default when path is
// empty.
func LoadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}
