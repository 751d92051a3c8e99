package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// validate checks a configuration with defaults applied and returns every problem.
func validate(c *Config) []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if err := checkHostPort(c.Listen); err != nil {
		add("listen", "%q: %v", c.Listen, err)
	}
	if c.Admin != "" {
		if err := checkHostPort(c.Admin); err != nil {
			add("admin", "%q: %v", c.Admin, err)
		} else if c.Admin == c.Listen {
			add("admin", "must differ from listen (%s)", c.Listen)
		}
	}
	validateAdminAuth(c, add)
	validateApprovals(c, add)
	if err := checkSource(c.Source); err != nil {
		add("source", "%q: %v", c.Source, err)
	}
	if c.UpstreamProxy != "" {
		if u, err := url.Parse(c.UpstreamProxy); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
			add("upstreamProxy", "%q must be an http://, https:// or socks5:// proxy URL", c.UpstreamProxy)
		}
	}

	if len(c.Routes) == 0 {
		add("routes", "at least one route is required (a proxy without routes answers every request with 404)")
	}
	seen := map[string]int{}
	for i, r := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		switch {
		case r.Prefix == "":
			add(path, "\"prefix\" is required")
		case !strings.HasPrefix(r.Prefix, "/"):
			add(path+".prefix", "%q must start with \"/\"", r.Prefix)
		case strings.HasSuffix(r.Prefix, "/"):
			add(path+".prefix", "%q must not end with \"/\" (the prefix is stripped before forwarding)", r.Prefix)
		case strings.ContainsAny(r.Prefix, "?#%* \t") || strings.Contains(r.Prefix, "//"):
			add(path+".prefix", "%q must be a plain path such as /openai", r.Prefix)
		default:
			if first, dup := seen[r.Prefix]; dup {
				add(path+".prefix", "%q is also routes[%d].prefix", r.Prefix, first)
			} else {
				seen[r.Prefix] = i
			}
		}
		switch r.API {
		case APIOpenAI, APIAnthropic, APIGemini, APIMCP, APIPassthrough:
		case "":
			add(path, "\"api\" is required (openai, anthropic, gemini, mcp or passthrough)")
		default:
			add(path+".api", "%q is not openai, anthropic, gemini, mcp or passthrough", r.API)
		}
		switch r.Unmapped {
		case "", UnmappedRefuse, UnmappedForward:
		default:
			add(path+".unmapped", "%q is not refuse or forward", r.Unmapped)
		}
		if r.Upstream == "" {
			add(path, "\"upstream\" is required")
		} else if err := checkUpstream(r.Upstream); err != nil {
			add(path+".upstream", "%q: %v", r.Upstream, err)
		}
		if r.ServerID != "" && r.API != APIMCP {
			add(path+".serverId", "only applies to mcp routes")
		}
	}

	switch c.Audit.OnFull {
	case AuditOnWait, AuditOnDrop:
	default:
		add("audit.onFull", "%q is not wait or drop", c.Audit.OnFull)
	}
	if c.Audit.QueueSize < 0 {
		add("audit.queueSize", "must not be negative")
	}
	if c.Audit.WaitTimeout < 0 {
		add("audit.waitTimeout", "must not be negative")
	}

	for _, l := range []struct {
		key string
		neg bool
	}{
		{"limits.maxRequestBytes", c.Limits.MaxRequestBytes < 0},
		{"limits.maxResponseBytes", c.Limits.MaxResponseBytes < 0},
		{"limits.dialTimeout", c.Limits.DialTimeout < 0},
		{"limits.tlsHandshakeTimeout", c.Limits.TLSHandshakeTimeout < 0},
		{"limits.responseHeaderTimeout", c.Limits.ResponseHeaderTimeout < 0},
		{"limits.shutdownTimeout", c.Limits.ShutdownTimeout < 0},
		{"limits.observeTimeout", c.Limits.ObserveTimeout < 0},
		{"limits.maxPolicyScanBytes", c.Limits.MaxPolicyScanBytes < 0},
	} {
		if l.neg {
			add(l.key, "must not be negative")
		}
	}

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case LogAuto, LogJSON, LogConsole:
	default:
		add("log.format", "%q is not auto, json or console", c.Log.Format)
	}
	if c.Tracing.Endpoint != "" {
		if err := checkUpstream(c.Tracing.Endpoint); err != nil {
			add("tracing.endpoint", "%q: %v", c.Tracing.Endpoint, err)
		}
	}
	if c.Tracing.SampleRatio < 0 || c.Tracing.SampleRatio > 1 {
		add("tracing.sampleRatio", "must be between 0 and 1")
	}
	validateState(&c.State, add)
	if c.Capture.Sample < 0 || c.Capture.Sample > 1 {
		add("capture.sample", "must be between 0 (exclusive) and 1")
	}
	if c.Capture.MaxBytes < 0 {
		add("capture.maxBytes", "must not be negative")
	}
	if c.Capture.MaxAge < 0 {
		add("capture.maxAge", "must not be negative")
	}
	if c.Shadow.Registration == RegistrationNone {
		add("shadow.registration", "leave the shadow block out instead of naming none")
	}
	validatePinning(c.Pinning, c.Admin, add)
	return ps
}

