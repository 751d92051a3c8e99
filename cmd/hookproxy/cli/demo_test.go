package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// curlCommand is one printed curl line, parsed.
type curlCommand struct {
	line    string
	args    []string // argv after "curl"
	url     string
	headers map[string]string
	body    string
	hasBody bool
}

// shellWords splits a command line with the quoting the demo uses: words separated by
// spaces, single-quoted strings taken literally.
func shellWords(line string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is being built
		quote bool
	)
	for _, r := range line {
		switch {
		case quote && r == '\'':
			quote = false
		case quote:
			cur.WriteRune(r)
		case r == '\'':
			quote, in = true, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case strings.ContainsRune(`"\$`+"`|;&<>", r):
			return nil, fmt.Errorf("unquoted shell character %q", r)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote {
		return nil, errors.New("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

func parseCurl(line string) (curlCommand, error) {
	words, err := shellWords(line)
	if err != nil {
		return curlCommand{}, err
	}
	if len(words) == 0 || words[0] != "curl" {
		return curlCommand{}, errors.New("not a curl command")
	}
	c := curlCommand{line: line, args: words[1:], headers: map[string]string{}}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-H" && i+1 < len(words):
			k, v, ok := strings.Cut(words[i+1], ":")
			if !ok {
				return c, fmt.Errorf("header %q", words[i+1])
			}
			c.headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			i++
		case w == "-d" && i+1 < len(words):
			c.body, c.hasBody = words[i+1], true
			i++
		case w == "-s" || w == "-sN" || w == "-N":
		case strings.HasPrefix(w, "http://"):
			c.url = w
		default:
			return c, fmt.Errorf("unexpected curl argument %q", w)
		}
	}
	if c.url == "" {
		return c, errors.New("no URL")
	}
	return c, nil
}

// do runs the command's request in Go, as curl would send it.
func (c curlCommand) do(t *testing.T) (int, string) {
	t.Helper()
	method := http.MethodGet
	var body io.Reader
	if c.hasBody {
		method, body = http.MethodPost, strings.NewReader(c.body)
	}
	req, err := http.NewRequest(method, c.url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.line, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestDemo runs `hookproxy demo` on a free port, replays every printed curl command in Go
// (and with curl itself when it is installed) and checks that each shows what it claims.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testsupport.LockedBuffer
	exit := make(chan int, 1)
	go func() { exit <- runDemoContext(ctx, []string{"--listen", "127.0.0.1:0"}, &stdout, &stderr) }()

	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "Ctrl-C stops the demo.") {
		select {
		case code := <-exit:
			t.Fatalf("demo exited %d early\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no instructions\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	lines := strings.Split(stdout.String(), "\n")
	var cmds []curlCommand
	for i, l := range lines {
		if !strings.HasPrefix(l, "curl") {
			if strings.Contains(l, "curl ") && !strings.Contains(l, "`") {
				t.Errorf("line %d mentions curl but does not start with it: %q", i, l)
			}
			continue
		}
		c, err := parseCurl(l)
		if err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if !strings.HasPrefix(c.url, "http://127.0.0.1:") {
			t.Errorf("command leaves loopback: %s", l)
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "look for:") {
			t.Errorf("command %q is not followed by what to look for", l)
		}
		cmds = append(cmds, c)
	}
	if len(cmds) < 3 {
		t.Fatalf("%d curl commands, want at least 3:\n%s", len(cmds), stdout.String())
	}
	checks := []func(t *testing.T, status int, body string){
		checkAllowed, checkRedactedAnswer, checkReceived, checkToolCallRemoved, checkStreamedToolCallRemoved,
		checkGeminiToolCallRemoved,
	}
	if len(cmds) != len(checks) {
		t.Fatalf("%d curl commands, the test knows %d", len(cmds), len(checks))
	}

	run := func(t *testing.T, exec func(c curlCommand) (int, string)) {
		for i, c := range cmds {
			status, body := exec(c)
			t.Run(fmt.Sprintf("command %d", i+1), func(t *testing.T) { checks[i](t, status, body) })
		}
	}
	t.Run("go", func(t *testing.T) { run(t, func(c curlCommand) (int, string) { return c.do(t) }) })
	if curl, err := exec.LookPath("curl"); err == nil {
		t.Run("curl", func(t *testing.T) {
			run(t, func(c curlCommand) (int, string) {
				cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
				defer ccancel()
				// -w appends the status on its own line; no shell is involved.
				out, err := exec.CommandContext(cctx, curl, append(c.args, "-w", "\n%{http_code}")...).Output()
				if err != nil {
					t.Fatalf("%s: %v", c.line, err)
				}
				s := strings.TrimRight(string(out), "\n")
				cut := strings.LastIndex(s, "\n")
				var status int
				_, _ = fmt.Sscan(s[cut+1:], &status)
				return status, s[:max(cut, 0)]
			})
		})
	}

	if !strings.Contains(stderr.String(), "tool.before Bash: refused") {
		t.Errorf("the demo's terminal does not show the refused tool call:\n%s", stderr.String())
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("demo exited %d after Ctrl-C, want 0", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop")
	}
}

type chatCompletion struct {
	Choices []struct {
		Message struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

func decodeChat(t *testing.T, status int, body string) chatCompletion {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var cc chatCompletion
	if err := json.Unmarshal([]byte(body), &cc); err != nil || len(cc.Choices) != 1 {
		t.Fatalf("not a chat completion (%v): %s", err, body)
	}
	return cc
}

func checkAllowed(t *testing.T, status int, body string) {
	cc := decodeChat(t, status, body)
	if got := cc.Choices[0].Message.Content; !strings.HasPrefix(got, `You said: "Say hello to hookproxy"`) {
		t.Errorf("answer %q: the prompt should reach the model as written", got)
	}
}

func checkRedactedAnswer(t *testing.T, status int, body string) {
	cc := decodeChat(t, status, body)
	got := cc.Choices[0].Message.Content
	if strings.Contains(body, demoSecret) || !strings.Contains(got, "[REDACTED:aws_access_key_id:") ||
		!strings.Contains(got, "Deploy to production with the AWS key ") {
		t.Errorf("answer %q: want the key, and only the key, redacted", got)
	}
}

func checkReceived(t *testing.T, status int, body string) {
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil || len(req.Messages) != 1 {
		t.Fatalf("not the upstream request body (%v): %s", err, body)
	}
	got := req.Messages[0].Content
	if strings.Contains(body, demoSecret) || req.Model != "gpt-4o-mini" ||
		!strings.HasPrefix(got, "Deploy to production with the AWS key [REDACTED:aws_access_key_id:") || !strings.HasSuffix(got, "] please") {
		t.Errorf("upstream received %s: want the key redacted and the rest intact", body)
	}
}

func checkToolCallRemoved(t *testing.T, status int, body string) {
	cc := decodeChat(t, status, body)
	calls := cc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "Read" || calls[0].Function.Arguments != `{"path":"README.md"}` {
		t.Errorf("tool calls %+v: want only Read", calls)
	}
	if strings.Contains(withoutRefusal(body), "rm -rf") {
		t.Errorf("the destructive call reached the client: %s", body)
	}
}

// withoutRefusal drops the refusal's naming of the command it refused (the tools policy
// says what it evaluated: "`rm -rf /` refused by rule recursive-delete").
func withoutRefusal(body string) string {
	return strings.ReplaceAll(body, "`rm -rf /` refused by rule", "")
}

func checkStreamedToolCallRemoved(t *testing.T, status int, body string) {
	if status != http.StatusOK || !strings.Contains(body, "event: message_stop") {
		t.Fatalf("status %d, not a complete Anthropic stream: %s", status, body)
	}
	var tools []string
	for _, l := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event data is not JSON: %q", data)
		}
		if ev.Type == "content_block_start" && ev.ContentBlock.Type == "tool_use" {
			tools = append(tools, ev.ContentBlock.Name)
		}
	}
	if len(tools) != 1 || tools[0] != "Read" || strings.Contains(withoutRefusal(body), "rm -rf") {
		t.Errorf("tool_use blocks %v: want only Read, and no rm -rf\n%s", tools, body)
	}
}

func checkGeminiToolCallRemoved(t *testing.T, status int, body string) {
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string `json:"text"`
					FunctionCall *struct {
						Name string         `json:"name"`
						Args map[string]any `json:"args"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Candidates) != 1 {
		t.Fatalf("not a generateContent response (%v): %s", err, body)
	}
	var calls []string
	text := ""
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.FunctionCall != nil {
			calls = append(calls, p.FunctionCall.Name)
		}
		text += p.Text
	}
	if len(calls) != 1 || calls[0] != "Read" || strings.Contains(withoutRefusal(body), "rm -rf") {
		t.Errorf("function calls %v: want only Read, and no rm -rf\n%s", calls, body)
	}
	if !strings.Contains(text, "Bash") {
		t.Errorf("no text part says the Bash call was removed: %s", body)
	}
}

// TestDemoDefaultPort: without --listen the demo takes 127.0.0.1:8088 — never serve's
// 8080 — or, when that is taken (here by the test, when it can), a free port, and its
// curl lines name the port it really has. An explicit --listen on a taken port is an
// error that names the flag.
func TestDemoDefaultPort(t *testing.T) {
	if held, err := net.Listen("tcp", app.DemoListen); err == nil {
		defer held.Close()
	} // else something else holds it already: the fallback is exercised all the same
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testsupport.LockedBuffer
	exit := make(chan int, 1)
	go func() { exit <- runDemoContext(ctx, nil, &stdout, &stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "Ctrl-C stops the demo.") {
		select {
		case code := <-exit:
			t.Fatalf("demo exited %d with its default port taken\nstderr:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no instructions\nstderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var proxyURL string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "proxy" {
			proxyURL = f[1]
		}
	}
	if proxyURL == "" || strings.HasSuffix(proxyURL, ":8088") || strings.HasSuffix(proxyURL, ":8080") {
		t.Fatalf("demo proxy at %q, want a free port other than 8088 (taken) and 8080", proxyURL)
	}
	if !strings.Contains(stdout.String(), "curl -s "+proxyURL+"/openai/") {
		t.Errorf("the curl lines do not name the port the demo has:\n%s", stdout.String())
	}
	c, err := parseCurl("curl -s " + proxyURL + "/openai/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'")
	if err != nil {
		t.Fatal(err)
	}
	if status, body := c.do(t); status != http.StatusOK {
		t.Errorf("demo on its fallback port: %d %s", status, body)
	}
	cancel()
	<-exit

	// An address the user chose is not silently replaced.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var out, errOut testsupport.LockedBuffer
	code := runDemoContext(context.Background(), []string{"--listen", held.Addr().String()}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "already in use") || !strings.Contains(errOut.String(), "--listen ADDR") {
		t.Errorf("demo --listen on a taken port: exit %d, stderr %q", code, errOut.String())
	}
}

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: `curl -s http://x -d '{"a":"b c"}'`, want: []string{"curl", "-s", "http://x", "-d", `{"a":"b c"}`}},
		{in: `curl -H 'A: b'`, want: []string{"curl", "-H", "A: b"}},
		{in: `curl 'unterminated`, bad: true},
		{in: `curl $(rm)`, bad: true},
	} {
		got, err := shellWords(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && strings.Join(got, "|") != strings.Join(tc.want, "|")) {
			t.Errorf("shellWords(%q) = %q, %v", tc.in, got, err)
		}
	}
}
