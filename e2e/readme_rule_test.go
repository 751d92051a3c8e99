package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/config"
)

// readmeRecursiveDeleteRule is the one-line tools rule that README.md's first screen gives
// for refusing every recursive delete.
func readmeRecursiveDeleteRule(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n## ")
	for _, line := range strings.Split(first, "\n") {
		start, end := strings.Index(line, "`{"), strings.LastIndex(line, "}`")
		if start < 0 || end < start || !strings.Contains(line, `"effect": "recursive-delete"`) {
			continue
		}
		rule := json.RawMessage(line[start+1 : end+1])
		if !json.Valid(rule) {
			t.Fatalf("the README's rule is not JSON: %s", rule)
		}
		return rule
	}
	t.Fatal("README.md's first screen gives no rule for recursive deletes")
	return nil
}

// TestReadmeFirstScreenToolsClaims: what the README's first screen says of the default
// `tools` list holds through the real proxy — `rm -rf /` is refused however spelled,
// `rm -rf some/dir` passes — and the one-line rule it gives, added to the default
// registration's deny list, refuses every recursive delete of some/dir however spelled, not
// `ls -R` or the delete of one file.
func TestReadmeFirstScreenToolsClaims(t *testing.T) {
	rule := readmeRecursiveDeleteRule(t)
	withRule, err := sjson.SetRawBytes(config.DefaultRegistration, "hooks.0.transport.config.deny", append(append([]byte("["), rule...), ']'))
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(config.DefaultRegistration, "hooks.0.transport.policy").String() != "tools" {
		t.Fatal("the default registration's first hook is not the tools policy")
	}
	answerWith := func(cmd string) string {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		call, _ := json.Marshal(map[string]any{"id": "call_1", "type": "function",
			"function": map[string]string{"name": "Bash", "arguments": string(args)}})
		return `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":null,"tool_calls":[` + string(call) + `]},"finish_reason":"tool_calls"}]}`
	}
	for _, tc := range []struct {
		desc, cmd string
		reg       []byte
		refused   bool
	}{
		{"default list: rm -rf /", "rm -rf /", config.DefaultRegistration, true},
		{"default list: sudo bash -c rm -rf /", `sudo -u root bash -c -- '\rm -rf /'`, config.DefaultRegistration, true},
		{"default list: find . -delete", "find . -delete", config.DefaultRegistration, true},
		{"default list: git clean -fdx", "git clean -fdx", config.DefaultRegistration, true},
		{"default list: unanalysable rm -rf $DIR", `rm -rf "$DIR"`, config.DefaultRegistration, true},
		{"default list: rm -rf some/dir passes", "rm -rf some/dir", config.DefaultRegistration, false},
		{"default list: find some/dir -delete passes", "find some/dir -name '*.o' -delete", config.DefaultRegistration, false},
		{"with the rule: rm -rf some/dir", "rm -rf some/dir", withRule, true},
		{"with the rule: rm -r -f behind &&", "cd /srv && rm -r -f old", withRule, true},
		{"with the rule: rm --recursive", "rm --recursive build", withRule, true},
		{"with the rule: find -delete", "find some/dir -delete", withRule, true},
		{"with the rule: find -exec rm", "find some/dir -exec rm -rf {} +", withRule, true},
		{"with the rule: bash -c", `bash -c 'r""m -R some/dir'`, withRule, true},
		{"with the rule: ls -R passes", "ls -R some/dir", withRule, false},
		{"with the rule: rm of one file passes", "rm notes.txt", withRule, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, answer{json: answerWith(tc.cmd)})
			base := startInlineProxy(t, up.URL, tc.reg)
			status, body := postJSON(t, base+"/openai/v1/chat/completions",
				`{"model":"gpt-4o","messages":[{"role":"user","content":"tidy up"}],"tools":[{"type":"function","function":{"name":"Bash","parameters":{"type":"object"}}}]}`)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			kept := gjson.GetBytes(body, "choices.0.message.tool_calls.#").Int() == 1
			if kept == tc.refused {
				t.Errorf("%q refused = %v, want %v: %s", tc.cmd, !kept, tc.refused, body)
			}
		})
	}
}

// firstScreenProblems lists what README.md's first screen (first) states about the
// embedded default and the commands that the code and CI say otherwise: the listen and
// admin addresses, each route's prefix and upstream, the policies in force, the demo's
// address, the three commands, and that CI runs the same test command.
func firstScreenProblems(first string, cfg *config.Config, policies []string, demoListen, ciScript string) []string {
	var problems []string
	prose := strings.Join(strings.Fields(first), " ") // line breaks fall anywhere in prose
	want := func(fact, text string) {
		if !strings.Contains(prose, text) {
			problems = append(problems, fmt.Sprintf("%s: the first screen does not say %q", fact, text))
		}
	}
	want("listen address", "listens on `"+cfg.Listen+"`")
	want("admin address", "admin on `"+cfg.Admin+"`")
	for _, r := range cfg.Routes {
		want("route "+r.Prefix, "`"+r.Prefix+"` to `"+r.Upstream+"`")
	}
	if len(cfg.Routes) != 3 {
		problems = append(problems, fmt.Sprintf("the embedded default has %d routes; the first screen names three", len(cfg.Routes)))
	}
	listed := regexp.MustCompile("(?m)^- `([a-z]+)` ").FindAllStringSubmatch(first, -1)
	var named []string
	for _, m := range listed {
		named = append(named, m[1])
	}
	slices.Sort(named)
	if !slices.Equal(named, policies) {
		problems = append(problems, fmt.Sprintf("the first screen lists policies %v; the embedded default runs %v", named, policies))
	}
	want("demo address", "offline on `"+demoListen+"`")
	for _, cmd := range []string{"go run ./cmd/hookproxy serve ", "go run ./cmd/hookproxy demo ", "go test -v ./... "} {
		if !strings.Contains(first, "\n"+cmd) {
			problems = append(problems, fmt.Sprintf("command: the first screen has no line starting %q", cmd))
		}
	}
	if !regexp.MustCompile(`(?m)^go test (-[^ ]+ (\S+ )?)*-v (-[^ ]+ (\S+ )?)*\./\.\.\.`).MatchString(ciScript) {
		problems = append(problems, "CI (.ci/run) does not run `go test -v ./...`")
	}
	return problems
}

// TestReadmeFirstScreenDefaults: the addresses, routes, policies, demo address and
// commands that README.md's first screen gives are those of the embedded default, the demo
// and CI; the control shows a changed address is reported.
func TestReadmeFirstScreenDefaults(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n## ")
	var policies []string
	for _, p := range gjson.GetBytes(config.DefaultRegistration, "hooks.#.transport.policy").Array() {
		policies = append(policies, p.String())
	}
	slices.Sort(policies)
	cfg := config.Default()
	for _, p := range firstScreenProblems(first, cfg, policies, app.DemoListen, string(ci)) {
		t.Error(p)
	}
	moved := strings.Replace(first, "`"+cfg.Listen+"`", "`127.0.0.1:8081`", 1)
	if got := firstScreenProblems(moved, cfg, policies, app.DemoListen, string(ci)); len(got) != 1 || !strings.Contains(got[0], "listen address") {
		t.Errorf("control: a first screen naming another listen address gives %v, want one listen-address problem", got)
	}
	if got := firstScreenProblems(first, cfg, append([]string{"pii"}, policies...), app.DemoListen, "go test ./...\n"); len(got) != 2 {
		t.Errorf("control: another policy set and a CI without -v give %v, want two problems", got)
	}
}
