package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const policyTestConfig = `routes:
  - prefix: /openai
    api: openai
    upstream: https://api.openai.com
`

// passingCases exercise the built-in default chain: an event case each way, and a native
// case whose upstream answer calls rm -rf (the call is removed: refused at tool.before)
// beside a harmless chat that is forwarded.
const passingCases = `config: hookproxy.yaml
cases:
  - name: a recursive delete is refused
    event:
      type: tool.before
      session: {id: s1}
      turn: {id: t1}
      call: {id: c1}
      path: /work
      tool: {name: Bash, origin: native, input: {command: "rm -rf /"}}
    expect: refused
  - name: listing files is forwarded
    event:
      type: tool.before
      session: {id: s1}
      turn: {id: t1}
      call: {id: c2}
      path: /work
      tool: {name: Bash, origin: native, input: {command: "ls -la"}}
    expect: forwarded
  - name: a model answer calling rm -rf loses the call
    route: /openai
    request:
      path: /v1/chat/completions
      body: {model: gpt-4o, messages: [{role: user, content: "clean up"}]}
    response:
      body:
        id: chatcmpl-1
        object: chat.completion
        created: 1
        model: gpt-4o
        choices:
          - index: 0
            finish_reason: tool_calls
            message:
              role: assistant
              content: null
              tool_calls:
                - {id: call_1, type: function, function: {name: Bash, arguments: '{"command":"rm -rf /"}'}}
    boundary: tool.before
    expect: refused
  - name: a plain answer is forwarded
    route: /openai
    request:
      path: /v1/chat/completions
      body: {model: gpt-4o, messages: [{role: user, content: "hello"}]}
    response:
      body: {id: chatcmpl-2, object: chat.completion, created: 1, model: gpt-4o,
             choices: [{index: 0, finish_reason: stop, message: {role: assistant, content: "hi"}}]}
    expect: forwarded
`

// TestPolicyTestCommand: every case passes → exit 0; the same file with one expectation
// turned around → exit 1 naming the failing case and what it got; a malformed case file
// → exit 2.
func TestPolicyTestCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("hookproxy.yaml", policyTestConfig)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(append([]string{"test"}, args...), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	pass := write("pass.yaml", passingCases)
	if code, out, errOut := run(pass); code != 0 || !strings.Contains(out, "4 passed, 0 failed") {
		t.Fatalf("passing cases: exit %d\n%s%s", code, out, errOut)
	}

	// One expectation reversed: the native rm -rf answer expected forwarded.
	failing := write("fail.yaml", strings.Replace(passingCases, "    boundary: tool.before\n    expect: refused", "    boundary: tool.before\n    expect: forwarded", 1))
	code, out, errOut := run(failing)
	if code != 1 || !strings.Contains(out, "FAIL  "+failing+": a model answer calling rm -rf loses the call: expected forwarded, got HTTP 200; tool.before:refused") ||
		!strings.Contains(out, "3 passed, 1 failed") {
		t.Fatalf("failing case: exit %d\n%s%s", code, out, errOut)
	}

	bad := write("bad.yaml", "cases:\n  - name: x\n    event: {type: tool.before}\n    expect: maybe\n")
	if code, _, errOut := run(bad); code != 2 || !strings.Contains(errOut, `expect "maybe"`) {
		t.Fatalf("malformed case: exit %d, %s", code, errOut)
	}
	if code, _, _ := run(); code != 2 {
		t.Fatalf("no file: exit %d, want 2", code)
	}
}

// TestReplayErrorsExitTwo: an unreadable capture and a bad flag are errors (exit 2), not
// "differs".
func TestReplayErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookproxy.yaml")
	if err := os.WriteFile(cfg, []byte(policyTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	notCapture := filepath.Join(dir, "x.jsonl")
	if err := os.WriteFile(notCapture, []byte("{\"hello\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--capture", filepath.Join(dir, "missing"), "--config", cfg},
		{"--capture", notCapture, "--config", cfg},
		{"--capture", dir, "--config", cfg, "--format", "xml"},
		{"--capture", dir, "--config", cfg, "--boundary", "tool.whatever"},
		{"--capture", dir, "--config", cfg, "--since", "yesterday"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"replay"}, args...), nil, &out, &errOut); code != 2 {
			t.Errorf("replay %q: exit %d, want 2\n%s", args, code, errOut.String())
		}
	}
	// Control: an empty capture directory is not an error; nothing differs.
	empty := filepath.Join(dir, "empty")
	_ = os.Mkdir(empty, 0o700)
	var out, errOut bytes.Buffer
	if code := Main([]string{"replay", "--capture", empty, "--config", cfg}, nil, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "0 events replayed, 0 differ") {
		t.Fatalf("empty capture: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestValidateChecksTheShadowRegistration: validate checks shadow.registration like the
// live registration (exit 1 with the problem at its JSON path) and names the shadow's
// policies when it is valid.
func TestValidateChecksTheShadowRegistration(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookproxy.yaml")
	if err := os.WriteFile(cfg, []byte(policyTestConfig+"shadow:\n  registration: shadow.json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shadow := filepath.Join(dir, "shadow.json")
	if err := os.WriteFile(shadow, []byte(`{"protocolVersion":"draft","hooks":[{"id":"org.example.shadow"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"validate", "--config", cfg}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), shadow+`: hooks[0]: "transport" is required`) {
		t.Fatalf("broken shadow: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	valid := `{"protocolVersion":"draft","hooks":[{"id":"org.example.shadow","transport":{"type":"in_process","policy":"tools","config":{}},` +
		`"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":2000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`
	if err := os.WriteFile(shadow, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := Main([]string{"validate", "--config", cfg}, nil, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "shadow (enforcing nothing): tools") {
		t.Fatalf("valid shadow: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
