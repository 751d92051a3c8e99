package app

import (
	"encoding/json"
	"errors"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/policies"
)

// RegistrationPath is the registration document file of cfg ("" when it has none or the
// document is inline).
func RegistrationPath(cfg *config.Config) string {
	path := cfg.Registration
	if path != "" && !filepath.IsAbs(path) && cfg.Path != "" {
		path = filepath.Join(filepath.Dir(cfg.Path), path)
	}
	return path
}

// BuildChain loads the registration document of cfg (its file, or the embedded default's
// inline document) and builds the chain. Without one it returns nil: nothing is
// intercepted (DESIGN §3). An invalid document is an error listing every problem;
// warnings are logged.
func BuildChain(cfg *config.Config, source string, logger *zap.Logger) (*chain.Chain, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	var (
		doc      *registration.Document
		problems []registration.Problem
		err      error
	)
	switch {
	case cfg.Registration != "":
		doc, problems, err = registration.Load(RegistrationPath(cfg), RegistrationOptions())
	case len(cfg.RegistrationInline) > 0:
		doc, problems, err = registration.Parse(cfg.RegistrationInline, RegistrationOptions())
	default:
		return nil, nil
	}
	for _, p := range problems {
		if p.Warning {
			logger.Warn("registration", zap.String("path", p.Path), zap.String("problem", p.Message))
		}
	}
	if err != nil {
		return nil, err
	}
	if source == "" {
		source = cfg.Source
	}
	return chain.New(doc, chain.Options{
		Source:         source,
		Policies:       policies.Factories(),
		ObserveTimeout: cfg.Limits.ObserveTimeout,
		Logger:         logger,
	})
}

// RegistrationOptions names the built-in policies an in_process transport may use and
// checks their configs exactly as the policies would, placing a policy's problem at its
// JSON path inside the document (the same checks as `hookproxy validate`).
func RegistrationOptions() registration.Options {
	names := map[string]bool{}
	for _, n := range policies.Names() {
		names[n] = true
	}
	return registration.Options{
		Policies: names,
		CheckPolicyConfig: func(name string, cfg json.RawMessage) error {
			err := policies.CheckConfig(name, cfg)
			var ce *policies.ConfigError
			if errors.As(err, &ce) {
				return &registration.PolicyConfigError{Path: ce.Path, Reason: ce.Reason}
			}
			return err
		},
	}
}
