package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/config"
)

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const contractExample = `
listen: 127.0.0.1:8080
admin: 127.0.0.1:9090
registration: hooks.json
audit:
  path: audit.jsonl
routes:
  - prefix: /openai
    api: openai
    upstream: https://api.openai.com
  - prefix: /anthropic
    api: anthropic
    upstream: https://api.anthropic.com
  - prefix: /mcp/files
    api: mcp
    upstream: http://127.0.0.1:7000/mcp
`

func TestLoadContractExample(t *testing.T) {
	p := write(t, "hookproxy.yaml", contractExample)
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	if cfg.Registration != filepath.Join(dir, "hooks.json") {
		t.Errorf("registration = %q, want it resolved against %s", cfg.Registration, dir)
	}
	if cfg.Audit.Path != filepath.Join(dir, "audit.jsonl") {
		t.Errorf("audit.path = %q", cfg.Audit.Path)
	}
	if cfg.Path != p || len(cfg.Routes) != 3 || cfg.Routes[2].ServerID != "/mcp/files" {
		t.Errorf("cfg = %+v", cfg)
	}
	// Defaults.
	if cfg.Limits.MaxRequestBytes != 32<<20 || cfg.Limits.MaxResponseBytes != 64<<20 ||
		cfg.Limits.DialTimeout != 10*time.Second || cfg.Limits.TLSHandshakeTimeout != 10*time.Second ||
		cfg.Limits.ResponseHeaderTimeout != 10*time.Minute || cfg.Limits.ShutdownTimeout != 30*time.Second ||
		cfg.Limits.ObserveTimeout != 5*time.Second {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.Log.Level != "info" || cfg.Log.Format != "auto" || cfg.Audit.OnFull != "wait" ||
		cfg.Audit.QueueSize != 1024 || cfg.Tracing.ServiceName != "hookproxy" || !strings.HasPrefix(cfg.Source, "urn:hookproxy:") {
		t.Errorf("defaults not applied: %+v", cfg)
	}
}

func TestLoadJSON(t *testing.T) {
	p := write(t, "hookproxy.json", "{\n\t\"listen\": \":8081\",\n\t\"registration\": \"/etc/hooks.json\",\n\t\"limits\": {\"dialTimeout\": \"2s\"},\n\t\"routes\": [{\"prefix\": \"/x\", \"api\": \"passthrough\", \"upstream\": \"http://localhost:9\"}]\n}\n")
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != ":8081" || cfg.Registration != "/etc/hooks.json" || cfg.Limits.DialTimeout != 2*time.Second || cfg.Admin != "" {
		t.Errorf("cfg = %+v", cfg)
	}
}

func TestLoadProblems(t *testing.T) {
	route := "routes:\n  - prefix: /openai\n    api: openai\n    upstream: https://api.openai.com\n"
	tests := []struct {
		desc  string
		text  string
		paths []string
		msg   string
	}{
		{desc: "unknown top-level key", text: "listn: 1.2.3.4:1\n" + route, paths: []string{"listn"}, msg: "unknown key (line 1)"},
		{desc: "unknown nested key", text: route + "    upstrem: x\n", paths: []string{"routes[0].upstrem"}, msg: "line 5"},
		{desc: "case typo suggests", text: "Listen: :1\n" + route, paths: []string{"Listen"}, msg: `did you mean "listen"`},
		{desc: "unknown limits key", text: route + "limits:\n  maxBytes: 3\n", paths: []string{"limits.maxBytes"}},
		{desc: "capture sample above 1", text: route + "capture:\n  dir: c\n  sample: 1.5\n", paths: []string{"capture.sample"}},
		{desc: "capture negative maxBytes", text: route + "capture:\n  dir: c\n  maxBytes: -1\n", paths: []string{"capture.maxBytes"}},
		{desc: "capture unknown key", text: route + "capture:\n  directory: c\n", paths: []string{"capture.directory"}},
		{desc: "shadow none", text: route + "shadow:\n  registration: none\n", paths: []string{"shadow.registration"}},
		{desc: "fixed path key is not a file key", text: route + "path: /x\n", paths: []string{"path"}},
		{desc: "duration integer", text: route + "limits:\n  dialTimeout: 5\n", paths: []string{"limits.dialTimeout", "$"}},
		{desc: "duration garbage", text: route + "limits:\n  dialTimeout: soon\n", paths: []string{"limits.dialTimeout", "$"}},
		{desc: "wrong type", text: "routes: 3\n", paths: []string{"$"}, msg: "cannot unmarshal"},
		{desc: "not a mapping", text: "- a\n", paths: []string{"$"}, msg: "mapping"},
		{desc: "two documents", text: route + "---\nlisten: :1\n", paths: []string{"$"}, msg: "more than one"},
		{desc: "bad yaml", text: "listen: [\n", paths: []string{"$"}, msg: "invalid YAML"},
		{desc: "empty file", text: "", paths: []string{"routes"}},
		{desc: "no routes", text: "listen: 127.0.0.1:1\n", paths: []string{"routes"}},
		{desc: "prefix without slash", text: "routes:\n  - {prefix: openai, api: openai, upstream: https://a.example}\n", paths: []string{"routes[0].prefix"}},
		{desc: "prefix trailing slash", text: "routes:\n  - {prefix: /openai/, api: openai, upstream: https://a.example}\n", paths: []string{"routes[0].prefix"}},
		{desc: "prefix root", text: "routes:\n  - {prefix: /, api: openai, upstream: https://a.example}\n", paths: []string{"routes[0].prefix"}},
		{desc: "prefix duplicate", text: "routes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n  - {prefix: /a, api: anthropic, upstream: https://b.example}\n", paths: []string{"routes[1].prefix"}, msg: "routes[0]"},
		{desc: "prefix missing", text: "routes:\n  - {api: openai, upstream: https://a.example}\n", paths: []string{"routes[0]"}},
		{desc: "api unknown", text: "routes:\n  - {prefix: /a, api: vertex, upstream: https://a.example}\n", paths: []string{"routes[0].api"}},
		{desc: "api missing", text: "routes:\n  - {prefix: /a, upstream: https://a.example}\n", paths: []string{"routes[0]"}},
		{desc: "upstream relative", text: "routes:\n  - {prefix: /a, api: openai, upstream: /v1}\n", paths: []string{"routes[0].upstream"}},
		{desc: "upstream ftp", text: "routes:\n  - {prefix: /a, api: openai, upstream: \"ftp://a.example\"}\n", paths: []string{"routes[0].upstream"}},
		{desc: "upstream userinfo", text: "routes:\n  - {prefix: /a, api: openai, upstream: \"https://u:p@a.example\"}\n", paths: []string{"routes[0].upstream"}},
		{desc: "upstream missing", text: "routes:\n  - {prefix: /a, api: openai}\n", paths: []string{"routes[0]"}},
		{desc: "serverId on openai", text: "routes:\n  - {prefix: /a, api: openai, upstream: https://a.example, serverId: x}\n", paths: []string{"routes[0].serverId"}},
		{desc: "listen bad", text: "listen: localhost\n" + route, paths: []string{"listen"}},
		{desc: "admin same as listen", text: "listen: 127.0.0.1:1\nadmin: 127.0.0.1:1\n" + route, paths: []string{"admin"}},
		{desc: "log level", text: "log: {level: verbose}\n" + route, paths: []string{"log.level"}},
		{desc: "audit onFull", text: "audit: {onFull: block}\n" + route, paths: []string{"audit.onFull"}},
		{desc: "negative limit", text: "limits: {maxRequestBytes: -1}\n" + route, paths: []string{"limits.maxRequestBytes"}},
		{desc: "sample ratio", text: "tracing: {sampleRatio: 2}\n" + route, paths: []string{"tracing.sampleRatio"}},
		{desc: "source", text: "source: not a uri\n" + route, paths: []string{"source"}},
		{desc: "state backend", text: "state: {backend: etcd}\n" + route, paths: []string{"state.backend"}},
		{desc: "state onStoreFailure", text: "state: {onStoreFailure: ignore}\n" + route, paths: []string{"state.onStoreFailure"}},
		{desc: "state redis without url", text: "state: {backend: redis}\n" + route, paths: []string{"state.redis.url"}},
		{desc: "state redis scheme", text: "state: {backend: redis, redis: {url: \"http://r:6379\"}}\n" + route, paths: []string{"state.redis.url"}},
		{desc: "state redis literal password", text: "state: {backend: redis, redis: {url: \"redis://u:hunter2@r:6379/0\"}}\n" + route, paths: []string{"state.redis.url"}, msg: "passwordEnv"},
		{desc: "state redis password variable unset", text: "state: {backend: redis, redis: {url: \"redis://r:6379/0\", passwordEnv: HOOKPROXY_TEST_UNSET_REDIS_PW}}\n" + route, paths: []string{"state.redis.passwordEnv"}},
		{desc: "state unknown key", text: "state: {redis: {password: x}}\n" + route, paths: []string{"state.redis.password"}},
		{desc: "several at once", text: "listn: x\nroutes:\n  - {prefix: a/, api: x, upstream: y}\n", paths: []string{"listn"}},
		{desc: "several validation problems", text: "routes:\n  - {prefix: a/, api: x, upstream: y}\n", paths: []string{"routes[0].prefix", "routes[0].api", "routes[0].upstream"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := write(t, "c.yaml", tc.text)
			_, err := config.Load(p)
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("want *config.Error, got %v", err)
			}
			var got []string
			for _, pr := range cerr.Problems {
				got = append(got, pr.Path)
			}
			if strings.Join(got, "|") != strings.Join(tc.paths, "|") {
				t.Fatalf("paths = %q, want %q\n%v", got, tc.paths, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats a password: %v", err)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "config "+p+": ") {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestYAMLMergeKeys(t *testing.T) {
	p := write(t, "c.yaml", "base: &b\n  api: openai\n  upstream: https://a.example\n"+
		"routes:\n  - <<: *b\n    prefix: /a\n")
	// "base" is not a key of the configuration, even as an anchor holder.
	if _, err := config.Load(p); err == nil || !strings.Contains(err.Error(), "base: unknown key") {
		t.Fatalf("err = %v", err)
	}
	p = write(t, "c.yaml", "routes:\n  - &r {prefix: /a, api: openai, upstream: https://a.example}\n  - <<: *r\n    prefix: /b\n")
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Routes[1].Prefix != "/b" || cfg.Routes[1].API != "openai" {
		t.Errorf("routes = %+v", cfg.Routes)
	}
}

func TestDefault(t *testing.T) {
	cfg := config.Default()
	if cfg.Listen != "127.0.0.1:8080" || cfg.Admin != "127.0.0.1:9090" || cfg.Path != "" || cfg.Registration != "" {
		t.Fatalf("default = %+v", cfg)
	}
	want := map[string]string{"/openai": "https://api.openai.com", "/anthropic": "https://api.anthropic.com", "/gemini": "https://generativelanguage.googleapis.com"}
	if len(cfg.Routes) != 3 {
		t.Fatalf("routes = %+v", cfg.Routes)
	}
	for _, r := range cfg.Routes {
		if want[r.Prefix] != r.Upstream || strings.TrimPrefix(r.Prefix, "/") != r.API {
			t.Errorf("route %+v", r)
		}
	}
	// The built-in policies' registration is embedded: serve with no file puts
	// secrets and tools in front of the public APIs.
	if len(cfg.RegistrationInline) == 0 || string(cfg.RegistrationInline) != string(config.DefaultRegistration) {
		t.Errorf("default inline registration = %q, want the embedded default-registration.json", cfg.RegistrationInline)
	}
	// Each call returns a fresh copy.
	cfg.Routes[0].Prefix = "/changed"
	if config.Default().Routes[0].Prefix != "/openai" {
		t.Error("Default shares state between calls")
	}
	saved := config.DefaultRegistration
	config.DefaultRegistration = []byte(`{"protocolVersion":"draft","hooks":[]}`)
	defer func() { config.DefaultRegistration = saved }()
	if string(config.Default().RegistrationInline) != string(config.DefaultRegistration) {
		t.Error("DefaultRegistration not carried into RegistrationInline")
	}
}

func TestResolve(t *testing.T) {
	p := write(t, "c.yaml", contractExample)
	t.Setenv(config.EnvConfig, p)
	cfg, err := config.Resolve("")
	if err != nil || cfg.Path != p {
		t.Fatalf("Resolve(env) = %+v, %v", cfg, err)
	}
	if _, err := config.Resolve(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("Resolve(missing flag) succeeded")
	}
	t.Setenv(config.EnvConfig, "")
	cfg, err = config.Resolve("")
	if err != nil || cfg.Path != "" || cfg.Listen != "127.0.0.1:8080" {
		t.Fatalf("Resolve(none) = %+v, %v", cfg, err)
	}
}

// TestStateDefaults: without a state block the store is memory, re-settle, with the
// documented bounds; a redis block gets its documented defaults.
func TestStateDefaults(t *testing.T) {
	route := "routes:\n  - prefix: /openai\n    api: openai\n    upstream: https://api.openai.com\n"
	cfg, err := config.Load(write(t, "c.yaml", route))
	if err != nil {
		t.Fatal(err)
	}
	st := cfg.State
	if st.Backend != "memory" || st.OnStoreFailure != "re-settle" || st.Memory.MaxSessions != 10000 || st.Memory.TTL != 24*time.Hour {
		t.Fatalf("defaults %+v", st)
	}
	t.Setenv("HOOKPROXY_TEST_REDIS_PW", "s3cret")
	cfg, err = config.Load(write(t, "c.yaml", route+"state:\n  backend: redis\n  onStoreFailure: fail-closed\n  redis:\n    url: redis://127.0.0.1:6379/0\n    passwordEnv: HOOKPROXY_TEST_REDIS_PW\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.State.Redis
	if cfg.State.OnStoreFailure != "fail-closed" || r.KeyPrefix != "hookproxy:" || r.TTL != 24*time.Hour || r.TimeoutMs != 250 {
		t.Fatalf("redis defaults %+v", cfg.State)
	}
}

// TestRegistrationKey: a configuration that leaves the registration key out gets the
// built-in default chain — a copy of config/default.yaml with its upstreams changed keeps
// its policies — and only an explicit `registration: none` makes a plain proxy; a file
// is resolved against the configuration's directory.
func TestRegistrationKey(t *testing.T) {
	copied := strings.ReplaceAll(string(config.DefaultYAML()), "https://api.openai.com", "http://127.0.0.1:9999")
	for _, tc := range []struct {
		desc, text string
		file       string // want Registration (relative to the file's directory)
		inline     bool   // want the default registration inline
		plain      bool
	}{
		{desc: "copy of default.yaml", text: copied, inline: true},
		{desc: "no key", text: "routes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n", inline: true},
		{desc: "registration: none", text: "registration: none\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n", plain: true},
		{desc: "a file", text: "registration: hooks.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n", file: "hooks.json"},
		{desc: "a file called none, written as a path", text: "registration: ./none\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n", file: "none"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := write(t, "c.yaml", tc.text)
			cfg, err := config.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.file != "" {
				want = filepath.Join(filepath.Dir(p), tc.file)
			}
			if cfg.Registration != want {
				t.Errorf("Registration = %q, want %q", cfg.Registration, want)
			}
			if got := string(cfg.RegistrationInline) == string(config.DefaultRegistration); got != tc.inline {
				t.Errorf("inline default registration = %v, want %v", got, tc.inline)
			}
			if cfg.Plain() != tc.plain {
				t.Errorf("Plain() = %v, want %v", cfg.Plain(), tc.plain)
			}
		})
	}
}

// TestRolloutKeys: shadow and capture paths resolve against the configuration's directory,
// capture takes its defaults (redaction on), and redact: false is kept.
func TestRolloutKeys(t *testing.T) {
	route := "routes:\n  - prefix: /openai\n    api: openai\n    upstream: https://api.openai.com\n"
	cfg, err := config.Parse([]byte(route+"shadow:\n  registration: strict.json\ncapture:\n  dir: cap\n"), "/etc/hookproxy")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Shadow.Registration != "/etc/hookproxy/strict.json" || cfg.Capture.Dir != "/etc/hookproxy/cap" ||
		cfg.Capture.Sample != 1 || cfg.Capture.MaxBytes != config.DefaultCaptureMaxBytes || cfg.Capture.MaxAge != config.DefaultCaptureMaxAge ||
		!cfg.Capture.Redacting() || !cfg.Capture.Enabled() {
		t.Fatalf("parsed %+v %+v", cfg.Shadow, cfg.Capture)
	}
	cfg, err = config.Parse([]byte(route+"capture:\n  dir: cap\n  redact: false\n"), "")
	if err != nil || cfg.Capture.Redacting() {
		t.Fatalf("redact: false: %v, redacting %v", err, cfg != nil && cfg.Capture.Redacting())
	}
	if cfg, _ := config.Parse([]byte(route), ""); cfg.Capture.Enabled() || cfg.Shadow.Registration != "" {
		t.Fatal("capture or shadow on without their keys")
	}
}
