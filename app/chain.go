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

// BuildChain loads the registration document of cfg (its file, or the inline default
// document of a configuration without a registration key) and builds the chain. With
// `registration: none` it returns nil: nothing is intercepted. An invalid
// document is an error listing every problem; warnings are logged.
func BuildChain(cfg *config.Config, source string, logger *zap.Logger) (*chain.Chain, error) {
	ch, _, err := buildChain(cfg, source, logger)
	return ch, err
}

// buildChain is BuildChain that also returns the registration document in force (nil
// for a plain proxy), from which PolicyNames and the console's chain view are taken.
func buildChain(cfg *config.Config, source string, logger *zap.Logger) (*chain.Chain, *registration.Document, error) {
	return buildChainTap(cfg, source, logger, nil)
}

// buildChainTap is buildChain with the rollout tap (shadow and capture) on the chain.
func buildChainTap(cfg *config.Config, source string, logger *zap.Logger, tap func(*chain.Tapped)) (*chain.Chain, *registration.Document, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	doc, problems, err := LoadRegistration(cfg)
	for _, p := range problems {
		if p.Warning {
			logger.Warn("registration", zap.String("path", p.Path), zap.String("problem", p.Message))
		}
	}
	if err != nil || doc == nil {
		return nil, nil, err
	}
	if source == "" {
		source = cfg.Source
	}
	ch, err := chain.New(doc, chain.Options{
		Source:         source,
		Policies:       policies.Factories(),
		ObserveTimeout: cfg.Limits.WithDefaults().ObserveTimeout,
		Logger:         logger,
		Tap:            tap,
	})
	if err != nil {
		return nil, nil, err
	}
	return ch, doc, nil
}

// LoadRegistration reads and validates the registration document of cfg: its file, or
// the inline default. It returns a nil document for a plain proxy (`registration: none`).
func LoadRegistration(cfg *config.Config) (*registration.Document, []registration.Problem, error) {
	switch {
	case cfg.Registration != "":
		return registration.Load(RegistrationPath(cfg), RegistrationOptions())
	case len(cfg.RegistrationInline) > 0:
		return registration.Parse(cfg.RegistrationInline, RegistrationOptions())
	}
	return nil, nil, nil
}

// RegistrationSource names where cfg's registration comes from, for people: the file, the
// built-in default, or none.
func RegistrationSource(cfg *config.Config) string {
	switch {
	case cfg.Registration != "":
		return RegistrationPath(cfg)
	case len(cfg.RegistrationInline) > 0:
		return "the built-in default (no registration key)"
	}
	return "none"
}

// PolicyNames names the hooks of doc in chain order, as an operator knows them: a built-in
// policy by its name (secrets, tools, ...), any other backend by its id and transport,
// e.g. "org.example.guard (http)".
func PolicyNames(doc *registration.Document) []string {
	if doc == nil {
		return nil
	}
	out := make([]string, 0, len(doc.Hooks))
	for _, h := range doc.Hooks {
		if h.Transport.Type == registration.TransportInProcess && h.Transport.Policy != "" {
			out = append(out, h.Transport.Policy)
			continue
		}
		out = append(out, h.ID+" ("+h.Transport.Type+")")
	}
	return out
}

// NoPoliciesWarning is what validate and serve say when a configuration runs no policy
// (`registration: none`, or a document with no hooks).
const NoPoliciesWarning = "NO POLICIES IN FORCE: requests and responses pass unexamined " +
	"(`registration: none` makes a plain proxy; without the key the built-in tools and secrets policies apply)"

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
