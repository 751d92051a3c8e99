package config

import (
	_ "embed"
	"fmt"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultRegistration is the inline registration document (JSON) that every configuration
// without a registration key carries in RegistrationInline, the embedded default
// included: the built-in tools policy (default destructive-command deny list) at
// tool.before, then the secrets policy (redact) at model.request.before, tool.before and
// tool.after, both fail-closed.
//
//go:embed default-registration.json
var DefaultRegistration []byte

// DefaultYAML returns the text of the embedded default configuration.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns a fresh copy of the embedded default configuration with defaults
// applied: proxy on 127.0.0.1:8080, admin on 127.0.0.1:9090, routes /openai, /anthropic
// and /gemini to the public APIs, and the default registration (it has no registration
// key, so a copy of the file keeps the same policies).
func Default() *Config {
	cfg, err := Parse(defaultYAML, "")
	if err != nil {
		// The embedded file is part of the build, not input; its test keeps this unreachable.
		panic(fmt.Sprintf("config: embedded default.yaml is invalid: %v", err))
	}
	return cfg
}
