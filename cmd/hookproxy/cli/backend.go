package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/config"
)

// defaultBackendListen is where `hookproxy backend` serves HTTP unless told otherwise.
const defaultBackendListen = "127.0.0.1:8787"

// runBackend is `hookproxy backend [--config FILE] [--listen ADDR | --stdio]`: serve the
// in_process entries of a registration as one standalone AHP backend, until SIGINT/SIGTERM
// (HTTP) or end of input (stdio).
func runBackend(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := app.StopSignals(context.Background())
	defer stop()
	return runBackendContext(ctx, args, stdin, stdout, stderr, nil)
}

// runBackendContext is runBackend with the stop signal as ctx. ready, when set, receives
// the HTTP listener's address once it accepts connections (tests).
func runBackendContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, ready func(addr string)) int {
	flags := flag.NewFlagSet("backend", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "configuration file or registration document (default: $"+config.EnvConfig+", else the embedded default's secrets and tools)")
	listen := flags.String("listen", defaultBackendListen, "HTTP address to serve POST http://ADDR/ on")
	stdio := flags.Bool("stdio", false, "serve over stdin/stdout (one JSON-RPC message per line) instead of HTTP")
	tokenEnv := flags.String("token-env", "", "HTTP only: require \"Authorization: Bearer $VAR\", the token read from this environment variable")
	logLevel := flags.String("log-level", "info", "log level: debug | info | warn | error (logs go to stderr)")
	logFormat := flags.String("log-format", "json", "log format: json | console")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "hookproxy backend: unexpected arguments %q\n", flags.Args())
		return 2
	}
	listenSet := false
	flags.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
	if *stdio && (listenSet || *tokenEnv != "") {
		fmt.Fprintln(stderr, "hookproxy backend: --stdio excludes --listen and --token-env (a stdio backend is trusted as a process)")
		return 2
	}
	var opts []backend.Option
	if *tokenEnv != "" {
		token := strings.TrimSpace(os.Getenv(*tokenEnv))
		if token == "" {
			fmt.Fprintf(stderr, "hookproxy backend: --token-env %s: the variable is unset or empty\n", *tokenEnv)
			return 2
		}
		opts = append(opts, backend.WithBearerToken(token))
	}
	logger, err := app.NewWriterLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy backend: %v\n", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()

	srv, from, err := app.NewBackend(config.PathFromEnv(*configPath), logger, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy backend: %v\n", err)
		return 1
	}
	defer func() { _ = srv.Close() }()

	if *stdio {
		err = app.ServeBackendStdio(ctx, srv, from, stdin, stdout, logger)
	} else {
		err = app.ServeBackendHTTP(ctx, srv, *listen, from, logger, ready)
	}
	if err != nil {
		logger.Error("hookproxy backend stopped", zap.Error(err))
		return 1
	}
	return 0
}
