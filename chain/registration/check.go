package registration

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsonpath"
)

var (
	// envName is the portable form of tokenEnv.
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// wildcard is "*" or a whole-family selector such as "model.*" (no matcher language).
	wildcard = regexp.MustCompile(`^(?:\*|[a-z][a-z0-9]*\.\*)$`)
)

// Selections of the content policy (AHP-CONTENT-002).
var selections = map[string]bool{ahp.SelectionBody: true, ahp.SelectionMetadata: true, ahp.SelectionOmit: true}

type checker struct {
	opts     Options
	problems []Problem
}

func (c *checker) errf(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) warnf(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
}

func (c *checker) errors() []Problem {
	var out []Problem
	for _, p := range c.problems {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// object asserts that v is a JSON object.
func (c *checker) object(path string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		c.errf(path, "must be an object, not %s", jsonpath.TypeName(v))
	}
	return m, ok
}

// str reads an optional string member; present reports whether it exists (even if invalid).
func (c *checker) str(obj map[string]any, path, key string, required, nonEmpty bool) (s string, ok bool) {
	v, present := obj[key]
	if !present {
		if required {
			c.errf(path, "%q is required", key)
		}
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		c.errf(jsonpath.Member(path, key), "must be a string, not %s", jsonpath.TypeName(v))
		return "", false
	}
	if nonEmpty && s == "" {
		c.errf(jsonpath.Member(path, key), "must not be empty")
		return "", false
	}
	return s, true
}

// integerMember reads an integer member with a lower bound.
func (c *checker) integerMember(obj map[string]any, path, key string, required bool, min, max int64) (int64, bool) {
	v, present := obj[key]
	if !present {
		if required {
			c.errf(path, "%q is required", key)
		}
		return 0, false
	}
	n, isNum := v.(json.Number)
	if !isNum {
		c.errf(jsonpath.Member(path, key), "must be an integer, not %s", jsonpath.TypeName(v))
		return 0, false
	}
	i, isInt := jsonpath.Int64(n)
	if !isInt {
		c.errf(jsonpath.Member(path, key), "must be an integer, not %s", n)
		return 0, false
	}
	if i < min {
		c.errf(jsonpath.Member(path, key), "must be at least %d, not %d", min, i)
		return 0, false
	}
	if i > max {
		c.errf(jsonpath.Member(path, key), "must be at most %d, not %d", max, i)
		return 0, false
	}
	return i, true
}

func (c *checker) boolMember(obj map[string]any, path, key string) (b, present bool) {
	v, ok := obj[key]
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		c.errf(jsonpath.Member(path, key), "must be a boolean, not %s", jsonpath.TypeName(v))
		return false, false
	}
	return b, true
}

// unknownMembers warns about members the protocol does not define. They are ignored, never
// activate semantics (AHP-CORE-003), but an operator usually wants to know about a typo.
func (c *checker) unknownMembers(obj map[string]any, path string, known ...string) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		isKnown := false
		for _, kk := range known {
			if k == kk {
				isKnown = true
				break
			}
		}
		if !isKnown {
			c.warnf(jsonpath.Member(path, k), "unknown member is ignored")
		}
	}
}

// document checks the registration root (AHP-REG-001).
func (c *checker) document(v any) {
	root, ok := c.object("$", v)
	if !ok {
		return
	}
	if pv, ok := c.str(root, "$", "protocolVersion", true, false); ok && pv != ahp.ProtocolVersion {
		// AHP-VER-001: exact string match, no ordering between snapshots.
		c.errf("protocolVersion", "must be %q, not %q", ahp.ProtocolVersion, pv)
	}
	c.unknownMembers(root, "$", "protocolVersion", "hooks", "$schema")
	hv, present := root["hooks"]
	if !present {
		c.errf("$", "%q is required", "hooks")
		return
	}
	hooks, isArr := hv.([]any)
	if !isArr {
		c.errf("hooks", "must be an array, not %s", jsonpath.TypeName(hv))
		return
	}
	if len(hooks) == 0 {
		c.errf("hooks", "must hold at least one backend (an empty registration intercepts nothing; omit the registration instead)")
		return
	}
	seen := map[string]int{}
	for i, b := range hooks {
		path := jsonpath.Index("hooks", i)
		id := c.backend(path, b)
		if id == "" {
			continue
		}
		if first, dup := seen[id]; dup {
			c.errf(jsonpath.Member(path, "id"), "duplicate backend id %q (also hooks[%d].id)", id, first)
		} else {
			seen[id] = i
		}
	}
}

