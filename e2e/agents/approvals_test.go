//go:build unix

package agents

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// Approvals with real agents: the tools policy asks for shell calls that run `git push`
// (action ask); the proxy holds the call while a person decides on the admin listener
// (POST /approvals/{id}). Approved, the push really happens; denied or expired, it does
// not and the agent is told why. The turn's text reaches the agent while the call is
// held: the upstream is gated after the call (it cannot finish its stream until the
// decision), and a recording relay between the agent and the proxy shows the text
// already went to the agent when the record is pending.

// gitScratch is a work tree with one commit and a bare remote beside it; pushCmd pushes
// to a branch of the remote that pushed() checks.
type gitScratch struct {
	scratch
	remote string
}

func newGitScratch(t *testing.T) gitScratch {
	t.Helper()
	s := gitScratch{scratch: newScratch(t)}
	s.remote = filepath.Join(filepath.Dir(s.work), "remote.git")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(cmd.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.invalid",
			"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.invalid", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "--bare", s.remote)
	git("-C", s.work, "init", "-q")
	git("-C", s.work, "add", "notes.txt")
	git("-C", s.work, "commit", "-q", "-m", "notes")
	return s
}

func (s gitScratch) pushCmd() string {
	return "git -C " + s.work + " push -q " + s.remote + " HEAD:refs/heads/approved"
}

func (s gitScratch) pushed() bool {
	return exec.Command("git", "--git-dir", s.remote, "rev-parse", "-q", "--verify", "refs/heads/approved").Run() == nil
}

