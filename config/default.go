package config

import (
	_ "embed"
	"fmt"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultRegistration is the inline registration document (JSON) that the embedded default
// configuration carries in RegistrationInline. nil means none: the default is then a plain
// proxy. It is the seam through which the built-in policies (secrets, tools) are put in
// front by default; whoever wires them sets it before Default is called.
var DefaultRegistration []byte

// DefaultYAML returns the text of the embedded default configuration.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns a fresh copy of the embedded default configuration with defaults
// applied: proxy on 127.0.0.1:8080, admin on 127.0.0.1:9090, routes /openai and
// /anthropic to the public APIs.
func Default() *Config {
	cfg, err := Parse(defaultYAML, "")
	if err != nil {
		// The embedded file is part of the build, not input; its test keeps this unreachable.
		panic(fmt.Sprintf("config: embedded default.yaml is invalid: %v", err))
	}
	if DefaultRegistration != nil {
		cfg.RegistrationInline = append([]byte(nil), DefaultRegistration...)
	}
	return cfg
}
