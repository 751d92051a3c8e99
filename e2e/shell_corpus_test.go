package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/config"
)

// The command-model corpus through the real proxy: every shell form of
// policies/testdata/shell/forms.txt (labelled by real bash: does it delete its target?),
// with a real-world target, is sent by the fake upstream as a tool call of each input
// shape agents use — Claude Code's Bash {"command"}, Codex's exec_command {"cmd"} and shell
// {"command": [argv]}, a Responses local_shell_call and shell_call. A deleting form must
// not reach the client; any other form must, unless the policy could not evaluate it and
// says so (the unanalysable action), or — for the rule that refuses every recursive
// delete — it is a recursive delete of something else than the target.

type corpusForm struct {
	line   int
	labels string
	text   string
}

func readCorpusForms(t *testing.T) []corpusForm {
	t.Helper()
	const p = "../policies/testdata/shell/forms.txt"
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []corpusForm
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		labels, text, ok := strings.Cut(l, "\t")
		if !ok || len(labels) != 2 {
			t.Fatalf("%s:%d: malformed line %q", p, n, l)
		}
		out = append(out, corpusForm{line: n, labels: labels, text: text})
	}
	return out
}

// refusalNaming is where a refusal names the command it refused ("`rm -rf /` refused by
// rule recursive-delete"): text for the agent, not a call it can run.
var refusalNaming = regexp.MustCompile("`[^`]*` refused by rule")

// withoutRefusals drops those namings, so that a check for a command reaching the client
// looks only at what the client could run.
func withoutRefusals(s string) string { return refusalNaming.ReplaceAllString(s, "") }

var corpusB64 = regexp.MustCompile(`@B64\{([^}]*)\}`)

func corpusCommand(form, target string) string {
	s := strings.ReplaceAll(form, "␤", "\n")
	s = strings.ReplaceAll(s, "@T@", target)
	s = strings.ReplaceAll(s, "@D@", "/srv/app")
	return corpusB64.ReplaceAllStringFunc(s, func(m string) string {
		return base64.StdEncoding.EncodeToString([]byte(corpusB64.FindStringSubmatch(m)[1]))
	})
}

// corpusShape sends commands as one kind of tool call and returns the indexes of the calls
// the client received, and the client's text (where the proxy explains refusals).
type corpusShape struct {
	name string
	send func(t *testing.T, base, upstreamURL string, cmds []string) (map[int]bool, string)
}

var corpusShapes = []corpusShape{
	{"anthropic Bash {command}", func(t *testing.T, base, _ string, cmds []string) (map[int]bool, string) {
		var blocks []string
		for i, c := range cmds {
			blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":%s,"description":"clean up"}}`, i, jsonString(c)))
		}
		return sendAnthropicCalls(t, base, blocks)
	}},
	{"codex exec_command {cmd}", func(t *testing.T, base, _ string, cmds []string) (map[int]bool, string) {
		var items []string
		for i, c := range cmds {
			args, _ := json.Marshal(map[string]any{"cmd": c, "workdir": "/srv/app", "yield_time_ms": 1000})
			items = append(items, fmt.Sprintf(`{"id":"fc_%d","type":"function_call","status":"completed","call_id":"call_%d","name":"exec_command","arguments":%s}`, i, i, jsonString(string(args))))
		}
		return sendResponsesCalls(t, base, items)
	}},
	{"codex shell {command: argv}", func(t *testing.T, base, _ string, cmds []string) (map[int]bool, string) {
		var items []string
		for i, c := range cmds {
			args, _ := json.Marshal(map[string]any{"command": []string{"bash", "-lc", c}, "workdir": "/srv/app", "timeout_ms": 10000})
			items = append(items, fmt.Sprintf(`{"id":"fc_%d","type":"function_call","status":"completed","call_id":"call_%d","name":"shell","arguments":%s}`, i, i, jsonString(string(args))))
		}
		return sendResponsesCalls(t, base, items)
	}},
	{"responses local_shell_call", func(t *testing.T, base, _ string, cmds []string) (map[int]bool, string) {
		var items []string
		for i, c := range cmds {
			argv, _ := json.Marshal([]string{"bash", "-lc", c})
			items = append(items, fmt.Sprintf(`{"id":"lsh_%d","type":"local_shell_call","status":"completed","call_id":"call_%d","action":{"type":"exec","command":%s,"env":{}}}`, i, i, argv))
		}
		return sendResponsesCalls(t, base, items)
	}},
	{"responses shell_call", func(t *testing.T, base, _ string, cmds []string) (map[int]bool, string) {
		var items []string
		for i, c := range cmds {
			items = append(items, fmt.Sprintf(`{"id":"sh_%d","type":"shell_call","status":"completed","call_id":"call_%d","action":{"commands":[%s]},"environment":{"type":"local"}}`, i, i, jsonString(c)))
		}
		return sendResponsesCalls(t, base, items)
	}},
}

// corpusUpstream answers each request with the JSON set just before it (the tests below
// run sequentially).
var corpusUpstream *corpusServer

type corpusServer struct {
	*httptest.Server
	body atomic.Pointer[string]
}

