package app

import (
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/capture"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/metrics"
	"github.com/hookproxy/hookproxy/policies"
	"github.com/hookproxy/hookproxy/shadow"
)

// LoadShadowRegistration reads and validates the shadow registration document of cfg
// with the same checks as the live one; nil without a shadow.
func LoadShadowRegistration(cfg *config.Config) (*registration.Document, []registration.Problem, error) {
	if cfg.Shadow.Registration == "" {
		return nil, nil, nil
	}
	return registration.Load(cfg.Shadow.Registration, RegistrationOptions())
}

// BuildShadowChain builds the shadow chain of cfg (nil without `shadow:`).
func BuildShadowChain(cfg *config.Config, logger *zap.Logger) (*chain.Chain, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	doc, problems, err := LoadShadowRegistration(cfg)
	for _, p := range problems {
		if p.Warning {
			logger.Warn("shadow registration", zap.String("path", p.Path), zap.String("problem", p.Message))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("shadow.registration: %w", err)
	}
	if doc == nil {
		return nil, nil
	}
	ch, err := chain.New(doc, chain.Options{
		Source:         cfg.Source,
		Policies:       policies.Factories(),
		ObserveTimeout: cfg.Limits.WithDefaults().ObserveTimeout,
		Logger:         logger.Named("shadow"),
	})
	if err != nil {
		return nil, fmt.Errorf("shadow.registration: %w", err)
	}
	return ch, nil
}

// rollout is what one generation runs for the rollout tools: the shadow chain and the
// capture writer, behind the tap on the live chain. Both are rebuilt on every reload,
// with the live registration.
type rollout struct {
	tap    *shadow.Tap
	shadow *chain.Chain
}

// buildRollout builds the shadow chain and the capture writer of cfg; nil parts are off.
// window, when set, is given each shadow settlement (the console's Shadow page).
func buildRollout(cfg *config.Config, seq uint64, aw *audit.Writer, m *metrics.Metrics, window *admin.Window, log *zap.Logger) (*rollout, error) {
	sc, err := BuildShadowChain(cfg, log)
	if err != nil {
		return nil, err
	}
	var cw *capture.Writer
	if cfg.Capture.Enabled() {
		cw, err = capture.NewWriter(capture.Options{
			Dir: cfg.Capture.Dir, Sample: cfg.Capture.Sample, MaxBytes: cfg.Capture.MaxBytes,
			MaxAge: cfg.Capture.MaxAge, Redact: cfg.Capture.Redacting(),
			Name: "-g" + strconv.FormatUint(seq, 10), OnFailure: m.CaptureFailure, Logger: log.Named("capture"),
		})
		if err != nil {
			if sc != nil {
				_ = sc.Close()
			}
			return nil, fmt.Errorf("capture.dir: %w", err)
		}
	}
	var onSettled func(audit.Record, enforcement.Action)
	if window != nil && sc != nil {
		onSettled = func(rec audit.Record, live enforcement.Action) {
			window.Add(ConsoleShadowDecision(rec, live, sc))
		}
	}
	return &rollout{shadow: sc, tap: shadow.New(shadow.Options{
		Chain: sc, Capture: cw, Audit: aw, Metrics: m, OnSettled: onSettled, Logger: log.Named("shadow"),
	})}, nil
}

// close drains the tap (queued shadow work, the capture queue) and stops the shadow
// chain's backends.
func (r *rollout) close(log *zap.Logger) {
	if r == nil {
		return
	}
	r.tap.Close()
	if r.shadow != nil {
		if err := r.shadow.Close(); err != nil {
			log.Warn("closing the shadow chain", zap.Error(err))
		}
	}
}
