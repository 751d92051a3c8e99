package cli

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/config"
)

// envConfig names the configuration file when --config is not given.
const envConfig = "HOOKPROXY_CONFIG"

// runServe is `hookproxy serve`: load the configuration and its registration document,
// build the chain and the proxy, serve until SIGINT/SIGTERM, then shut down gracefully.
// SIGHUP (and a change of the configuration or registration file) reloads.
func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (default: $"+envConfig+", else the embedded default)")
	listen := fs.String("listen", "", "proxy address host:port (default: the configuration's listen, else "+config.DefaultListen+")")
	adminAddr := fs.String("admin", "", "admin address host:port for health, readiness and metrics (default: the configuration's admin)")
	logFormat := fs.String("log-format", "", "log format: auto | json | console (default: the configuration's log.format, else auto: console on a terminal, JSON otherwise)")
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

	for _, f := range []struct{ name, value string }{{"--listen", *listen}, {"--admin", *adminAddr}} {
		if _, _, err := net.SplitHostPort(f.value); f.value != "" && err != nil {
			fmt.Fprintf(os.Stderr, "hookproxy serve: %s %q: want host:port, e.g. 127.0.0.1:8081\n", f.name, f.value)
			return 2
		}
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
	// --listen and --admin win over the file, at start and after every reload.
	var override func(*config.Config)
	if *listen != "" || *adminAddr != "" {
		l, a := *listen, *adminAddr
		override = func(c *config.Config) {
			if l != "" {
				c.Listen = l
			}
			if a != "" {
				c.Admin = a
			}
		}
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

	opts := app.Options{Config: cfg, ConfigPath: path, Logger: logger, Override: override}
	if *logLevel == "" {
		opts.Level = &atom // the flag, when given, wins over every reloaded configuration
	}
	if err := app.Serve(opts); err != nil {
		// A listener that cannot open is the commonest first-run failure: one plain line
		// on stderr, whatever the log format, and no log record.
		var le *app.ListenError
		if errors.As(err, &le) {
			_ = logger.Sync()
			fmt.Fprintf(os.Stderr, "hookproxy serve: %v\n", err)
			return 1
		}
		logger.Error("hookproxy stopped", zap.Error(err))
		return 1
	}
	return 0
}
