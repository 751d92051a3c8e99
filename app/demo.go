package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/fakemodel"
	"github.com/hookproxy/hookproxy/proxy"
)

// demoShutdownTimeout bounds the demo's drain at Ctrl-C: its requests are a few curls.
const demoShutdownTimeout = 5 * time.Second

// DemoOptions configure Demo.
type DemoOptions struct {
	Listen string // the demo proxy's address
	// AnyPortIfTaken takes a free port on Listen's host when Listen's port is in use (the
	// default address was not chosen by the user, so any port will do).
	AnyPortIfTaken bool
	Logger         *zap.Logger   // the proxy's own log
	Decisions      proxy.Auditor // told of every settled boundary (the demo prints each)
	// Started is called once the proxy serves, with both base URLs.
	Started func(proxyURL, modelURL string)
	// Stopping is called when ctx ends, before the drain.
	Stopping func()
}

// DemoListen is the demo proxy's default address: not serve's 8080, so that following
// the README's first screen (serve, then demo) never clashes.
const DemoListen = "127.0.0.1:8088"

// Demo runs `hookproxy demo` until ctx ends: an imitation of the OpenAI, Anthropic and Gemini APIs
// on a loopback port of its own, and in front of it the server Run builds from the
// embedded default configuration — the same policies `hookproxy serve` puts in front of
// the public APIs — with its routes pointed at the imitation, no admin listener and no
// audit log. The demo never leaves the machine.
func Demo(ctx context.Context, o DemoOptions) error {
	fm := fakemodel.New()
	fln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("model imitation: %w", err)
	}
	fsrv := &http.Server{Handler: fm.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fsrv.Serve(fln) }()
	defer func() { _ = fsrv.Close() }()
	modelURL := "http://" + fln.Addr().String()

	cfg := config.Default()
	cfg.Listen, cfg.Admin, cfg.Source = o.Listen, "", "urn:hookproxy:demo"
	cfg.Audit = config.Audit{}
	cfg.Limits.ShutdownTimeout = demoShutdownTimeout
	cfg.Routes = []config.Route{
		{Prefix: "/openai", API: config.APIOpenAI, Upstream: modelURL},
		{Prefix: "/anthropic", API: config.APIAnthropic, Upstream: modelURL},
		{Prefix: "/gemini", API: config.APIGemini, Upstream: modelURL},
	}
	if cfg.Registration == "" && len(cfg.RegistrationInline) == 0 {
		return errors.New("the embedded default configuration has no registration")
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil && o.AnyPortIfTaken && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(o.Listen)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return &ListenError{Flag: "--listen", Addr: o.Listen, Err: err}
	}
	// Run stops at ctx's end; Stopping is told first.
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			if o.Stopping != nil {
				o.Stopping()
			}
			stop()
		case <-runCtx.Done():
		}
	}()
	return Run(runCtx, Options{
		Config: cfg, Logger: o.Logger, Listener: ln, Decisions: o.Decisions,
		Started: func(proxyAddr, _ string) {
			if o.Started != nil {
				o.Started("http://"+proxyAddr, modelURL)
			}
		},
	})
}

// ServeFakeModel runs `hookproxy fake-model` until ctx ends: only the imitation that Demo
// embeds, on listen. started, when set, receives the address once it serves.
func ServeFakeModel(ctx context.Context, listen string, started func(addr string)) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	hs := &http.Server{Handler: fakemodel.New().Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	if started != nil {
		started(ln.Addr().String())
	}
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return nil
}