func newCorpusServer(t *testing.T) *corpusServer {
	s := &corpusServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, *s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *corpusServer) setAnswer(a answer) { s.body.Store(&a.json) }

func sendAnthropicCalls(t *testing.T, base string, blocks []string) (map[int]bool, string) {
	corpusUpstream.setAnswer(answer{json: `{"id":"msg_corpus","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		strings.Join(blocks, ",") + `],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":10}}`})
	status, got := postClaudeCode(t, base+"/anthropic/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"clean up"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, got)
	}
	kept := map[int]bool{}
	var text strings.Builder
	for _, b := range gjson.GetBytes(got, "content").Array() {
		switch b.Get("type").String() {
		case "tool_use":
			var i int
			fmt.Sscanf(b.Get("id").String(), "toolu_%d", &i)
			kept[i] = true
		case "text":
			text.WriteString(b.Get("text").String() + "\n")
		}
	}
	return kept, text.String()
}

func sendResponsesCalls(t *testing.T, base string, items []string) (map[int]bool, string) {
	corpusUpstream.setAnswer(answer{json: `{"id":"resp_corpus","object":"response","created_at":1760000000,"status":"completed","model":"gpt-5-codex","output":[` +
		strings.Join(items, ",") + `],"usage":{"input_tokens":10,"output_tokens":10,"total_tokens":20}}`})
	resp := postResponses(t, base, `{"model":"gpt-5-codex","input":[{"role":"user","content":"clean up"}],"tools":[{"type":"local_shell"},{"type":"shell"}]}`, false)
	kept := map[int]bool{}
	for _, id := range callIDs(resp) {
		var i int
		fmt.Sscanf(id, "call_%d", &i)
		kept[i] = true
	}
	return kept, resp.Get("output").Raw
}

// TestShellCorpusThroughProxy runs the corpus through the embedded default chain (targets
// /, /usr and ~) and through docs/policies.md's recursive-delete rule (targets /srv/app/data and ~).
func TestShellCorpusThroughProxy(t *testing.T) {
	forms := readCorpusForms(t)
	if len(forms) < 300 {
		t.Fatalf("corpus has %d forms", len(forms))
	}
	readmeReg, err := sjson.SetRawBytes(config.Default().RegistrationInline, "hooks.0.transport.config",
		[]byte(`{"deny": [{"name": "recursive-delete", "effect": "recursive-delete"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	corpusUpstream = newCorpusServer(t)
	configs := []struct {
		name    string
		reg     []byte
		targets []string
		anyRm   bool
	}{
		{"default", config.Default().RegistrationInline, []string{"/", "/usr", "~"}, false},
		{"readme-rule", readmeReg, []string{"/srv/app/data", "~"}, true},
	}
	for _, cfg := range configs {
		base := startInlineProxy(t, corpusUpstream.URL, cfg.reg)
		for _, target := range cfg.targets {
			home := target == "~"
			cmds := make([]string, len(forms))
			for i, f := range forms {
				cmds[i] = corpusCommand(f.text, target)
			}
			for _, shape := range corpusShapes {
				name := cfg.name + "/" + target + "/" + shape.name
				kept, _ := shape.send(t, base, corpusUpstream.URL, cmds)
				refused, passed, excused := 0, 0, 0
				for i, f := range forms {
					deletes := f.labels[0] == 'D'
					if home {
						deletes = f.labels[1] == 'D'
					}
					switch {
					case deletes && kept[i]:
						t.Errorf("%s: line %d deletes its target but reached the client: %q", name, f.line, cmds[i])
					case deletes:
						refused++
					case kept[i]:
						passed++
					default:
						// Refused without deleting: only as unanalysable, or (for the
						// rule on every recursive delete) a recursive delete of something else.
						_, why := shape.send(t, base, corpusUpstream.URL, cmds[i:i+1])
						switch {
						case strings.Contains(why, "cannot be evaluated statically"):
							excused++
						case cfg.anyRm && f.labels != "KK" && strings.Contains(why, "refused by rule recursive-delete"):
							excused++
						default:
							t.Errorf("%s: line %d does not delete but was refused: %q\n%s", name, f.line, cmds[i], why)
						}
					}
				}
				t.Logf("%s: %d forms: %d deleting refused, %d passed, %d refused as unanalysable or another recursive delete",
					name, len(forms), refused, passed, excused)
			}
		}
	}
}

// TestShellCorpusControl: the same calls sent straight to the upstream all reach the
// client — the refusals above are the proxy's doing.
func TestShellCorpusControl(t *testing.T) {
	forms := readCorpusForms(t)
	corpusUpstream = newCorpusServer(t)
	cmds := make([]string, len(forms))
	for i, f := range forms {
		cmds[i] = corpusCommand(f.text, "/")
	}
	for _, shape := range corpusShapes {
		if kept, _ := shape.send(t, corpusUpstream.URL, corpusUpstream.URL, cmds); len(kept) != len(forms) {
			t.Errorf("%s: straight to the upstream, the client got %d of %d calls", shape.name, len(kept), len(forms))
		}
	}
}
