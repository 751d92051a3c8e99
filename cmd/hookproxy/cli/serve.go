package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/internal/app"
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
	cfg, err := app.LoadConfig(path)
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
	logger, atom, err := app.NewServeLogger(format, level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hookproxy serve: %v\n", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()

	opts := app.Options{Config: cfg, ConfigPath: path, Logger: logger}
	if *logLevel == "" {
		opts.Level = &atom // the flag, when given, wins over every reloaded configuration
	}
	if err := app.Serve(opts); err != nil {
		logger.Error("hookproxy stopped", zap.Error(err))
		return 1
	}
	return 0
}