// validateState checks the state block. The Redis password must come from the
// environment: a literal one in the URL would end up in files, diffs and logs.
func validateState(st *State, add func(key, format string, args ...any)) {
	switch st.OnStoreFailure {
	case StateReSettle, StateFailClosed:
	default:
		add("state.onStoreFailure", "%q is not re-settle or fail-closed", st.OnStoreFailure)
	}
	if st.Memory.MaxSessions < 0 {
		add("state.memory.maxSessions", "must not be negative")
	}
	if st.Memory.TTL < 0 {
		add("state.memory.ttl", "must not be negative")
	}
	r := &st.Redis
	if r.TTL < 0 {
		add("state.redis.ttl", "must not be negative")
	}
	if r.TimeoutMs < 0 {
		add("state.redis.timeoutMs", "must not be negative")
	}
	switch st.Backend {
	case StateMemoryBackend:
		return
	case StateRedisBackend:
	default:
		add("state.backend", "%q is not memory or redis", st.Backend)
		return
	}
	if r.URL == "" {
		add("state.redis.url", "is required with backend redis")
		return
	}
	u, err := url.Parse(r.URL)
	switch {
	case err != nil:
		add("state.redis.url", "does not parse as a URL")
	case u.Scheme != "redis" && u.Scheme != "rediss":
		add("state.redis.url", "scheme %q is not redis or rediss", u.Scheme)
	case u.Host == "":
		add("state.redis.url", "names no host")
	}
	if err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			add("state.redis.url", "carries a password: name an environment variable in state.redis.passwordEnv instead")
		}
	}
	if r.PasswordEnv != "" {
		if _, ok := os.LookupEnv(r.PasswordEnv); !ok {
			add("state.redis.passwordEnv", "environment variable %s is not set", r.PasswordEnv)
		}
	}
	if r.TLS.CAFile != "" {
		if _, err := os.Stat(r.TLS.CAFile); err != nil {
			add("state.redis.tls.caFile", "%v", err)
		}
	}
}

// checkHostPort accepts host:port with a numeric port (":8080" listens on every interface).
func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port such as 127.0.0.1:8080")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// checkUpstream accepts an absolute http(s) URL with a host and no credentials or fragment:
// client credentials pass through from the request, never from the file.
func checkUpstream(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("must be an absolute http:// or https:// URL")
	}
	if u.Host == "" {
		return fmt.Errorf("has no host")
	}
	if u.User != nil {
		return fmt.Errorf("must not carry user:password (credentials come from the client request)")
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("must not carry a fragment")
	}
	if u.RawQuery != "" {
		return fmt.Errorf("must not carry a query (the client's query is forwarded)")
	}
	return nil
}

// checkSource accepts an absolute URI without spaces (the AHP event source).
func checkSource(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("must be an absolute URI such as urn:hookproxy:node-a")
	}
	return nil
}
