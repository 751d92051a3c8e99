package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AdminAuth says who may use the admin listener's protected endpoints (approvals, and
// every other endpoint that changes state). The admin key takes either an address
// ("admin: 127.0.0.1:9090", the original form) or a mapping:
//
//	admin:
//	  listen: 127.0.0.1:9090
//	  token: ...            # or tokenRef: env:NAME | file:/PATH; named "admin"
//	  tokens:               # further named tokens; the name is recorded as the decider
//	    - {name: alice, tokenRef: file:/run/secrets/alice}
//
// With no token at all, the protected endpoints serve loopback clients only.
type AdminAuth struct {
	Listen   string       `yaml:"listen" json:"listen"`
	Token    string       `yaml:"token" json:"-"`
	TokenRef string       `yaml:"tokenRef" json:"tokenRef,omitempty"`
	Tokens   []AdminToken `yaml:"tokens" json:"tokens,omitempty"`
}

// AdminToken is one named bearer token of the admin listener.
type AdminToken struct {
	Name     string `yaml:"name" json:"name"`
	Token    string `yaml:"token" json:"-"`
	TokenRef string `yaml:"tokenRef" json:"tokenRef,omitempty"`
}

// DefaultAdminTokenName names the single admin.token / admin.tokenRef.
const DefaultAdminTokenName = "admin"

// NamedTokens lists every configured token, the single admin.token(Ref) first under
// DefaultAdminTokenName. Empty means loopback-only.
func (a AdminAuth) NamedTokens() []AdminToken {
	var out []AdminToken
	if a.Token != "" || a.TokenRef != "" {
		out = append(out, AdminToken{Name: DefaultAdminTokenName, Token: a.Token, TokenRef: a.TokenRef})
	}
	return append(out, a.Tokens...)
}

// Secret returns the token's value: the literal, or what its reference names now (a
// file is re-read each time, so a rotated secret needs no restart).
func (t AdminToken) Secret() (string, error) {
	if t.Token != "" {
		return t.Token, nil
	}
	return ResolveSecretRef(t.TokenRef)
}

var reflectTypeOfAdminAuth = reflect.TypeOf(AdminAuth{})

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ResolveSecretRef reads a secret reference: env:NAME (a variable of this process) or
// file:/ABSOLUTE/PATH (surrounding whitespace trimmed, as a mounted secret usually ends
// in a newline). An empty secret is an error: an empty token must never match.
func ResolveSecretRef(ref string) (string, error) {
	scheme, target, ok := strings.Cut(ref, ":")
	var v string
	switch {
	case !ok:
		return "", fmt.Errorf("%q is not a secret reference (use env:NAME or file:/absolute/path)", ref)
	case scheme == "env":
		if !envVarName.MatchString(target) {
			return "", fmt.Errorf("env:%s: not an environment variable name", target)
		}
		v = os.Getenv(target)
		if v == "" {
			return "", fmt.Errorf("env:%s is not set or empty", target)
		}
	case scheme == "file":
		if !filepath.IsAbs(target) {
			return "", fmt.Errorf("file:%s: the path must be absolute", target)
		}
		b, err := os.ReadFile(target)
		if err != nil {
			return "", fmt.Errorf("file:%s: %v", target, errors.Unwrap(err))
		}
		v = strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("file:%s is empty", target)
		}
	default:
		return "", fmt.Errorf("secret reference scheme %q is not supported (use env:NAME or file:/absolute/path)", scheme)
	}
	return v, nil
}

// splitAdmin takes a mapping-form admin key out of the document before it is decoded:
// its listen goes to Config.Admin (the address every other part reads), the rest to
// Config.AdminAuth. The scalar form is left for the decoder.
func (l *loader) splitAdmin(root *yaml.Node, cfg *Config) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "admin" || v.Kind != yaml.MappingNode {
			continue
		}
		l.checkKeys(v, reflectTypeOfAdminAuth, "admin")
		if err := v.Decode(&cfg.AdminAuth); err != nil {
			l.decodeError(err)
		}
		// Replace the mapping by its address so the decoder fills Config.Admin as before.
		root.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: cfg.AdminAuth.Listen, Line: v.Line, Column: v.Column}
	}
}

// validateAdminAuth checks the tokens: each has exactly one of token and tokenRef, a
// unique name, and a reference that resolves now (a token that cannot be read would
// lock every caller out, or worse be mistaken for "no token": refuse at load).
func validateAdminAuth(c *Config, add func(path, format string, args ...any)) {
	a := c.AdminAuth
	if (a.Token != "" || a.TokenRef != "" || len(a.Tokens) > 0) && c.Admin == "" {
		add("admin", "tokens are configured but no admin address (admin.listen)")
	}
	if a.Token != "" && a.TokenRef != "" {
		add("admin", "give token or tokenRef, not both")
	}
	names := map[string]string{}
	check := func(path string, t AdminToken) {
		if t.Name == "" {
			add(path+".name", "is required")
		} else if prev, dup := names[t.Name]; dup {
			add(path+".name", "%q is also %s", t.Name, prev)
		} else {
			names[t.Name] = path
		}
		switch {
		case t.Token != "" && t.TokenRef != "":
			add(path, "give token or tokenRef, not both")
		case t.Token == "" && t.TokenRef == "":
			add(path, "token or tokenRef is required")
		case t.TokenRef != "":
			if _, err := ResolveSecretRef(t.TokenRef); err != nil {
				add(path+".tokenRef", "%v", err)
			}
		}
	}
	if a.Token != "" || a.TokenRef != "" {
		if a.TokenRef != "" {
			if _, err := ResolveSecretRef(a.TokenRef); err != nil {
				add("admin.tokenRef", "%v", err)
			}
		}
		names[DefaultAdminTokenName] = "admin.token"
	}
	for i, t := range a.Tokens {
		check(fmt.Sprintf("admin.tokens[%d]", i), t)
	}
}