// askRegistration is the suite's registration with one more tools rule: every shell call
// running git push asks.
func askRegistration(t *testing.T, victim string) []byte {
	t.Helper()
	reg, err := sjson.SetBytes(registration(t, victim), "hooks.0.transport.config.deny.-1",
		map[string]any{"name": "push", "command": "git", "inputPattern": "push", "action": "ask"})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// gate holds the upstream's stream after the turn-2 call until it is opened.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate  { return &gate{ch: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// gatedWriter blocks the write that would end a stream whose call is the destroy (here:
// push) call, until the gate opens.
type gatedWriter struct {
	http.ResponseWriter
	g    *gate
	seen bytes.Buffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.seen.Write(p)
	if bytes.Contains(w.seen.Bytes(), []byte(idDestroy)) && (bytes.Contains(p, []byte("message_delta")) ||
		bytes.Contains(p, []byte("response.completed"))) {
		<-w.g.ch
	}
	return w.ResponseWriter.Write(p)
}

func (w *gatedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func gatedUpstream(t *testing.T, im *imitation, g *gate) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		im.serve(&gatedWriter{ResponseWriter: w, g: g}, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.open)
	return srv.URL
}

// relay sits between the agent and the proxy and records what the proxy sent the agent.
type relay struct {
	*httptest.Server
	got testsupport.LockedBuffer
}

type teeBody struct {
	io.ReadCloser
	w io.Writer
}

func (b teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	_, _ = b.w.Write(p[:n])
	return n, err
}

func newRelay(t *testing.T, target string) *relay {
	u, _ := url.Parse(target)
	rl := &relay{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(resp *http.Response) error {
		resp.Body = teeBody{resp.Body, &rl.got}
		return nil
	}
	rl.Server = httptest.NewServer(rp)
	t.Cleanup(rl.Close)
	return rl
}

type approvalRecord struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	DecidedBy string `json:"decidedBy"`
	Reason    string `json:"reason"`
	Tool      struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"tool"`
}

// decider answers every pending approval of p with decision ("" lets them expire), after
// checking with check (the text reached the agent). It opens the gate once the first
// record is decided or expired. The records it returns are those a decision or the
// timeout settled, in order: a record whose request the agent abandoned says nothing
// about the decision under test (Claude Code, on a busy machine, has cancelled its
// request right after the call was held and retried it; the retry's call is asked
// again), so it is logged and left out.
func decider(t *testing.T, p *proxy, decision string, g *gate, check func(approvalRecord)) (stop func() []approvalRecord) {
	done := make(chan struct{})
	var mu sync.Mutex
	var seen []approvalRecord
	go func() {
		decided := map[string]bool{}
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := http.Get(p.admin + "/approvals?state=all")
			if err != nil {
				continue
			}
			var recs []approvalRecord
			_ = json.NewDecoder(resp.Body).Decode(&recs)
			resp.Body.Close()
			for _, r := range recs {
				if decided[r.ID] {
					continue
				}
				if r.State != "pending" {
					decided[r.ID] = true
					g.open()
					if r.State == "expired" && r.Reason == approvals.AbandonedReason {
						t.Logf("approval %s expired: the agent abandoned its request before a decision", r.ID)
						continue
					}
					mu.Lock()
					seen = append(seen, r)
					mu.Unlock()
					continue
				}
				if decision == "" {
					continue
				}
				if check != nil {
					check(r)
				}
				body := `{"decision":"` + decision + `","reason":"e2e decision"}`
				if dr, err := http.Post(p.admin+"/approvals/"+r.ID, "application/json", strings.NewReader(body)); err == nil {
					dr.Body.Close()
					if dr.StatusCode != http.StatusOK {
						t.Errorf("POST /approvals/%s: %d", r.ID, dr.StatusCode)
					}
				}
			}
		}
	}()
	return func() []approvalRecord {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		return append([]approvalRecord(nil), seen...)
	}
}

func TestClaudeCodeApprovals(t *testing.T) {
	bin := agentBin(t, "claude")
	version := checkVersion(t, bin, claudePkg)
	for _, tc := range []struct {
		name, decision, timeout string
		pushed                  bool
		told                    string
	}{
		{"approved", "approve", "60s", true, ""},
		{"denied", "deny", "60s", false, "was denied by loopback: e2e decision"},
		{"expired", "", "3s", false, "approval timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newGitScratch(t)
			sc := s.script(claudeDestroy)
			sc.destroyCmd = s.pushCmd()
			im := newImitation(t, sc)
			g := newGate()
			trap := newEgressTrap(t)
			p := startProxy(t, gatedUpstream(t, im, g), askRegistration(t, s.victim), "approvals:\n  timeout: "+tc.timeout+"\n")
			rl := newRelay(t, p.url)
			text := split3("Now I'll clean up the scratch directory.")
			var textWhileHeld bool
			stop := decider(t, p, tc.decision, g, func(r approvalRecord) {
				got := rl.got.String()
				textWhileHeld = !strings.Contains(got, idDestroy)
				for _, part := range text {
					textWhileHeld = textWhileHeld && strings.Contains(got, part)
				}
			})
			res := runClaude(t, bin, rl.URL+"/anthropic", s.scratch, trap)
			recs := stop()
			saveRecord(t, version, res, im, trap)
			if len(recs) == 0 || recs[0].Tool.Name != "Bash" || !strings.Contains(string(recs[0].Tool.Input), "push") {
				t.Fatalf("approval records %+v", recs)
			}
			if s.pushed() != tc.pushed {
				t.Errorf("pushed = %v, want %v", s.pushed(), tc.pushed)
			}
			if res.exitCode != 0 || res.timedOut {
				t.Errorf("claude exit %d (timed out %v)", res.exitCode, res.timedOut)
			}
			if tc.pushed && !strings.Contains(res.stdout, finalText) {
				t.Errorf("approved: the conversation did not finish:\n%s", tail(res.stdout, 2<<10))
			}
			if tc.told != "" && !strings.Contains(res.stdout, tc.told) {
				t.Errorf("the agent was not told %q:\n%s", tc.told, tail(res.stdout, 2<<10))
			}
			if tc.decision != "" && !textWhileHeld {
				t.Errorf("the turn's text had not reached the agent while the call was held:\n%s", tail(rl.got.String(), 4<<10))
			}
			want := map[string]string{"approve": "approved", "deny": "denied", "": "expired"}[tc.decision]
			if recs[0].State != want || !strings.Contains(p.auditLog(), `"approval":{"id":"`+recs[0].ID+`","decision":"`+want+`"`) {
				t.Errorf("record %+v; audit:\n%s", recs[0], tail(p.auditLog(), 4<<10))
			}
		})
	}
}

func TestCodexApprovals(t *testing.T) {
	bin := agentBin(t, "codex")
	version := checkVersion(t, bin, codexPkg)
	c := codexCases[0]
	for _, tc := range []struct {
		name, decision, timeout string
		pushed                  bool
		told                    string
	}{
		{"approved", "approve", "60s", true, ""},
		{"denied", "deny", "60s", false, "was denied by loopback: e2e decision"},
		{"expired", "", "3s", false, "was not run: approval timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newGitScratch(t)
			sc := s.script(codexDestroy)
			sc.destroyCmd = s.pushCmd()
			im := newImitation(t, sc)
			g := newGate()
			trap := newEgressTrap(t)
			p := startProxy(t, gatedUpstream(t, im, g), askRegistration(t, s.victim), "approvals:\n  timeout: "+tc.timeout+"\n")
			stop := decider(t, p, tc.decision, g, nil)
			res := runCodex(t, bin, c.model, p.url+"/openai/v1", s.scratch, trap)
			recs := stop()
			saveRecord(t, version, res, im, trap)
			if len(recs) == 0 || !strings.Contains(string(recs[0].Tool.Input), "push") {
				t.Fatalf("approval records %+v", recs)
			}
			if s.pushed() != tc.pushed {
				t.Errorf("pushed = %v, want %v", s.pushed(), tc.pushed)
			}
			if res.exitCode != 0 || res.timedOut {
				t.Errorf("codex exit %d (timed out %v)", res.exitCode, res.timedOut)
			}
			if tc.pushed != answered(im.requests(), answerFinal) {
				t.Errorf("final turn reached = %v, want %v (turns %v)", !tc.pushed, tc.pushed, turns(im.requests()))
			}
			if tc.told != "" && !strings.Contains(res.stdout, tc.told) {
				t.Errorf("the agent was not told %q:\n%s", tc.told, tail(res.stdout, 2<<10))
			}
			want := map[string]string{"approve": "approved", "deny": "denied", "": "expired"}[tc.decision]
			if recs[0].State != want || !strings.Contains(p.auditLog(), `"approval":{"id":"`+recs[0].ID+`","decision":"`+want+`"`) {
				t.Errorf("record %+v; audit:\n%s", recs[0], tail(p.auditLog(), 4<<10))
			}
		})
	}
}
