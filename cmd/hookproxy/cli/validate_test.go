package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/ahptest"
)

const testVersion = "v0.0.0-validate-test"

// runBinary runs the binary with an environment free of the variables the fixtures name,
// so that warnings do not depend on the developer's shell.
func runBinary(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AHP_POLICY_TOKEN=") && !strings.HasPrefix(kv, "HOOKPROXY_CONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return code, o.String(), e.String()
}

func writeConfig(t *testing.T, registration string) string {
	t.Helper()
	text := "routes:\n  - prefix: /openai\n    api: openai\n    upstream: https://api.openai.com\n"
	if registration != "" {
		text = "registration: " + registration + "\n" + text
	}
	p := filepath.Join(t.TempDir(), "hookproxy.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The JSON paths every invalid registration fixture must report.
var fixtureErrorPaths = map[string][]string{
	"content-default-missing.invalid.json":     {"hooks[0].subscriptions[0].content"},
	"empty-hooks.invalid.json":                 {"hooks"},
	"intercept-content-missing.invalid.json":   {"hooks[0].subscriptions[0]"},
	"intercept-observation-event.invalid.json": {"hooks[0].subscriptions[0].events[0]", "hooks[0].subscriptions[0]"},
	"literal-token.invalid.json":               {"hooks[0].authentication.token", "hooks[0].subscriptions[0]"},
	"observe-content-missing.invalid.json":     {"hooks[1].subscriptions[1]"},
	"observe-policy-fields.invalid.json": {
		"hooks[0].subscriptions[0].timeoutMs", "hooks[0].subscriptions[0].failurePolicy", "hooks[0].subscriptions[0]",
	},
}

func TestValidateCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hookproxy binary as a child process")
	}
	bin := hookproxyBinary(t)

	t.Run("version", func(t *testing.T) {
		code, out, _ := runBinary(t, bin, "version")
		if code != 0 || out != "hookproxy "+testVersion+"\n" {
			t.Fatalf("version: code %d, stdout %q", code, out)
		}
	})

	for _, f := range ahptest.Fixtures(t, "registration") {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, bin, "validate", "--config", writeConfig(t, f))
			if strings.HasSuffix(name, ".valid.json") {
				if code != 0 {
					t.Fatalf("exit %d for a valid fixture\n%s", code, stderr)
				}
				if !strings.Contains(stdout, "valid") {
					t.Errorf("stdout %q", stdout)
				}
				// Environment findings are printed, as warnings.
				for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
					if line != "" && !strings.HasPrefix(line, "warning: "+f+": hooks[") {
						t.Errorf("unexpected stderr line %q", line)
					}
				}
				return
			}
			if code != 1 {
				t.Fatalf("exit %d for an invalid fixture, want 1\n%s", code, stderr)
			}
			paths, ok := fixtureErrorPaths[name]
			if !ok {
				t.Fatalf("no expected paths for %s", name)
			}
			for _, p := range paths {
				if !strings.Contains(stderr, "\n"+f+": "+p+": ") && !strings.HasPrefix(stderr, f+": "+p+": ") {
					t.Errorf("stderr lacks %q:\n%s", f+": "+p+": ", stderr)
				}
			}
		})
	}

	dir := t.TempDir()
	writeFile := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		desc   string
		args   []string
		code   int
		stderr []string
		stdout string
	}{
		// Without the key the built-in default chain applies, and the summary names it.
		{desc: "no registration key", args: []string{"validate", "--config", writeConfig(t, "")}, code: 0,
			stdout: "valid: 1 route(s); policies in force: tools, secrets (registration: the built-in default (no registration key))"},
		// Turning the policies off must be said explicitly, and validate says it loudly.
		{desc: "registration: none", args: []string{"validate", "--config", writeConfig(t, "none")}, code: 0,
			stdout: "valid: 1 route(s); no policies in force (registration: none)", stderr: []string{"warning: ", "NO POLICIES IN FORCE"}},
		{desc: "missing registration file is resolved against the config", args: []string{"validate", "--config", writeFile("rel.yaml",
			"registration: missing.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n")},
			code: 1, stderr: []string{filepath.Join(dir, "rel.yaml") + ": registration: cannot read " + filepath.Join(dir, "missing.json") + ": no such file"}},
		{desc: "in_process valid", args: []string{"validate", "--config", writeFile("ip.yaml",
			"registration: ip.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n")}, code: 0,
			stdout: "policies in force: secrets (registration: " + filepath.Join(dir, "ip.json") + ")"},
		{desc: "in_process unknown policy", args: []string{"validate", "--config", writeFile("ipbad.yaml",
			"registration: ipbad.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n")},
			code: 1, stderr: []string{filepath.Join(dir, "ipbad.json") + ": hooks[0].transport.policy: unknown built-in policy \"nope\""}},
		// The Rust SDK's shipped registration names its token with tokenRef: a reference
		// hookproxy cannot resolve is an error, never a silent acceptance.
		{desc: "tokenRef hookproxy cannot resolve", args: []string{"validate", "--config", writeFile("ref.yaml",
			"registration: ref.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n")},
			code: 1, stderr: []string{filepath.Join(dir, "ref.json") + ": hooks[0].authentication.tokenRef: secret reference scheme \"vault\" is not supported by hookproxy"}},
		{desc: "tokenRef to an environment variable", args: []string{"validate", "--config", writeFile("refenv.yaml",
			"registration: refenv.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n")}, code: 0,
			stdout: "policies in force: com.example.policy (http)"},
		{desc: "oauth interactive flow", args: []string{"validate", "--config", writeFile("pkce.yaml",
			"registration: pkce.json\nroutes:\n  - {prefix: /a, api: openai, upstream: https://a.example}\n")},
			code: 1, stderr: []string{filepath.Join(dir, "pkce.json") + ": hooks[0].authentication.flow: hookproxy runs unattended"}},
		{desc: "config problems", args: []string{"validate", "--config", writeFile("bad.yaml", "listn: x\nroutes:\n  - {prefix: a, api: openai, upstream: https://a.example}\n")},
			code: 1, stderr: []string{filepath.Join(dir, "bad.yaml") + ": listn: unknown key"}},
		{desc: "config validation problems", args: []string{"validate", "--config", writeFile("bad2.yaml", "routes:\n  - {prefix: a, api: x, upstream: https://a.example}\n")},
			code: 1, stderr: []string{filepath.Join(dir, "bad2.yaml") + ": routes[0].prefix: ", filepath.Join(dir, "bad2.yaml") + ": routes[0].api: "}},
		{desc: "missing config file", args: []string{"validate", "--config", filepath.Join(dir, "none.yaml")}, code: 1, stderr: []string{"no such file"}},
		{desc: "missing flag", args: []string{"validate"}, code: 2, stderr: []string{"--config FILE is required"}},
		{desc: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`}},
		{desc: "no command", args: nil, code: 2, stderr: []string{"usage: hookproxy"}},
	}
	writeFile("ip.json", `{"protocolVersion":"draft","hooks":[{"id":"dev.hookproxy.secrets","transport":{"type":"in_process","policy":"secrets"},"subscriptions":[{"events":["model.request.before"],"mode":"intercept","timeoutMs":500,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`)
	writeFile("ipbad.json", `{"protocolVersion":"draft","hooks":[{"id":"dev.hookproxy.x","transport":{"type":"in_process","policy":"nope"},"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":500,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`)
	authDoc := func(auth string) string {
		return `{"protocolVersion":"draft","hooks":[{"id":"com.example.policy","transport":{"type":"http","url":"https://policy.example.com/ahp"},"authentication":` + auth +
			`,"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":500,"failurePolicy":"fail-closed","content":{"default":"metadata"}}]}]}`
	}
	writeFile("ref.json", authDoc(`{"type":"bearer","tokenRef":"vault:ahp/policy-token"}`))
	writeFile("refenv.json", authDoc(`{"type":"bearer","tokenRef":"env:PATH"}`))
	writeFile("pkce.json", authDoc(`{"type":"oauth","issuer":"https://login.example.com","resource":"https://policy.example.com/ahp","clientId":"hookproxy","flow":"authorization_code_pkce"}`))
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, bin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout lacks %q: %q", tc.stdout, stdout)
			}
		})
	}
}

func TestCurrentVersionDefault(t *testing.T) {
	// A test binary carries no link-time version and a "(devel)" main module version.
	if v := currentVersion(); v != "dev" {
		t.Fatalf("currentVersion() = %q, want dev", v)
	}
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, &out); code != 0 || out.String() != "hookproxy dev\n" {
		t.Fatalf("run version = %d %q", code, out.String())
	}
}