// backend checks one entry of hooks and returns its id when valid.
func (c *checker) backend(path string, v any) string {
	b, ok := c.object(path, v)
	if !ok {
		return ""
	}
	id, idOK := c.str(b, path, "id", true, false)
	if idOK && !ahp.IsReverseDNS(id) {
		c.errf(jsonpath.Member(path, "id"), "%q is not a reverse-DNS name such as com.example.policy", id)
		idOK = false
	}
	if _, bad := b["contentReceiver"]; bad {
		c.errf(jsonpath.Member(path, "contentReceiver"), "is not allowed (removed alias; configure subscriptions[].upload instead)")
	}
	c.unknownMembers(b, path, "id", "transport", "authentication", "subscriptions", "contentReceiver")

	ttype := c.transport(jsonpath.Member(path, "transport"), b)

	if av, present := b["authentication"]; present {
		apath := jsonpath.Member(path, "authentication")
		if ttype != "" && ttype != TransportHTTP {
			// AHP-AUTH-001: stdio trust is process trust; in_process runs inside hookproxy.
			c.errf(apath, "is only allowed with an http transport, not %s", ttype)
		}
		c.authentication(apath, av, true)
	}

	sv, present := b["subscriptions"]
	if !present {
		c.errf(path, "%q is required", "subscriptions")
	} else if subs, isArr := sv.([]any); !isArr {
		c.errf(jsonpath.Member(path, "subscriptions"), "must be an array, not %s", jsonpath.TypeName(sv))
	} else if len(subs) == 0 {
		c.errf(jsonpath.Member(path, "subscriptions"), "must hold at least one subscription")
	} else {
		for i, s := range subs {
			c.subscription(jsonpath.Index(jsonpath.Member(path, "subscriptions"), i), s)
		}
	}
	if !idOK {
		return ""
	}
	return id
}

// transport checks the transport member of backend b and returns its valid type.
func (c *checker) transport(path string, b map[string]any) string {
	v, present := b["transport"]
	if !present {
		c.errf(parentPath(path), "%q is required", "transport")
		return ""
	}
	if _, isArr := v.([]any); isArr {
		c.errf(path, "must be exactly one transport object, not an array")
		return ""
	}
	t, ok := c.object(path, v)
	if !ok {
		return ""
	}
	typ, ok := c.str(t, path, "type", true, false)
	if !ok {
		return ""
	}
	// Members of the other transports make the entry ambiguous: exactly one transport.
	foreign := func(kinds string, keys ...string) {
		for _, k := range keys {
			if _, has := t[k]; has {
				c.errf(jsonpath.Member(path, k), "belongs to %s transports, not %s (exactly one transport per backend)", kinds, typ)
			}
		}
	}
	switch typ {
	case TransportHTTP:
		if u, ok := c.str(t, path, "url", true, false); ok {
			c.endpoint(jsonpath.Member(path, "url"), u, true)
		}
		foreign("stdio", "command", "args", "lifecycle", "cwd")
		foreign("in_process", "policy", "config")
		c.unknownMembers(t, path, "type", "url", "command", "args", "lifecycle", "cwd", "policy", "config")
	case TransportStdio:
		c.stdio(path, t)
		foreign("http", "url")
		foreign("in_process", "policy", "config")
		c.unknownMembers(t, path, "type", "url", "command", "args", "lifecycle", "cwd", "policy", "config")
	case TransportInProcess:
		c.inProcess(path, t)
		foreign("http", "url")
		foreign("stdio", "command", "args", "lifecycle", "cwd")
		c.unknownMembers(t, path, "type", "url", "command", "args", "lifecycle", "cwd", "policy", "config")
	default:
		c.errf(jsonpath.Member(path, "type"), "unknown transport type %q (want http, stdio or in_process)", typ)
		return ""
	}
	return typ
}

func parentPath(path string) string {
	if i := strings.LastIndexAny(path, ".["); i > 0 {
		return path[:i]
	}
	return "$"
}

