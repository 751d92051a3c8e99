package policies

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Real bash as the oracle of the command-model corpus: each form runs under bash with its
// placeholder target replaced by a throw-away directory, and the test records whether the
// directory's files are gone. Nothing outside a fresh temporary directory can be reached,
// by construction:
//
//   - a form is refused before it runs unless every path in its text (after substitution)
//     lies inside that directory (or is /dev/null, /bin/rm, /bin/sh), and it holds no "..",
//     no ~user, no escape sequence that spells something other than a letter or digit, no
//     parameter operation (${X%...}), no variable but a short list, and no dirname,
//     realpath or readlink;
//   - bash runs as the unprivileged user nobody (the test needs root to switch to it — CI
//     runs as root — and skips otherwise), which owns nothing outside the directory;
//   - its working directory and HOME are inside the directory, its environment is only
//     HOME, PWD-free PATH and TMPDIR, and PATH starts with stubs for sudo, doas, su, ssh,
//     chroot (and busybox when it is not installed) that only exec their command;
//   - each run has a 10 s bound and its whole process group is killed at the end.

const nobodyID = 65534

// oracleStubs replace the wrappers that cannot or must not run here; each only runs its
// command (as the same unprivileged user).
var oracleStubs = map[string]string{
	"sudo": `while [ $# -gt 0 ]; do case "$1" in
  --) shift; break;;
  -[ugpCDrtTUhR]) shift 2;;
  --*=*|-[A-Za-z]*) shift;;
  [A-Za-z_]*=*) export "$1"; shift;;
  *) break;;
esac; done
exec "$@"`,
	"doas": `while [ $# -gt 0 ]; do case "$1" in
  --) shift; break;; -[uC]) shift 2;; -*) shift;; *) break;; esac; done
exec "$@"`,
	"su": `cmd=
while [ $# -gt 0 ]; do case "$1" in
  -c) cmd="$2"; shift 2;; --command=*) cmd="${1#--command=}"; shift;;
  -[sgGw]) shift 2;; -*|-) shift;; *) shift;; esac; done
if [ -n "$cmd" ]; then exec /bin/bash -c "$cmd"; fi
exec /bin/bash`,
	"ssh": `host=
while [ $# -gt 0 ]; do case "$1" in
  --) shift; break;;
  -[bcDEeFIiJLlmOopQRSWw]) shift 2;;
  -*) shift;;
  *) if [ -z "$host" ]; then host="$1"; shift; else break; fi;;
esac; done
if [ $# -gt 0 ]; then exec /bin/bash -c "$*"; fi
exec /bin/bash`,
	"chroot": `while [ $# -gt 0 ]; do case "$1" in --*) shift;; *) break;; esac; done
shift
if [ $# -gt 0 ]; then exec "$@"; fi
exec /bin/bash`,
}

