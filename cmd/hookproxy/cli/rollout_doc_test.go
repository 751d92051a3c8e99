//go:build unix

package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// docStep is one `$ ` command of docs/rollout.md with what it printed and its status.
type docStep struct {
	cmd    string
	output string
	exit   int
}

var (
	docFileBlock    = regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```[a-z]*\n(.*?)\n```")
	docConsoleBlock = regexp.MustCompile("(?s)```console\n(.*?)\n```")
)

// TestRolloutWalkthrough runs docs/rollout.md literally: it writes the page's files into
// a directory and runs every `$ ` command of its console blocks, in order, in one sh with
// the real hookproxy (this test binary) and curl, only the loopback ports replaced by free
// ones. Then it checks what the page says happens: the capture round trip replays with no
// difference, the policy tests pass, the stricter candidate refuses exactly the Read call
// (the summary lines the page shows are the real ones), the shadow disagrees in the
// metrics and the audit log while the client still gets the call, and once enforced the
// call is gone (control: the captured answer had it).
func TestRolloutWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "rollout.md"))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for _, a := range []string{"127.0.0.1:8080", "127.0.0.1:9090", "127.0.0.1:8089"} {
		ports[a] = testsupport.FreeAddr(t)
	}
	local := func(s string) string {
		for from, to := range ports {
			s = strings.ReplaceAll(s, from, to)
		}
		return s
	}
	dir := t.TempDir()
	for _, m := range docFileBlock.FindAllStringSubmatch(string(doc), -1) {
		if err := os.WriteFile(filepath.Join(dir, m[1]), []byte(local(m[2])+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var cmds []string
	for _, m := range docConsoleBlock.FindAllStringSubmatch(string(doc), -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if c, ok := strings.CutPrefix(line, "$ "); ok {
				cmds = append(cmds, local(c))
			}
		}
	}
	var script strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&script, "echo '@@CMD %d'\n%s\necho \"@@EXIT %d $?\"\n", i, c, i)
	}
	// The page leaves the proxy and the imitation running; stop both so the shell exits.
	script.WriteString("kill $serve 2>/dev/null; wait $serve; kill 0\n")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", script.String())
	sh.Dir = dir
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(hookproxyBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	sh.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	err = sh.Run()
	if err != nil && strings.Contains(out.String(), "@@EXIT "+strconv.Itoa(len(cmds)-1)+" ") {
		err = nil // kill 0 ends the shell itself by signal, after the last command
	}
	if sh.Process != nil {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) // the fake model, anything left
	}
	if err != nil {
		t.Fatalf("the walk-through's script failed: %v\n%s", err, out.String())
	}

	steps := make([]docStep, len(cmds))
	for i := range steps {
		steps[i].cmd = cmds[i]
		steps[i].exit = -1
	}
	cur := -1
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "@@CMD "); ok {
			cur, _ = strconv.Atoi(strings.TrimSpace(rest))
			continue
		}
		if rest, ok := strings.CutPrefix(line, "@@EXIT "); ok {
			f := strings.Fields(rest)
			i, _ := strconv.Atoi(f[0])
			steps[i].exit, _ = strconv.Atoi(f[1])
			continue
		}
		if cur >= 0 {
			steps[cur].output += line
		}
	}
	find := func(prefix string, nth int) docStep {
		t.Helper()
		for _, s := range steps {
			if strings.HasPrefix(s.cmd, prefix) {
				if nth == 0 {
					return s
				}
				nth--
			}
		}
		t.Fatalf("the walk-through has no command %q", prefix)
		return docStep{}
	}
	fail := func(s docStep, what string) {
		t.Helper()
		t.Fatalf("%s\n$ %s\nexit %d\n%s\nwhole run:\n%s", what, s.cmd, s.exit, s.output, out.String())
	}
	summary := func(s docStep) string {
		var keep []string
		for _, l := range strings.Split(s.output, "\n") {
			if strings.Contains(l, " events replayed, ") || strings.HasPrefix(l, "recorded:") || strings.HasPrefix(l, "candidate:") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}

	captured := find("curl -s http://"+ports["127.0.0.1:8080"], 0)
	readCall, bashCall := `"name":"Read"`, `"name":"Bash"`
	if !strings.Contains(captured.output, readCall) || strings.Contains(captured.output, bashCall) {
		fail(captured, "the captured answer should keep the Read call and lose rm -rf")
	}
	same := find("hookproxy replay --capture capture --config hookproxy.yaml", 0)
	if same.exit != 0 || !strings.Contains(same.output, " 0 differ") || !strings.Contains(string(doc), summary(same)) {
		fail(same, "replaying the recording configuration: want exit 0, 0 differences, and the summary the page shows")
	}
	tests := find("hookproxy test policy-tests.yaml", 0)
	if tests.exit != 0 || !strings.Contains(tests.output, "3 passed, 0 failed") {
		fail(tests, "the policy tests should pass")
	}
	strict := find("hookproxy replay --capture capture --config hookproxy-strict.yaml", 0)
	if strict.exit != 1 || !strings.Contains(strict.output, " 1 differ") ||
		!regexp.MustCompile(`tool\.before +Read +forwarded → refused +would refuse the tool call \(org\.example\.no_reads\)`).MatchString(strict.output) ||
		!strings.Contains(string(doc), summary(strict)) {
		fail(strict, "replaying the stricter candidate: want exit 1, exactly the Read call refused, and the summary the page shows")
	}
	shadowed := find("curl -s http://"+ports["127.0.0.1:8080"], 2)
	if !strings.Contains(shadowed.output, readCall) {
		fail(shadowed, "in shadow, the client should still get the Read call")
	}
	metrics := find("until curl -s http://"+ports["127.0.0.1:9090"]+"/metrics", 0)
	if !strings.Contains(metrics.output, `hookproxy_shadow_disagreements_total{boundary="tool.before"} 1`) {
		fail(metrics, "the shadow's disagreement should be counted")
	}
	audited := find(`until grep '"differs":true' audit.jsonl`, 0)
	if !strings.Contains(audited.output, `"diff":"would refuse the tool call (org.example.no_reads)"`) ||
		!strings.Contains(audited.output, `"permission":"deny"`) || strings.Count(strings.TrimSpace(audited.output), "\n") != 0 {
		fail(audited, "the audit log should hold one shadow record, the deny of the Read call")
	}
	enforced := find("curl -s http://"+ports["127.0.0.1:8080"], 3)
	if strings.Contains(enforced.output, readCall) || strings.Contains(enforced.output, bashCall) || !strings.Contains(enforced.output, "chat.completion") {
		fail(enforced, "enforced, the answer should carry neither call")
	}
}