func (c *checker) stdio(path string, t map[string]any) {
	command, cmdOK := c.str(t, path, "command", true, true)
	if lc, ok := c.str(t, path, "lifecycle", true, false); ok && lc != LifecyclePersistent && lc != LifecyclePerEvent {
		c.errf(jsonpath.Member(path, "lifecycle"), "must be %q or %q, not %q", LifecyclePersistent, LifecyclePerEvent, lc)
	}
	if av, present := t["args"]; present {
		args, isArr := av.([]any)
		if !isArr {
			c.errf(jsonpath.Member(path, "args"), "must be an array of strings, not %s", jsonpath.TypeName(av))
		}
		for i, a := range args {
			if _, isStr := a.(string); !isStr {
				c.errf(jsonpath.Index(jsonpath.Member(path, "args"), i), "must be a string, not %s", jsonpath.TypeName(a))
			}
		}
	}
	cwd, _ := c.str(t, path, "cwd", false, false)
	if cmdOK && !c.opts.NoEnvironmentChecks {
		c.commandExists(jsonpath.Member(path, "command"), command, cwd)
	}
}

// commandExists warns when a stdio command cannot be launched here. It is a warning, not an
// error: the document may be validated on another machine than the one that runs it, and a
// launch failure is an operational failure handled by the failure policy.
func (c *checker) commandExists(path, command, cwd string) {
	if !strings.ContainsRune(command, '/') && !strings.ContainsRune(command, os.PathSeparator) {
		if _, err := c.opts.LookPath(command); err != nil {
			c.warnf(path, "command %q is not found on PATH", command)
		}
		return
	}
	p := commandPath(command, cwd)
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		c.warnf(path, "command %q is not found", p)
	case fi.IsDir():
		c.warnf(path, "command %q is a directory", p)
	case fi.Mode().Perm()&0o111 == 0:
		c.warnf(path, "command %q is not executable", p)
	}
}

func (c *checker) inProcess(path string, t map[string]any) {
	name, ok := c.str(t, path, "policy", true, true)
	if ok && !c.opts.Policies[name] {
		c.errf(jsonpath.Member(path, "policy"), "unknown built-in policy %q (known: %s)", name, knownList(c.opts.Policies))
		ok = false
	}
	var raw json.RawMessage
	if cv, present := t["config"]; present {
		if _, isObj := cv.(map[string]any); !isObj && cv != nil {
			c.errf(jsonpath.Member(path, "config"), "must be an object, not %s", jsonpath.TypeName(cv))
			return
		}
		b, err := json.Marshal(cv)
		if err != nil {
			c.errf(jsonpath.Member(path, "config"), "cannot encode: %v", err)
			return
		}
		raw = b
	}
	if ok && c.opts.CheckPolicyConfig != nil {
		if err := c.opts.CheckPolicyConfig(name, raw); err != nil {
			var pe *PolicyConfigError
			if errors.As(err, &pe) {
				c.errf(jsonpath.Member(path, "config")+strings.TrimPrefix(pe.Path, "$"), "policy %s: %s", name, pe.Reason)
			} else {
				c.errf(jsonpath.Member(path, "config"), "policy %s: %v", name, err)
			}
		}
	}
}

