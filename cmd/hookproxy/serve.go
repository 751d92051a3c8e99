package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/wiring"
)

// envConfig names the configuration file when --config is not given (DESIGN §3).
const envConfig = "HOOKPROXY_CONFIG"

// runServe is `hookproxy serve`: load the configuration and its registration document,
// build the chain and the proxy, serve until SIGINT/SIGTERM, then shut down gracefully.
// SIGHUP (and a change of the configuration or registration file) reloads.
func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (default: $"+envConfig+", else the embedded default)")
	logFormat := fs.String("log-format", "", "log format: json | console (default: the configuration's log.format, else json)")
	logLevel := fs.String("log-level", "", "log level: debug | info | warn | error (default: the configuration's log.level, else info)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hookproxy serve: unexpected arguments %q\n", fs.Args())
		return 2
	}

	path := *configPath
	if path == "" {
		path = os.Getenv(envConfig)
	}
	cfg, err := loadServeConfig(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hookproxy serve: %v\n", err)
		return 1
	}
	format, level := cfg.Log.Format, cfg.Log.Level
	if *logFormat != "" {
		format = *logFormat
	}
	if *logLevel != "" {
		level = *logLevel
	}
	logger, atom, err := newServeLogger(format, level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hookproxy serve: %v\n", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()

	opts := wiring.Options{Config: cfg, ConfigPath: path, Logger: logger}
	if *logLevel == "" {
		opts.Level = &atom // the flag, when given, wins over every reloaded configuration
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process the default way
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() {
		signal.Stop(hup)
		close(hup) // ends the forwarder below; Stop guarantees no further sends
	}()
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default: // a reload is already pending
			}
		}
	}()
	opts.Reload = reload

	if err := wiring.Run(ctx, opts); err != nil {
		logger.Error("hookproxy stopped", zap.Error(err))
		return 1
	}
	return 0
}

// loadServeConfig loads the configuration file at path, or the embedded default when
// path is empty.
func loadServeConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

// buildChain loads the registration document (a file, or the default configuration's
// inline document) and builds the chain. Without one nothing is intercepted (DESIGN §3).
func buildChain(cfg *config.Config, source string, logger *zap.Logger) (*chain.Chain, error) {
	ch, err := wiring.BuildChain(cfg, source, logger)
	if ch == nil && err == nil && logger != nil {
		logger.Info("no registration document: plain proxy, nothing is intercepted")
	}
	return ch, err
}

// newServeLogger builds the zap logger of the serve command: JSON lines (default) or the
// human console format, on stderr, with a level that a reload can change.
func newServeLogger(format, level string) (*zap.Logger, zap.AtomicLevel, error) {
	lvl := zapcore.InfoLevel
	if level != "" {
		if err := lvl.UnmarshalText([]byte(level)); err != nil {
			return nil, zap.AtomicLevel{}, fmt.Errorf("log level %q: want debug | info | warn | error", level)
		}
	}
	var zc zap.Config
	switch format {
	case "", "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
	default:
		return nil, zap.AtomicLevel{}, fmt.Errorf("log format %q: want json | console", format)
	}
	atom := zap.NewAtomicLevelAt(lvl)
	zc.Level = atom
	zc.Sampling = nil // every decision-relevant line counts; the proxy logs little
	zc.OutputPaths, zc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	logger, err := zc.Build()
	return logger, atom, err
}
