//go:build unix

package agents

import (
	"strings"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/config"
)

// Allow-list mode with the real agents: the tools policy lets only `cat` run. Turn 1's
// `cat notes.txt` runs (the agent reads the file, so turn 2 is reached), turn 2's
// `rm -r(f) <victim>` is refused — by no deny rule, only by not being listed — and the
// agent shows the reason, which names the command.

// allowListReason is what the refusal says; the command it names follows the backtick.
const allowListReason = "is not in the list of allowed commands"

// registrationAllowList is the embedded default registration with the tools policy in
// allow-list mode (allowCommands: cat), its destructive list kept.
func registrationAllowList(t *testing.T) []byte {
	t.Helper()
	reg, err := sjson.SetRawBytes(config.DefaultRegistration, "hooks.0.transport.config",
		[]byte(`{"destructive": true, "allowCommands": [{"command": "cat"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func checkAllowList(t *testing.T, res result, s scratch) {
	t.Helper()
	if !strings.Contains(res.stdout, "`rm -r") || !strings.Contains(res.stdout, s.victim) {
		t.Errorf("the refusal the agent shows does not name the command:\n%s", tail(res.stdout, 2<<10))
	}
}

func TestClaudeCodeAllowList(t *testing.T) {
	bin := agentBin(t, "claude")
	version := checkVersion(t, bin, claudePkg)
	s := newScratch(t)
	im := newImitation(t, s.script(claudeDestroy))
	trap := newEgressTrap(t)
	p := startProxy(t, im.URL, registrationAllowList(t))
	res := runClaude(t, bin, p.url+"/anthropic", s, trap)
	saveRecord(t, version, res, im, trap)
	checkRefused(t, res, im, s, allowListReason)
	checkAllowList(t, res, s)
	checkNoEgress(t, trap)
}

func TestCodexAllowList(t *testing.T) {
	bin := agentBin(t, "codex")
	version := checkVersion(t, bin, codexPkg)
	for _, c := range codexCases {
		t.Run(c.name, func(t *testing.T) {
			s := newScratch(t)
			im := newImitation(t, s.script(codexDestroy))
			trap := newEgressTrap(t)
			p := startProxy(t, im.URL, registrationAllowList(t))
			res := runCodex(t, bin, c.model, p.url+"/openai/v1", s, trap)
			saveRecord(t, version, res, im, trap)
			checkRefused(t, res, im, s, allowListReason)
			checkAllowList(t, res, s)
			checkShellTool(t, im, c.wantTool)
			checkNoEgress(t, trap)
		})
	}
}
