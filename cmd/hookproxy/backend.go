package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/policies"
)

// defaultBackendListen is where `hookproxy backend` serves HTTP unless told otherwise.
const defaultBackendListen = "127.0.0.1:8787"

// runBackend is `hookproxy backend [--config FILE] [--listen ADDR | --stdio]`: serve the
// in_process entries of a registration as one standalone AHP backend, until SIGINT/SIGTERM
// (HTTP) or end of input (stdio).
func runBackend(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	logger, err := newWriterLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy backend: %v\n", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()

	doc, from, err := loadBackendRegistration(config.PathFromEnv(*configPath), logger)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy backend: %v\n", err)
		return 1
	}
	srv, err := backend.New(doc, policies.Factories(), logger, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy backend: %v\n", err)
		return 1
	}
	defer func() { _ = srv.Close() }()

	if *stdio {
		logger.Info("hookproxy backend serving on stdio", zap.String("registration", from), zap.Strings("events", srv.Events()))
		// stdout carries protocol messages only (AHP-STDIO-001); everything else is on stderr.
		err := srv.ServeStdio(ctx, stdin, stdout)
		if err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("hookproxy backend stopped", zap.Error(err))
			return 1
		}
		return 0
	}
	if err := serveBackendHTTP(ctx, srv, *listen, from, logger, ready); err != nil {
		logger.Error("hookproxy backend stopped", zap.Error(err))
		return 1
	}
	return 0
}

func serveBackendHTTP(ctx context.Context, srv *backend.Server, listen, from string, logger *zap.Logger, ready func(string)) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A harness's deadline for one interception is short; a slow body is not one.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    zap.NewStdLog(logger.Named("http")),
	}
	logger.Info("hookproxy backend listening",
		zap.String("url", "http://"+ln.Addr().String()+"/"),
		zap.String("registration", from),
		zap.Strings("events", srv.Events()),
		zap.Bool("bearerToken", srv.RequiresToken()))
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loadBackendRegistration reads the registration the backend serves. path may name a
// registration document (a JSON object with "protocolVersion" or "hooks") or a hookproxy
// configuration file whose `registration` key names one; "" means the embedded default
// registration (secrets and tools). It returns the document and where it came from.
func loadBackendRegistration(path string, logger *zap.Logger) (*registration.Document, string, error) {
	opts := registrationOptions()
	report := func(from string, problems []registration.Problem) {
		for _, p := range problems {
			if p.Warning {
				logger.Warn("registration", zap.String("file", from), zap.String("path", p.Path), zap.String("problem", p.Message))
			}
		}
	}
	if path == "" {
		doc, problems, err := registration.Parse(config.DefaultRegistration, opts)
		report("embedded default", problems)
		return doc, "embedded default", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	if isRegistrationDocument(data) {
		doc, problems, err := registration.Parse(data, opts)
		var rerr *registration.Error
		if errors.As(err, &rerr) {
			rerr.File = path
		}
		report(path, problems)
		return doc, path, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, "", err
	}
	if cfg.Registration == "" {
		return nil, "", fmt.Errorf("%s: the configuration names no registration document (key \"registration\")", path)
	}
	doc, problems, err := registration.Load(cfg.Registration, opts)
	report(cfg.Registration, problems)
	return doc, cfg.Registration, err
}

// isRegistrationDocument tells a registration document from a configuration file: the
// former is a JSON object with protocolVersion or hooks, which no configuration has.
func isRegistrationDocument(data []byte) bool {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(trimmed, &top) != nil {
		// Not valid JSON, but shaped like it: let the registration parser say where.
		return strings.Contains(string(trimmed), `"hooks"`) || strings.Contains(string(trimmed), `"protocolVersion"`)
	}
	_, hooks := top["hooks"]
	_, version := top["protocolVersion"]
	return hooks || version
}

// newWriterLogger builds a zap logger that writes to w (stderr in every command that uses
// it): over stdio, stdout belongs to the protocol, and the demo's stdout to its
// instructions.
func newWriterLogger(w io.Writer, format, level string) (*zap.Logger, error) {
	lvl := zapcore.InfoLevel
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug | info | warn | error", level)
	}
	var enc zapcore.Encoder
	switch format {
	case "", "json":
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout(time.TimeOnly)
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("log format %q: want json | console", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}
