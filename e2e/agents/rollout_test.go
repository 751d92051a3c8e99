//go:build unix

package agents

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/cmd/hookproxy/cli"
)

// replayReport is what `hookproxy replay --format json` prints.
type replayReport struct {
	Events      int `json:"events"`
	Differences []struct {
		Session, Boundary, Subject, EventID, Recorded, Candidate, Diff string
	} `json:"differences"`
	Totals struct {
		Recorded  map[string]int `json:"recorded"`
		Candidate map[string]int `json:"candidate"`
	} `json:"totals"`
}

func replayCapture(t *testing.T, captureDir, configPath string) (int, replayReport, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"replay", "--capture", captureDir, "--config", configPath, "--format", "json"}, nil, &out, &errOut)
	var rep replayReport
	if code != 2 {
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("replay output is not the JSON report: %v\n%s\n%s", err, out.String(), errOut.String())
		}
	}
	return code, rep, errOut.String()
}

// TestCaptureReplayRoundTrip captures each real agent's traffic (Claude Code, Codex, Gemini
// CLI) through hookproxy (capture.dir, redaction on by default), then replays it with
// `hookproxy replay`:
//   - with the same configuration, every event settles as recorded: 0 differences and
//     exit 0, although the capture holds no credential (the live chain redacted the AWS
//     keys; the replay stands made-up ones in for them, and the secrets policy rewrites
//     the same events again);
//   - with a stricter rule (reading notes.txt is refused), exactly the tool.before events
//     of that command differ, recorded forwarded → candidate refused, and exit 1.
func TestCaptureReplayRoundTrip(t *testing.T) {
	for _, a := range []struct {
		name, bin, pkg, destroy string
		run                     func(t *testing.T, bin, url string, s scratch, trap *egressTrap) result
	}{
		{name: "claude", bin: "claude", pkg: claudePkg, destroy: claudeDestroy, run: func(t *testing.T, bin, url string, s scratch, trap *egressTrap) result {
			return runClaude(t, bin, url+"/anthropic", s, trap)
		}},
		{name: "codex", bin: "codex", pkg: codexPkg, destroy: codexDestroy, run: func(t *testing.T, bin, url string, s scratch, trap *egressTrap) result {
			return runCodex(t, bin, codexCases[0].model, url+"/openai/v1", s, trap)
		}},
		{name: "gemini", bin: "gemini", pkg: geminiPkg, destroy: geminiDestroy, run: func(t *testing.T, bin, url string, s scratch, trap *egressTrap) result {
			return runGemini(t, bin, url+"/gemini", s, trap)
		}},
	} {
		t.Run(a.name, func(t *testing.T) {
			bin := agentBin(t, a.bin)
			checkVersion(t, bin, a.pkg)
			s := newScratch(t)
			im := newImitation(t, s.script(a.destroy))
			trap := newEgressTrap(t)
			reg := registration(t, s.victim)
			p := startProxyWith(t, im.URL, reg, "capture:\n  dir: capture\n")
			res := a.run(t, bin, p.url, s, trap)
			checkProxied(t, res, im, s)
			p.stop() // flushes the capture
			checkRoundTrip(t, p, reg)
		})
	}
}

// checkRoundTrip replays the capture of p, whose registration is reg.
func checkRoundTrip(t *testing.T, p *proxy, reg []byte) {
	t.Helper()

	captureDir := filepath.Join(p.dir, "capture")
	files, _ := filepath.Glob(filepath.Join(captureDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no capture file was written")
	}
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for _, key := range []string{promptKeyID, fileKeyID} {
		if bytes.Contains(all, []byte(key)) {
			t.Fatalf("the capture holds the credential %s", key)
		}
	}
	if !bytes.Contains(all, []byte("[CAPTURE-REDACTED-aws_access_key_id]")) {
		t.Fatal("control: the capture shows no redacted key, so the traffic held none and the check above proves nothing")
	}

	// The same configuration: nothing differs.
	cfgPath := filepath.Join(p.dir, "hookproxy.yaml")
	code, rep, stderr := replayCapture(t, captureDir, cfgPath)
	if code != 0 || len(rep.Differences) != 0 {
		t.Fatalf("replay with the recording configuration: exit %d, %d differences %+v\n%s", code, len(rep.Differences), rep.Differences, stderr)
	}
	if rep.Events == 0 || rep.Totals.Recorded["rewritten"] == 0 || !maps(rep.Totals.Recorded, rep.Totals.Candidate) {
		t.Fatalf("replay totals %+v: want events, some rewritten (the keys redacted), candidate equal to recorded", rep.Totals)
	}

	// A stricter rule: reading notes.txt is refused.
	readPattern := `\bcat\b[^\n]*notes\.txt`
	strict, err := sjson.SetBytes(reg, "hooks.0.transport.config.deny.-1", map[string]any{
		"name": "read_notes", "argument": "*", "pattern": readPattern,
		"reason": "Reading the deploy notes is blocked.", "code": "org.hookproxy.e2e.read_notes"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "hooks-strict.json"), strict, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(cfgPath)
	strictCfg := filepath.Join(p.dir, "hookproxy-strict.yaml")
	if err := os.WriteFile(strictCfg, bytes.Replace(cfg, []byte("registration: hooks.json"), []byte("registration: hooks-strict.json"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	// The expected calls, read from the capture itself: every tool.before whose input runs
	// the read command.
	re := regexp.MustCompile(readPattern)
	var want []string
	for _, line := range bytes.Split(bytes.TrimSpace(all), []byte("\n")) {
		var l struct {
			Boundary, EventID string
			Event             struct {
				Tool struct {
					Input json.RawMessage `json:"input"`
				} `json:"tool"`
			}
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		if l.Boundary == "tool.before" && re.Match(l.Event.Tool.Input) {
			want = append(want, l.EventID)
		}
	}
	if len(want) == 0 {
		t.Fatal("the capture holds no tool.before of the read command")
	}
	code, rep, stderr = replayCapture(t, captureDir, strictCfg)
	t.Logf("stricter replay: %d events, totals %+v, exit %d, differences %+v", rep.Events, rep.Totals, code, rep.Differences)
	var got []string
	for _, d := range rep.Differences {
		got = append(got, d.EventID)
		if d.Boundary != "tool.before" || d.Recorded != "forwarded" || d.Candidate != "refused" ||
			!strings.Contains(d.Diff, "would refuse the tool call (org.hookproxy.e2e.read_notes)") || d.Session == "" || d.Subject == "" {
			t.Errorf("difference %+v: want tool.before forwarded → refused by the new rule", d)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if code != 1 || !slices.Equal(got, want) {
		t.Fatalf("replay with the stricter rule: exit %d, differing events %v, want exit 1 and exactly %v\n%s", code, got, want, stderr)
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
