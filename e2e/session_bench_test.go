package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAgentSession measures what a coding agent's session costs the proxy, turn by
// turn: Claude-Code-shaped Anthropic Messages requests (the messages array second, as
// Claude Code writes it, then a ~12 KB system prompt in two cached blocks, ~35 KB of tool
// definitions, metadata.user_id naming the session) whose
// history grows by one turn per request (the model's text and tool_use, then a tool_result
// of ~2 KB of text no earlier turn held). Each session runs T turns; N sessions run one
// after another, each request sent to two `hookproxy serve` processes built from this
// tree, alternating which goes first:
//   - none: `registration: none` (pass-through);
//   - default: the embedded default chain (tools at tool.before, secrets at
//     model.request.before, tool.before and tool.after), as `hookproxy serve` runs it
//     without a registration key.
//
// CPU is each proxy process's own (the sum of its threads' run time from
// /proc/PID/task/*/schedstat, nanosecond resolution), read before and after each request:
// client and upstream live in the benchmark process and are not counted. Reported:
// per-turn CPU of each proxy at turns 1, 10, 40, 80, 120 and 160 (each the mean over the
// N sessions of the 10-turn window ending there, so that garbage collection, which lands
// on whichever request runs when it does, is spread as it is paid), the ratio default/none over the first 120
// turns of every session, and the default chain's turn-160 / turn-10 ratio (flatness), also
// less the pass-through's own growth over those turns (the forwarding of the bytes).
// Linux only. Run with -benchtime 1x; HOOKPROXY_SESSION_TURNS and HOOKPROXY_SESSIONS
// change T (160) and N (4).
//
// HOOKPROXY_SESSION_BASE names another hookproxy binary (a build of an earlier commit): it
// runs as a third process, "base", with the embedded default chain, and gets every request
// too (the three take turns at going first). It reports base's figures and default/base
// over 120 and 160 turns: two builds compared on the same requests in the same minutes,
// which the machine's drift between two runs (±10 % on the ratio here) does not blur.
func BenchmarkAgentSession(b *testing.B) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		b.Skip("needs /proc (Linux)")
	}
	turns, sessions := envInt("HOOKPROXY_SESSION_TURNS", 160), envInt("HOOKPROXY_SESSIONS", 4)
	bin := buildHookproxy(b)
	up := newSessionUpstream(b)
	modes := []string{"none", "default"}
	baseBin := os.Getenv("HOOKPROXY_SESSION_BASE")
	if baseBin != "" {
		modes = append(modes, "base")
	}
	procs := make([]*serveProcess, len(modes))
	for i, m := range modes {
		reg, exe := "", bin
		switch m {
		case "none":
			reg = "registration: none\n"
		case "base":
			exe = baseBin
		}
		procs[i] = startServe(b, exe, up.URL, reg)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, WriteBufferSize: 64 << 10}}
	send := func(p *serveProcess, body []byte) time.Duration {
		before := p.cpu(b)
		req, _ := http.NewRequest(http.MethodPost, p.base+"/anthropic/v1/messages", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", anthropicKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"tool_use"`)) {
			b.Fatalf("%s: status %d: %.300s", p.base, resp.StatusCode, out)
		}
		// The proxy's last work on a request (logging, releasing buffers) may follow the
		// response's last byte by a little: let it finish before reading the clock.
		time.Sleep(200 * time.Microsecond)
		return p.cpu(b) - before
	}
	// cpu[mode][session][turn]
	cpu := make([][][]time.Duration, len(modes))
	for m := range cpu {
		cpu[m] = make([][]time.Duration, sessions)
	}
	var size1, sizeT int
	for b.Loop() {
		for s := 0; s < sessions; s++ {
			conv := newAgentConversation(s)
			for m := range modes {
				cpu[m][s] = make([]time.Duration, turns)
			}
			for t := 0; t < turns; t++ {
				body := conv.request()
				if t == 0 {
					size1 = len(body)
				}
				sizeT = len(body)
				first := t % len(modes)
				for k := range modes {
					m := (first + k) % len(modes)
					cpu[m][s][t] = send(procs[m], body)
				}
				conv.advance()
			}
		}
	}
	at := func(m, turn int) float64 { // mean over sessions of the 10-turn window ending at turn
		var sum time.Duration
		lo := max(turn-10, 0)
		for s := 0; s < sessions; s++ {
			for t := lo; t < turn; t++ {
				sum += cpu[m][s][t]
			}
		}
		return float64(sum.Nanoseconds()) / float64(sessions*(turn-lo)) / 1e3
	}
	for _, turn := range []int{1, 10, 40, 80, 120, 160} {
		if turn > turns {
			continue
		}
		for m, name := range modes {
			b.ReportMetric(at(m, turn), fmt.Sprintf("%s-t%d-µs", name, turn))
		}
	}
	total := func(m, n int) time.Duration {
		var sum time.Duration
		for s := 0; s < sessions; s++ {
			for t := 0; t < min(n, turns); t++ {
				sum += cpu[m][s][t]
			}
		}
		return sum
	}
	b.ReportMetric(float64(total(1, 120))/float64(total(0, 120)), "default/none-120")
	if baseBin != "" {
		b.ReportMetric(float64(total(2, 120))/float64(total(0, 120)), "base/none-120")
		b.ReportMetric(float64(total(1, 120))/float64(total(2, 120)), "default/base-120")
		b.ReportMetric(float64(total(1, turns))/float64(total(2, turns)), fmt.Sprintf("default/base-%d", turns))
	}
	if turns >= 160 {
		b.ReportMetric(at(1, 160)/at(1, 10), "default-t160/t10")
		// Flatness apart from the forwarding of the bytes themselves: the default proxy's
		// turn 160 less what the pass-through's turn grew by from turn 10 to turn 160 (the
		// same bytes read and written), over its turn 10.
		b.ReportMetric((at(1, 160)-(at(0, 160)-at(0, 10)))/at(1, 10), "default-t160/t10-less-forwarding")
	}
	b.ReportMetric(float64(size1)/1e3, "first-KB")
	b.ReportMetric(float64(sizeT)/1e3, "last-KB")
	if want := int64(len(modes) * turns * sessions * b.N); up.served.Load() != want {
		b.Fatalf("upstream served %d requests, want %d", up.served.Load(), want)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// buildHookproxy builds cmd/hookproxy from this tree into a temporary directory.
func buildHookproxy(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "hookproxy")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/hookproxy")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type serveProcess struct {
	cmd  *exec.Cmd
	base string
}

