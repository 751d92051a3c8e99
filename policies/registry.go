package policies

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// Policy names, as written in a registration document's in_process transport:
// {"type": "in_process", "policy": "secrets", "config": {...}}.
const (
	PolicySecrets   = "secrets"
	PolicyPII       = "pii"
	PolicyTools     = "tools"
	PolicyModels    = "models"
	PolicyInjection = "injection"
)

var factories = map[string]transport.PolicyFactory{
	PolicySecrets:   factory(PolicySecrets, NewSecrets),
	PolicyPII:       factory(PolicyPII, NewPII),
	PolicyTools:     factory(PolicyTools, NewTools),
	PolicyModels:    factory(PolicyModels, NewModels),
	PolicyInjection: factory(PolicyInjection, NewInjection),
}

// factory adapts a policy's constructor to the registration document's in_process config:
// the config is decoded strictly into C (config.go), and every error names the policy.
func factory[C any, P ahp.Interceptor](name string, build func(C) (P, error)) transport.PolicyFactory {
	return func(raw json.RawMessage) (ahp.Interceptor, error) {
		var cfg C
		if err := decodeConfig(raw, &cfg); err != nil {
			return nil, withPolicy(name, err)
		}
		p, err := build(cfg)
		if err != nil {
			return nil, withPolicy(name, err)
		}
		return p, nil
	}
}

// Factories returns the built-in policy factories by name, for chain.Options.Policies. The
// map is a fresh copy; callers may add their own policies to it.
func Factories() map[string]transport.PolicyFactory {
	out := make(map[string]transport.PolicyFactory, len(factories))
	for k, v := range factories {
		out[k] = v
	}
	return out
}

// Names returns the built-in policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(factories))
	for k := range factories {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// CheckConfig validates a policy configuration exactly as the policy's factory would,
// without keeping the result (used by `hookproxy validate`). A *ConfigError carries the
// JSON path of the problem inside the config object.
func CheckConfig(name string, cfg json.RawMessage) error {
	f, ok := factories[name]
	if !ok {
		return fmt.Errorf("unknown policy %q (built-in policies: %s)", name, strings.Join(Names(), ", "))
	}
	_, err := f(cfg)
	return err
}
