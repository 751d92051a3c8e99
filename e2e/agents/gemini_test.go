//go:build unix

package agents

import (
	"os"
	"path/filepath"
	"testing"
)

const geminiPkg = "@google/gemini-cli"

// geminiDestroy is the destructive command of turn 2.
const geminiDestroy = "rm -rf"

// geminiSettings is HOME/.gemini/settings.json: API-key authentication, no sandbox, no
// folder-trust prompt, and nothing that reaches another host on its own — no update check
// or notification, no usage statistics, no telemetry.
const geminiSettings = `{
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
  "tools": {"sandbox": false}
}
`

// runGemini runs `gemini -p PROMPT` against baseURL (the proxy's /gemini route, or the
// imitation itself for the control) with a fake API key, a temporary HOME and every tool
// call approved (--approval-mode yolo), so that nothing but the proxy can stop one.
func runGemini(t *testing.T, bin, baseURL string, s scratch, trap *egressTrap) result {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(geminiSettings), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(baseEnv(home, trap),
		"GOOGLE_GEMINI_BASE_URL="+baseURL,
		"GEMINI_API_KEY=AIzaSy-hookproxy-e2e-fake-key",
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		"GEMINI_SANDBOX=false",
		"GEMINI_TELEMETRY_ENABLED=false",
		"GEMINI_CLI_NO_RELAUNCH=true",
		"CI=1",
	)
	args := []string{"-p", prompt(), "--approval-mode", "yolo", "--output-format", "text"}
	res := runAgent(t, bin, args, env, s.work)
	t.Logf("gemini exit %d after %s (timed out: %v)\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.elapsed.Round(1e6),
		res.timedOut, tail(res.stdout, 4<<10), tail(res.stderr, 4<<10))
	return res
}

// TestGeminiCLI runs the Gemini CLI, unmodified, through hookproxy's /gemini route (the
// embedded default chain plus the suite's rule, see registration), and as a control
// straight to the imitation.
func TestGeminiCLI(t *testing.T) {
	bin := agentBin(t, "gemini")
	version := checkVersion(t, bin, geminiPkg)

	t.Run("control", func(t *testing.T) {
		s := newScratch(t)
		im := newImitation(t, s.script(geminiDestroy))
		trap := newEgressTrap(t)
		res := runGemini(t, bin, im.URL, s, trap)
		saveRecord(t, version, res, im, trap)
		checkControl(t, res, im, s)
		checkNoEgress(t, trap)
	})

	t.Run("proxied", func(t *testing.T) {
		s := newScratch(t)
		im := newImitation(t, s.script(geminiDestroy))
		trap := newEgressTrap(t)
		p := startProxy(t, im.URL, registration(t, s.victim))
		res := runGemini(t, bin, p.url+"/gemini", s, trap)
		saveRecord(t, version, res, im, trap)
		checkProxied(t, res, im, s)
		checkNoEgress(t, trap)
	})
}
