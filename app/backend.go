package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/policies"
)

// NewBackend builds `hookproxy backend`: the in_process entries of the registration at
// path served as one standalone AHP backend. path may name a registration document or a
// configuration file naming one; "" is the embedded default's (secrets and tools). It
// returns the server and where its registration came from.
func NewBackend(path string, logger *zap.Logger, opts ...backend.Option) (*backend.Server, string, error) {
	doc, from, err := loadBackendRegistration(path, logger)
	if err != nil {
		return nil, "", err
	}
	srv, err := backend.New(doc, policies.Factories(), logger, opts...)
	if err != nil {
		return nil, "", err
	}
	return srv, from, nil
}

// ServeBackendStdio serves srv on stdin/stdout until end of input or ctx ends.
func ServeBackendStdio(ctx context.Context, srv *backend.Server, from string, stdin io.Reader, stdout io.Writer, logger *zap.Logger) error {
	tuneGC()
	logger.Info("hookproxy backend serving on stdio", zap.String("registration", from), zap.Strings("events", srv.Events()))
	// stdout carries protocol messages only (AHP-STDIO-001); everything else is on stderr.
	err := srv.ServeStdio(ctx, stdin, stdout)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// ServeBackendHTTP serves srv on listen until ctx ends, then shuts down gracefully.
// ready, when set, receives the listener's address once it accepts connections.
func ServeBackendHTTP(ctx context.Context, srv *backend.Server, listen, from string, logger *zap.Logger, ready func(string)) error {
	tuneGC()
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

// loadBackendRegistration reads the registration the backend serves (see NewBackend).
func loadBackendRegistration(path string, logger *zap.Logger) (*registration.Document, string, error) {
	opts := RegistrationOptions()
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
		if len(cfg.RegistrationInline) == 0 {
			return nil, "", fmt.Errorf("%s: registration: none: the configuration runs no policies, so there is none to serve", path)
		}
		// No registration key: the built-in default chain, as serve would run it.
		doc, problems, err := registration.Parse(cfg.RegistrationInline, opts)
		report("embedded default", problems)
		return doc, "embedded default", err
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