// startServe runs `hookproxy serve` with an Anthropic route to upstream; extra is added
// to its configuration (a registration key, or nothing for the embedded default chain).
func startServe(b *testing.B, bin, upstream, extra string) *serveProcess {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := "listen: " + addr + "\n" + extra + "routes:\n  - prefix: /anthropic\n    api: anthropic\n    upstream: " + upstream + "\n"
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", path, "--log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &serveProcess{cmd: cmd, base: "http://" + addr}
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			b.Fatalf("hookproxy serve did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cpu is the process's CPU time so far: the sum of its threads' run time.
func (p *serveProcess) cpu(b *testing.B) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(raw))
		if len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// sessionUpstream answers every Messages request with a short text and one Read tool_use,
// as a coding agent's model does turn after turn.
type sessionUpstream struct {
	*httptest.Server
	served atomic.Int64
}

func newSessionUpstream(b *testing.B) *sessionUpstream {
	u := &sessionUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.served.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[`+
			`{"type":"text","text":"Let me read the next file."},`+
			`{"type":"tool_use","id":"toolu_bench","name":"Read","input":{"file_path":"/repo/src/next.go"}}],`+
			`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1000,"output_tokens":30}}`)
	}))
	b.Cleanup(u.Close)
	return u
}

// agentConversation is one Claude-Code-shaped session: its fixed preamble (system prompt
// and tool definitions, the same in every session, as one agent's are) and its growing
// history.
type agentConversation struct {
	session int
	turn    int
	rng     *rand.Rand
	history []string // native messages, JSON
}

func newAgentConversation(session int) *agentConversation {
	c := &agentConversation{session: session, rng: rand.New(rand.NewPCG(uint64(session)+1, 42))}
	c.history = append(c.history, `{"role":"user","content":[{"type":"text","text":`+
		strconv.Quote("Please review the package in /repo/src and fix the failing test. "+c.words(60))+`}]}`)
	return c
}

var benchWords = strings.Fields(`the a function returns error value when nil config request handler
	server client buffer stream read write close open file path line test case check index slice map
	string int byte struct field method interface package import go module build run result output
	input message token session cache policy rule match pattern scan secret key value header body`)

func (c *agentConversation) words(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(benchWords[c.rng.IntN(len(benchWords))])
	}
	return sb.String()
}

// toolOutput is ~2 KB of a file's text, numbered as Read prints it.
func (c *agentConversation) toolOutput() string {
	var sb strings.Builder
	for i := 1; sb.Len() < 1600; i++ {
		fmt.Fprintf(&sb, "%6d\t%s(%s, %d) // %s\n", i, benchWords[c.rng.IntN(len(benchWords))],
			benchWords[c.rng.IntN(len(benchWords))], c.rng.IntN(1000), c.words(6))
	}
	return sb.String()
}

// advance appends the model's turn (as the upstream answered it, with an id of this turn)
// and the tool's result.
func (c *agentConversation) advance() {
	c.turn++
	id := fmt.Sprintf("toolu_%02d_%04d", c.session, c.turn)
	path := fmt.Sprintf("/repo/src/file_%d.go", c.turn)
	c.history = append(c.history,
		`{"role":"assistant","content":[{"type":"text","text":`+strconv.Quote("Let me read "+path+". "+c.words(20))+`},`+
			`{"type":"tool_use","id":"`+id+`","name":"Read","input":{"file_path":"`+path+`"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":`+strconv.Quote(c.toolOutput())+`}]}`)
}

// request is the next request's body.
func (c *agentConversation) request() []byte {
	// The members in Claude Code's order: model, messages, system, tools, metadata,
	// max_tokens, ..., stream (the messages array second, the ~47 KB of system prompt and
	// tool definitions after it).
	var sb bytes.Buffer
	sb.WriteString(`{"model":"claude-sonnet-4-5","messages":[`)
	for i, m := range c.history {
		if i > 0 {
			sb.WriteByte(',')
		}
		// The last message carries the cache breakpoint, as Claude Code's do.
		if i == len(c.history)-1 {
			m = strings.Replace(m, `"}]}`, `","cache_control":{"type":"ephemeral"}}]}`, 1)
		}
		sb.WriteString(m)
	}
	sb.WriteString(`],"system":`)
	sb.WriteString(agentSystem)
	sb.WriteString(`,"tools":`)
	sb.WriteString(agentTools)
	fmt.Fprintf(&sb, `,"metadata":{"user_id":"user_0123456789abcdef_account__session_%08d-bench"}`, c.session)
	sb.WriteString(`,"max_tokens":32000,"stream":false}`)
	return sb.Bytes()
}

// agentSystem and agentTools are the same in every session and turn: ~12 KB and ~35 KB.
var agentSystem, agentTools = func() (string, string) {
	c := &agentConversation{rng: rand.New(rand.NewPCG(7, 7))}
	sys := `[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude."},` +
		`{"type":"text","text":` + strconv.Quote("You are an interactive CLI tool that helps users with software engineering tasks. "+c.words(2000)) +
		`,"cache_control":{"type":"ephemeral"}}]`
	var tools []string
	for i, name := range []string{"Task", "Bash", "Glob", "Grep", "LS", "ExitPlanMode", "Read", "Edit", "MultiEdit",
		"Write", "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell"} {
		tools = append(tools, fmt.Sprintf(`{"name":%q,"description":%s,"input_schema":{"type":"object","properties":{`+
			`"command":{"type":"string","description":%s},"path":{"type":"string","description":"The absolute path"},`+
			`"timeout":{"type":"number","description":"Optional timeout in milliseconds (max 600000)"}},`+
			`"required":["command"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}}`,
			name, strconv.Quote(fmt.Sprintf("Tool %d. ", i)+c.words(300)), strconv.Quote(c.words(20))))
	}
	return sys, "[" + strings.Join(tools, ",") + "]"
}()
