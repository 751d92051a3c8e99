//go:build unix

package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const codexPkg = "@openai/codex"

// codexDestroy is the destructive command of turn 2. Codex rejects `rm -f` forms by
// itself, even with approvals off and no sandbox ("rm -f style commands are not
// permitted"), so the call is a recursive rm without -f, which it runs.
const codexDestroy = "rm -r"

// codexCase is one Codex configuration. Codex shapes its requests by model: gpt-5.5
// declares function tools in `tools` (exec_command for the shell, a freeform apply_patch
// custom tool) and, with supports_websockets, first tries a WebSocket on GET
// /v1/responses; the version's default model (no `model` set; gpt-6.2-sol in 0.171.0)
// sends "responses lite" requests whose tools travel in an `additional_tools` input item,
// and reaches the shell only through a freeform `exec` custom tool that runs JavaScript
// calling tools.exec_command.
type codexCase struct {
	name  string
	model string // "" = the version's default
	// wantTool is how the imitation expects to send the shell call.
	wantTool string
}

var codexCases = []codexCase{
	{name: "gpt-5.5", model: "gpt-5.5", wantTool: "function_call exec_command"},
	{name: "default-model", wantTool: "custom_tool_call exec (JavaScript calling tools.exec_command)"},
}

// codexConfig is CODEX_HOME/config.toml: a custom model provider at baseURL (the proxy's
// /openai/v1, or the imitation's /v1 for the control) speaking the Responses API with a
// fake key from the environment, no approvals and no sandbox (so that nothing but the
// proxy can stop a command), no update check, analytics or feedback, no plugins (their
// sync is what reaches github.com, api.github.com and chatgpt.com otherwise), and one
// retry so a failing request costs seconds, not minutes.
func codexConfig(model, baseURL string) string {
	var b strings.Builder
	if model != "" {
		b.WriteString("model = \"" + model + "\"\n")
	}
	b.WriteString(`model_provider = "hookproxy"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.hookproxy]
name = "hookproxy"
base_url = "` + baseURL + `"
wire_api = "responses"
env_key = "HOOKPROXY_E2E_OPENAI_KEY"
supports_websockets = true
request_max_retries = 1
stream_max_retries = 1

[features]
plugins = false
`)
	return b.String()
}

// runCodex runs `codex exec PROMPT` in the scratch work directory.
func runCodex(t *testing.T, bin, model, baseURL string, s scratch, trap *egressTrap) result {
	t.Helper()
	root := t.TempDir()
	home, codexHome := filepath.Join(root, "home"), filepath.Join(root, "codex-home")
	for _, d := range []string{home, codexHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(model, baseURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(baseEnv(home, trap), "CODEX_HOME="+codexHome, "HOOKPROXY_E2E_OPENAI_KEY=sk-proj-hookproxy-e2e-fake-key")
	args := []string{"exec", "--skip-git-repo-check", "--color", "never", "-C", s.work, prompt()}
	res := runAgent(t, bin, args, env, s.work)
	t.Logf("codex exit %d after %s (timed out: %v)\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.elapsed.Round(1e6),
		res.timedOut, tail(res.stdout, 4<<10), tail(res.stderr, 4<<10))
	return res
}

// TestCodex runs the Codex CLI, unmodified, through hookproxy (the embedded default chain
// plus the suite's rule, see registration), and as a control straight to the imitation,
// for each codexCase.
func TestCodex(t *testing.T) {
	bin := agentBin(t, "codex")
	version := checkVersion(t, bin, codexPkg)
	for _, c := range codexCases {
		t.Run(c.name, func(t *testing.T) {
			t.Run("control", func(t *testing.T) {
				s := newScratch(t)
				im := newImitation(t, s.script(codexDestroy))
				trap := newEgressTrap(t)
				res := runCodex(t, bin, c.model, im.URL+"/v1", s, trap)
				saveRecord(t, version, res, im, trap)
				checkControl(t, res, im, s)
				checkShellTool(t, im, c.wantTool)
				checkWithheldSentBack(t, im, encryptedReasoning)
				checkNoEgress(t, trap)
			})
			t.Run("proxied", func(t *testing.T) {
				s := newScratch(t)
				im := newImitation(t, s.script(codexDestroy))
				trap := newEgressTrap(t)
				p := startProxy(t, im.URL, registration(t, s.victim))
				res := runCodex(t, bin, c.model, p.url+"/openai/v1", s, trap)
				saveRecord(t, version, res, im, trap)
				checkProxied(t, res, im, s)
				checkShellTool(t, im, c.wantTool)
				checkWithheldSentBack(t, im, encryptedReasoning)
				// Codex tries a WebSocket on GET /v1/responses before it POSTs. A proxy that
				// cannot enforce hooks on a WebSocket must answer the upgrade itself (426, so
				// Codex falls back to HTTP at once), never forward it.
				for _, r := range im.requests() {
					if r.Answer == "websocket refused" {
						t.Errorf("the upstream received a WebSocket upgrade through the proxy: %s %s", r.Method, r.URI)
						break
					}
				}
				// And it falls back at once: no "Reconnecting" retries of the WebSocket.
				if strings.Contains(res.stdout+res.stderr, "Reconnecting") {
					t.Errorf("codex reconnected instead of falling back to HTTP:\n%s", tail(res.stderr, 2<<10))
				}
			})
		})
	}
}

// checkShellTool checks that the imitation found the shell tool it expected in what
// Codex declared (so a change in Codex's tool set shows as such, not as a policy miss).
func checkShellTool(t *testing.T, im *imitation, want string) {
	t.Helper()
	for _, r := range im.requests() {
		if r.Answer == answerRead || r.Answer == answerDestroy {
			if r.Tool != want {
				t.Errorf("shell call sent as %q, want %q (Codex declared other tools than expected)", r.Tool, want)
			}
			return
		}
	}
}
