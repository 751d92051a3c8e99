//go:build unix

package agents

import (
	"os"
	"path/filepath"
	"testing"
)

const claudePkg = "@anthropic-ai/claude-code"

// claudeDestroy is the destructive command of turn 2: `rm -rf <victim>`. Claude Code runs
// it with permissions bypassed; it refuses by itself `rm -rf` of the working directory,
// its parents or HOME, and asks (so, in -p, refuses) `cd <dir> && rm -rf *`.
const claudeDestroy = "rm -rf"

// runClaude runs `claude -p PROMPT` against baseURL (the proxy's /anthropic route, or the
// imitation itself for the control) with a fake key, a temporary HOME, non-essential
// traffic and telemetry off, and permission checks bypassed, so that nothing but the
// proxy can stop a tool call.
func runClaude(t *testing.T, bin, baseURL string, s scratch, trap *egressTrap) result {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(baseEnv(home, trap),
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_API_KEY=sk-ant-api03-hookproxy-e2e-fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	)
	if os.Getuid() == 0 {
		// Claude Code refuses --dangerously-skip-permissions as root unless it is told it
		// runs in a sandbox (CI runs as root).
		env = append(env, "IS_SANDBOX=1")
	}
	args := []string{"-p", prompt(), "--dangerously-skip-permissions", "--max-turns", "8", "--output-format", "text"}
	res := runAgent(t, bin, args, env, s.work)
	t.Logf("claude exit %d after %s (timed out: %v)\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.elapsed.Round(1e6),
		res.timedOut, tail(res.stdout, 4<<10), tail(res.stderr, 4<<10))
	return res
}

// TestClaudeCode runs the Claude Code CLI, unmodified, through hookproxy (the embedded
// default chain plus the suite's rule, see registration), and as a control straight to
// the imitation.
func TestClaudeCode(t *testing.T) {
	bin := agentBin(t, "claude")
	version := checkVersion(t, bin, claudePkg)

	t.Run("control", func(t *testing.T) {
		s := newScratch(t)
		im := newImitation(t, s.script(claudeDestroy))
		trap := newEgressTrap(t)
		res := runClaude(t, bin, im.URL, s, trap)
		saveRecord(t, version, res, im, trap)
		checkControl(t, res, im, s)
		checkWithheldSentBack(t, im, redactedThinking)
		checkNoEgress(t, trap)
	})

	t.Run("proxied", func(t *testing.T) {
		s := newScratch(t)
		im := newImitation(t, s.script(claudeDestroy))
		trap := newEgressTrap(t)
		p := startProxy(t, im.URL, registration(t, s.victim))
		res := runClaude(t, bin, p.url+"/anthropic", s, trap)
		saveRecord(t, version, res, im, trap)
		checkProxied(t, res, im, s)
		checkWithheldSentBack(t, im, redactedThinking)
		checkNoEgress(t, trap)
	})
}