func knownList(m map[string]bool) string {
	var names []string
	for k, v := range m {
		if v {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// endpoint checks an AHP or upload endpoint URL: absolute http(s), https unless the host is
// loopback (localhost, 127.0.0.0/8, [::1]); no userinfo (credentials never live in the
// document) and no fragment (it is never sent, so it can only mislead).
func (c *checker) endpoint(path, raw string, allowLoopbackHTTP bool) {
	u, err := url.Parse(raw)
	if err != nil {
		c.errf(path, "%q is not a valid URL: %v", raw, unwrapURLError(err))
		return
	}
	switch {
	case strings.HasPrefix(raw, "https://"):
	case strings.HasPrefix(raw, "http://"):
		if !allowLoopbackHTTP {
			c.errf(path, "%q must use https", raw)
			return
		}
		if !isLoopback(u.Hostname()) {
			c.errf(path, "%q must use https (plain http is only allowed for loopback hosts: localhost, 127.0.0.0/8, [::1])", raw)
			return
		}
	default:
		if allowLoopbackHTTP {
			c.errf(path, "%q must be an absolute http:// or https:// URL", raw)
		} else {
			c.errf(path, "%q must be an absolute https:// URL", raw)
		}
		return
	}
	if u.Host == "" {
		c.errf(path, "%q has no host", raw)
	}
	if u.User != nil {
		c.errf(path, "%q must not carry userinfo (reference credentials through authentication instead)", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		c.errf(path, "%q must not carry a fragment", raw)
	}
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Zone() != "" {
		return false
	}
	if addr.Is4() {
		return addr.As4()[0] == 127
	}
	return addr == netip.IPv6Loopback()
}

// secretKey reports whether an authentication member looks like a literal credential.
// References (tokenEnv, tokenRef, clientSecretRef, anything ending in Ref/Env) are fine.
func secretKey(k string) bool {
	if strings.HasSuffix(k, "Ref") || strings.HasSuffix(k, "Env") ||
		strings.HasSuffix(k, "_ref") || strings.HasSuffix(k, "_env") {
		return false
	}
	n := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
	for _, w := range []string{"token", "secret", "password", "passwd", "apikey", "credential", "privatekey", "assertion"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// literalSecrets reports every literal-secret member anywhere inside an authentication
// object (AHP-AUTH-001: secrets are referenced, never written in the registration). The
// value is never echoed.
func (c *checker) literalSecrets(path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if secretKey(k) {
				c.errf(jsonpath.Member(path, k), "literal secrets are not allowed in a registration; reference the secret with tokenEnv, tokenRef or clientSecretRef")
				continue
			}
			c.literalSecrets(jsonpath.Member(path, k), x[k])
		}
	case []any:
		for i, e := range x {
			c.literalSecrets(jsonpath.Index(path, i), e)
		}
	}
}

// authentication checks a bearer or oauth binding (AHP-AUTH-001). delivered says whether
// hookproxy will resolve it; only then are its references and flow checked against what
// this deployment can do.
func (c *checker) authentication(path string, v any, delivered bool) {
	a, ok := c.object(path, v)
	if !ok {
		return
	}
	c.literalSecrets(path, a)
	typ, ok := c.str(a, path, "type", true, false)
	if !ok {
		return
	}
	switch typ {
	case "bearer":
		env, hasEnv := a["tokenEnv"]
		_, hasRef := a["tokenRef"]
		switch {
		case hasEnv && hasRef:
			c.errf(path, "bearer must have exactly one of \"tokenEnv\" and \"tokenRef\", not both")
		case !hasEnv && !hasRef:
			c.errf(path, "bearer requires exactly one of \"tokenEnv\" and \"tokenRef\"")
		}
		if hasEnv {
			name, isStr := env.(string)
			switch {
			case !isStr:
				c.errf(jsonpath.Member(path, "tokenEnv"), "must be a string, not %s", jsonpath.TypeName(env))
			case !envName.MatchString(name):
				c.errf(jsonpath.Member(path, "tokenEnv"), "%q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", name)
			case !c.opts.NoEnvironmentChecks:
				if val, set := c.opts.LookupEnv(name); !set {
					c.warnf(jsonpath.Member(path, "tokenEnv"), "environment variable %s is not set; deliveries to this backend will fail until it is", name)
				} else if val == "" {
					c.warnf(jsonpath.Member(path, "tokenEnv"), "environment variable %s is empty; deliveries to this backend will fail until it is set", name)
				}
			}
		}
		if hasRef {
			if ref, ok := c.str(a, path, "tokenRef", false, true); ok {
				if delivered {
					c.secretRef(jsonpath.Member(path, "tokenRef"), ref)
				}
			}
		}
		c.unknownMembers(a, path, append([]string{"type", "tokenEnv", "tokenRef"}, secretMembers(a)...)...)
	case "oauth":
		if issuer, ok := c.str(a, path, "issuer", true, false); ok {
			c.endpoint(jsonpath.Member(path, "issuer"), issuer, false)
		}
		c.str(a, path, "resource", true, true)
		c.str(a, path, "clientId", true, true)
		if flow, ok := c.str(a, path, "flow", true, false); ok && flow != "authorization_code_pkce" && flow != "client_credentials" {
			c.errf(jsonpath.Member(path, "flow"), "must be \"authorization_code_pkce\" or \"client_credentials\", not %q", flow)
		}
		flow, _ := a["flow"].(string)
		secretRef, hasSecret := c.str(a, path, "clientSecretRef", false, true)
		if hasSecret && delivered {
			c.secretRef(jsonpath.Member(path, "clientSecretRef"), secretRef)
		}
		if delivered && !c.opts.NoEnvironmentChecks {
			// What this deployment can do, beyond the portable document: hookproxy runs
			// unattended, so only the client-credentials grant can obtain a token.
			switch {
			case flow == "authorization_code_pkce":
				c.errf(jsonpath.Member(path, "flow"), "hookproxy runs unattended and cannot complete an interactive authorization_code_pkce login; use client_credentials")
			case flow == "client_credentials" && !hasSecret:
				c.errf(path, "client_credentials needs \"clientSecretRef\" (env:NAME or file:/absolute/path) for the client secret")
			}
		}
		if sv, present := a["scopes"]; present {
			c.uniqueStrings(jsonpath.Member(path, "scopes"), sv, false)
		}
		c.unknownMembers(a, path, append([]string{"type", "issuer", "resource", "clientId", "flow", "scopes", "clientSecretRef"}, secretMembers(a)...)...)
	default:
		// Unknown mechanisms are invalid, not forward-compatible selectors; mTLS and workload
		// identity are deployment settings beneath AHP (AHP-AUTH-001).
		c.errf(jsonpath.Member(path, "type"), "unknown authentication type %q (portable types are bearer and oauth)", typ)
	}
}

// secretRef checks that hookproxy can resolve a tokenRef or clientSecretRef here: a scheme
// it does not support is an error (every delivery would fail as "credentials"), an unset
// variable or unreadable file a warning (it may appear before the first delivery).
// Skipped with NoEnvironmentChecks: the portable format leaves references opaque.
func (c *checker) secretRef(path, raw string) {
	if c.opts.NoEnvironmentChecks {
		return
	}
	ref, err := ParseSecretRef(raw)
	if err != nil {
		c.errf(path, "%v", err)
		return
	}
	switch ref.Scheme {
	case SecretRefEnv:
		if val, set := c.opts.LookupEnv(ref.Target); !set || val == "" {
			c.warnf(path, "environment variable %s is not set or empty; deliveries to this backend will fail until it is set", ref.Target)
		}
	case SecretRefFile:
		if _, err := os.Stat(ref.Target); err != nil {
			c.warnf(path, "secret file %s cannot be read (%v); deliveries to this backend will fail until it can", ref.Target, unwrapPathError(err))
		}
	}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// secretMembers lists the keys already reported as literal secrets, so they are not also
// reported as unknown.
func secretMembers(a map[string]any) []string {
	var out []string
	for k := range a {
		if secretKey(k) {
			out = append(out, k)
		}
	}
	return out
}

// uniqueStrings checks an array of unique non-empty strings (allowEmptyArray permits []).
func (c *checker) uniqueStrings(path string, v any, allowEmptyArray bool) []string {
	arr, ok := v.([]any)
	if !ok {
		c.errf(path, "must be an array of strings, not %s", jsonpath.TypeName(v))
		return nil
	}
	if len(arr) == 0 && !allowEmptyArray {
		c.errf(path, "must not be empty")
	}
	seen := map[string]bool{}
	var out []string
	for i, e := range arr {
		s, isStr := e.(string)
		switch {
		case !isStr:
			c.errf(jsonpath.Index(path, i), "must be a string, not %s", jsonpath.TypeName(e))
		case s == "":
			c.errf(jsonpath.Index(path, i), "must not be empty")
		case seen[s]:
			c.errf(jsonpath.Index(path, i), "duplicate %q", s)
		default:
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// subscription checks one intercept or observe subscription.
func (c *checker) subscription(path string, v any) {
	s, ok := c.object(path, v)
	if !ok {
		return
	}
	mode, modeOK := c.str(s, path, "mode", true, false)
	if modeOK && mode != ModeIntercept && mode != ModeObserve {
		c.errf(jsonpath.Member(path, "mode"), "must be %q or %q, not %q", ModeIntercept, ModeObserve, mode)
		modeOK = false
	}
	c.events(path, s, mode, modeOK)

	switch {
	case modeOK && mode == ModeIntercept:
		// AHP-FAIL-002: every interception has its own deadline; AHP-FAIL-001: the failure
		// policy is declared, never defaulted.
		c.integerMember(s, path, "timeoutMs", true, 1, math.MaxInt32)
		if fp, ok := c.str(s, path, "failurePolicy", true, false); ok && fp != FailOpen && fp != FailClosed {
			c.errf(jsonpath.Member(path, "failurePolicy"), "must be %q or %q, not %q", FailOpen, FailClosed, fp)
		}
	case modeOK && mode == ModeObserve:
		for _, k := range []string{"timeoutMs", "failurePolicy"} {
			if _, has := s[k]; has {
				c.errf(jsonpath.Member(path, k), "is not allowed on an observe subscription (observation never blocks, so it has no deadline or failure policy)")
			}
		}
	}

	if cv, present := s["content"]; !present {
		c.errf(path, "%q is required (an explicit content selection, e.g. {\"default\": \"metadata\"})", "content")
	} else {
		c.content(jsonpath.Member(path, "content"), cv)
	}
	c.boolMember(s, path, "includeNative")
	if uv, present := s["upload"]; present {
		c.upload(jsonpath.Member(path, "upload"), uv)
	}
	if fv, present := s["filters"]; present {
		if f, ok := c.object(jsonpath.Member(path, "filters"), fv); ok {
			for _, k := range []string{"toolKinds", "paths"} {
				if v, has := f[k]; has {
					c.uniqueStrings(jsonpath.Member(jsonpath.Member(path, "filters"), k), v, true)
				}
			}
			c.unknownMembers(f, jsonpath.Member(path, "filters"), "toolKinds", "paths")
		}
	}
	scope, scopeOK := c.str(s, path, "scope", false, false)
	if scopeOK && scope != "managed" && scope != "project" && scope != "user" {
		c.errf(jsonpath.Member(path, "scope"), "must be \"managed\", \"project\" or \"user\", not %q", scope)
	}
	dis, disPresent := c.boolMember(s, path, "disableable")
	if scopeOK && scope == "managed" {
		if _, has := s["disableable"]; !has {
			c.errf(path, "\"disableable\": false is required when scope is \"managed\"")
		} else if disPresent && dis {
			c.errf(jsonpath.Member(path, "disableable"), "must be false when scope is \"managed\"")
		}
	}
	if disPresent && !dis && !c.opts.NoEnvironmentChecks {
		// Mandatory policy that the harness does not honour is
		// rejected, never degraded. hookproxy's manifest advertises managedPolicy scopes
		// user and project with disableable true (admin.Manifest), so a non-disableable
		// (managed) subscription cannot be honoured as such.
		c.errf(jsonpath.Member(path, "disableable"), "hookproxy does not enforce non-disableable (managed) policy: its manifest advertises "+
			"managedPolicy scopes user and project, disableable true; register the subscription without scope \"managed\" and disableable")
	}
	// "id" is the conventional harness-local subscription identifier; it never goes on the wire.
	c.unknownMembers(s, path, "events", "mode", "timeoutMs", "failurePolicy", "content", "includeNative",
		"upload", "filters", "scope", "disableable", "id")
}

// events checks the events member: names of the catalogue, "*" or "family.*", unique, and
// for interception only selections that reach an interceptable event (AHP-REG-002).
func (c *checker) events(path string, s map[string]any, mode string, modeOK bool) {
	ev, present := s["events"]
	if !present {
		c.errf(path, "%q is required", "events")
		return
	}
	epath := jsonpath.Member(path, "events")
	arr, ok := ev.([]any)
	if !ok {
		c.errf(epath, "must be an array of event names, not %s", jsonpath.TypeName(ev))
		return
	}
	if len(arr) == 0 {
		c.errf(epath, "must name at least one event")
		return
	}
	seen := map[string]bool{}
	for i, e := range arr {
		ipath := jsonpath.Index(epath, i)
		name, isStr := e.(string)
		if !isStr {
			c.errf(ipath, "must be a string, not %s", jsonpath.TypeName(e))
			continue
		}
		if seen[name] {
			c.errf(ipath, "duplicate event %q", name)
			continue
		}
		seen[name] = true
		isWild := wildcard.MatchString(name)
		if name == ahp.EventToolDefinitions {
			// hookproxy's extension event: observe-only, selected by its exact name only.
			if mode == ModeIntercept {
				c.errf(ipath, "%q is an observe-only hookproxy extension event (use mode \"observe\")", name)
			}
			continue
		}
		if !isWild && !ahp.IsEventType(name) {
			c.errf(ipath, "unknown event %q (want an event of the catalogue, \"*\" or a family wildcard such as \"tool.*\")", name)
			continue
		}
		selected := Select(name)
		if !modeOK {
			continue
		}
		if mode == ModeIntercept {
			var interceptable []string
			for _, t := range selected {
				if ahp.IsInterceptable(t) {
					interceptable = append(interceptable, t)
				}
			}
			switch {
			case len(interceptable) == 0 && !isWild:
				c.errf(ipath, "%q is observe-only and cannot be intercepted (use mode \"observe\")", name)
				continue
			case len(interceptable) == 0:
				c.errf(ipath, "%q selects no interceptable event", name)
				continue
			}
			selected = interceptable
		} else if len(selected) == 0 {
			c.warnf(ipath, "%q selects no event of the catalogue", name)
			continue
		}
		if !c.anyEmitted(selected) {
			c.warnf(ipath, "hookproxy never emits %s; this subscription is never called for it", describe(name, selected))
		}
	}
}

func (c *checker) anyEmitted(events []string) bool {
	for _, e := range events {
		if c.opts.Emitted[e] {
			return true
		}
	}
	return false
}

func describe(name string, selected []string) string {
	if len(selected) == 1 && selected[0] == name {
		return name
	}
	return name + " (" + strings.Join(selected, ", ") + ")"
}

// Select returns the catalogue events an events entry names: itself, every event for "*",
// or every event of a family for "family.*". Unknown names select nothing.
func Select(entry string) []string {
	if entry == "*" {
		return append([]string(nil), ahp.EventTypes...)
	}
	if wildcard.MatchString(entry) {
		prefix := strings.TrimSuffix(entry, "*")
		var out []string
		for _, t := range ahp.EventTypes {
			if strings.HasPrefix(t, prefix) {
				out = append(out, t)
			}
		}
		return out
	}
	if ahp.IsEventType(entry) {
		return []string{entry}
	}
	return nil
}

// content checks a content selection (AHP-CONTENT-002): an object with a
// required "default" and every value body, metadata or omit.
func (c *checker) content(path string, v any) {
	m, ok := c.object(path, v)
	if !ok {
		return
	}
	if _, has := m["default"]; !has {
		c.errf(path, "%q is required (there is no implicit content policy)", "default")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		val := m[k]
		s, isStr := val.(string)
		if !isStr || !selections[s] {
			c.errf(jsonpath.Member(path, k), "must be \"body\", \"metadata\" or \"omit\", not %s", describeValue(val))
		}
	}
}

func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return jsonpath.TypeName(v)
}

// upload checks the binary upload binding of a subscription (AHP spec, content-upload.md).
func (c *checker) upload(path string, v any) {
	u, ok := c.object(path, v)
	if !ok {
		return
	}
	if ep, ok := c.str(u, path, "endpoint", true, false); ok {
		c.endpoint(jsonpath.Member(path, "endpoint"), ep, true)
	}
	c.integerMember(u, path, "timeoutMs", true, 1, math.MaxInt32)
	c.integerMember(u, path, "maxBytes", true, 0, math.MaxInt64)
	if av, present := u["auth"]; present {
		// hookproxy implements no upload binding: the upload credentials are never
		// resolved, so only their portable form is checked.
		c.authentication(jsonpath.Member(path, "auth"), av, false)
	}
	c.unknownMembers(u, path, "endpoint", "timeoutMs", "maxBytes", "auth")
}

// duplicateKeys reports object members written twice. encoding/json keeps the last one
// silently, which would make e.g. two failurePolicy values an invisible choice.
func (c *checker) duplicateKeys(data []byte) {
	for _, path := range jsonpath.Duplicates(data) {
		c.errf(path, "member is written more than once")
	}
}