var (
	oracleVar     = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	oracleBrace   = regexp.MustCompile(`\$\{`)
	oracleBraceOK = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(\[@\])?\}`)
	oracleEscape  = regexp.MustCompile(`\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8})`)
	oracleRel     = regexp.MustCompile(`(^|[\s'"(=])(\./|~/)[^\s'"();&|<>]*`)
	oracleVars    = map[string]bool{"HOME": true, "PWD": true, "X": true, "d": true, "a": true, "b": true, "R": true, "F": true, "readme": true, "cmd": true}
)

// oracleUnsafe says why a form's text (placeholders substituted, base64 decoded) could
// reach outside box, or "" when every path in it is inside.
func oracleUnsafe(text, box string) string {
	if strings.Contains(text, "..") {
		return `contains ".."`
	}
	if regexp.MustCompile(`~[A-Za-z0-9_+-]`).MatchString(text) {
		return "names another user's home or the directory stack"
	}
	for _, m := range oracleEscape.FindAllString(text, -1) {
		base, digits := 8, m[1:]
		switch m[1] {
		case 'x', 'u', 'U':
			base, digits = 16, m[2:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		r := rune(v)
		if err != nil || !(r == 0 || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "escape sequence " + m + " may spell a path"
		}
	}
	if len(oracleBrace.FindAllString(text, -1)) != len(oracleBraceOK.FindAllString(text, -1)) {
		return "parameter operation"
	}
	for _, m := range oracleVar.FindAllStringSubmatch(text, -1) {
		if !oracleVars[m[1]] {
			return "variable $" + m[1]
		}
	}
	for _, w := range []string{"dirname", "realpath", "readlink", "OLDPWD", "cd -"} {
		if strings.Contains(text, w) {
			return "uses " + w
		}
	}
	return slashOutside(text, box)
}

// slashOutside checks that every "/" in text belongs to a path under box, a relative
// path in the working directory or home (./x, ~/x), or /dev/null, /bin/rm, /bin/sh.
func slashOutside(text, box string) string {
	s := text
	for _, ok := range []string{"/dev/null", "/bin/rm", "/bin/sh"} {
		s = strings.ReplaceAll(s, ok, "")
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], box) && (i+len(box) == len(s) || s[i+len(box)] == '/' || !isPathByte(s[i+len(box)])) {
			i += len(box)
			for i < len(s) && isPathByte(s[i]) {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	rest := oracleRel.ReplaceAllString(b.String(), "$1")
	if strings.Contains(rest, "/") {
		return fmt.Sprintf("a path outside the oracle's directory: %q", rest)
	}
	return ""
}

func isPathByte(c byte) bool {
	return c == '/' || c == '.' || c == '_' || c == '-' || c == '*' || c == '{' || c == '}' || c == ',' || c == '[' || c == ']' || c == '!' ||
		c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// oracleFiles are seeded in the target; a form deletes the target when none is left
// intact.
var oracleFiles = []string{"a.txt", "sub/b.txt", "sub/deeper/c.txt"}

type oracle struct {
	root, bash, path string
}

func newOracle(t *testing.T) *oracle {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("the oracle runs forms as the unprivileged user nobody and needs root to switch to it (CI runs as root)")
	}
	root, err := os.MkdirTemp("", "hookproxy-oracle-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	stubs := filepath.Join(root, "bin")
	if err := os.Mkdir(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{}
	for k, v := range oracleStubs {
		all[k] = v
	}
	if _, err := exec.LookPath("busybox"); err != nil {
		all["busybox"] = `exec "$@"`
	}
	for name, body := range all {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &oracle{root: root, bash: bash, path: stubs + ":/usr/bin:/bin"}
}

// run runs one form and reports whether it deleted its target. home: the placeholder is
// ~ and HOME is the target.
func (o *oracle) run(t *testing.T, n int, form string, home bool) (bool, error) {
	box := filepath.Join(o.root, fmt.Sprintf("b%d", n))
	target := filepath.Join(box, "target")
	work := filepath.Join(box, "work")
	for _, d := range []string{box, target, filepath.Join(target, "sub", "deeper"), work, filepath.Join(box, "home"), filepath.Join(box, "tmp"), filepath.Join(box, "keep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return false, err
		}
	}
	defer os.RemoveAll(box)
	for _, f := range append(oracleFiles, "../keep/k.txt") {
		if err := os.WriteFile(filepath.Join(target, f), []byte("seed "+f+"\n"), 0o644); err != nil {
			return false, err
		}
	}
	if err := filepath.Walk(box, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobodyID, nobodyID)
	}); err != nil {
		return false, err
	}
	placeholder, homeDir := target, filepath.Join(box, "home")
	if home {
		placeholder, homeDir = "~", target
	}
	if why := oracleUnsafe(instantiate(form, placeholder, work, true), box); why != "" {
		return false, errors.New("refused to run: " + why)
	}
	script := instantiate(form, placeholder, work, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.bash, "-c", script)
	cmd.Dir = work
	cmd.Env = []string{"HOME=" + homeDir, "PATH=" + o.path, "TMPDIR=" + filepath.Join(box, "tmp"), "LANG=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, _ := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("timed out: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(box, "keep", "k.txt")); err != nil || string(b) != "seed ../keep/k.txt\n" {
		return false, fmt.Errorf("reached outside its target: %s", out)
	}
	for _, f := range oracleFiles {
		if b, err := os.ReadFile(filepath.Join(target, f)); err == nil && string(b) == "seed "+f+"\n" {
			return false, nil
		}
	}
	return true, nil
}

// TestShellOracle runs every corpus form under real bash and checks its labels; with
// HOOKPROXY_UPDATE_CORPUS=1 it rewrites them instead.
func TestShellOracle(t *testing.T) {
	o := newOracle(t)
	forms := readShellCorpus(t)
	update := os.Getenv("HOOKPROXY_UPDATE_CORPUS") == "1"
	labels := make([]string, len(forms))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f := forms[i]
				got := []byte("KK")
				for k, home := range []bool{false, true} {
					del, err := o.run(t, 2*i+k, f.text, home)
					if err != nil {
						t.Errorf("%s:%d: %v: %q", shellCorpusPath, f.line, err, f.text)
					}
					if del {
						got[k] = 'D'
					}
				}
				labels[i] = string(got)
			}
		}()
	}
	for i := range forms {
		next <- i
	}
	close(next)
	wg.Wait()
	deleting := 0
	for i, f := range forms {
		if strings.Contains(labels[i], "D") {
			deleting++
		}
		if !update && labels[i] != f.labels {
			t.Errorf("%s:%d: bash says %s, the corpus %s: %q", shellCorpusPath, f.line, labels[i], f.labels, f.text)
		}
	}
	t.Logf("bash oracle: %d forms, %d delete their target", len(forms), deleting)
	if update {
		b, err := os.ReadFile(shellCorpusPath)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, f := range forms {
			lines[f.line-1] = labels[i] + "\t" + f.text
		}
		if err := os.WriteFile(shellCorpusPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOracleRefusesEscapes(t *testing.T) {
	box := "/tmp/hookproxy-oracle-x/b1"
	for _, s := range []string{"rm -rf /", "rm -rf " + box + "/../..", "rm -rf $'\\x2f'", "rm -rf ~root", "cd /; rm -rf *",
		"rm -rf $UNSET/", "rm -rf ${HOME%%t*}", "rm -rf $(dirname $PWD)", "rm -rf \"$PATH\"", "rm -rf /tmp" + box} {
		if oracleUnsafe(s, box) == "" {
			t.Errorf("oracle would run %q", s)
		}
	}
	for _, s := range []string{"rm -rf " + box + "/target", "cd " + box + "/target && rm -rf ./*", "rm -rf ~/*", "echo x 2>/dev/null", "$'\\x72m' -rf ~"} {
		if why := oracleUnsafe(s, box); why != "" {
			t.Errorf("oracle refuses %q: %s", s, why)
		}
	}
}
