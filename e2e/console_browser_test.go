package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/fakemodel"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// The console in a real browser: headless Chromium (Debian's chromium) driven over the
// DevTools protocol by chromedp, in front of the real proxy (app.Run, the default chain:
// tools and secrets policies) and the offline imitation model, with the official OpenAI
// SDK as the agent. Every credential below is made up.
const (
	consoleAdminToken = "console-e2e-admin-token-4c1d7e9a2b"
	consoleClientKey  = "sk-proj-CONSOLEclientKEY0123456789abcdefghijklmnop"
	consoleGitLab     = "glpat-Qm7xK2pL9vR4tY8wZ3nB"
	consoleHF         = "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"
	consoleDBPassword = "Vx9-q2Lm-pT7z"
	consoleDSN        = "postgres://app:" + consoleDBPassword + "@db.internal:5432/orders"
)

// consoleSecrets are the credentials the traffic carries; none may reach the console.
var consoleSecrets = []string{consoleClientKey, consoleGitLab, consoleHF, consoleDBPassword, consoleAdminToken}

// consoleRig is a running proxy with its admin listener, and the imitation model behind it.
type consoleRig struct {
	proxyURL, adminURL string
	model              *httptest.Server
	rec                *recorder
}

// startConsoleRig starts the proxy with the default chain, or with the registration
// document given.
func startConsoleRig(t *testing.T, registration ...string) *consoleRig {
	t.Helper()
	files, extra := map[string]string{}, ""
	if len(registration) > 0 {
		files["hooks.json"], extra = registration[0], "registration: hooks.json"
	}
	return startConsoleRigWith(t, files, extra)
}

// startConsoleRigWith starts the proxy with the files written to its configuration's
// directory and the extra top-level configuration (registration, shadow, pinning, ...).
func startConsoleRigWith(t *testing.T, files map[string]string, extra string) *consoleRig {
	t.Helper()
	model := httptest.NewServer(fakemodel.New().Handler())
	t.Cleanup(model.Close)
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin:
  listen: %s
  token: %s
source: urn:hookproxy:e2e-console
%s
routes:
  - prefix: /openai
    api: openai
    upstream: %s
`, testsupport.FreeAddr(t), consoleAdminToken, extra, model.URL)), dir)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{Config: cfg, Started: func(p, a string) { started <- [2]string{p, a} }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app.Run: %v", err)
		}
	})
	select {
	case addrs := <-started:
		return &consoleRig{proxyURL: "http://" + addrs[0], adminURL: "http://" + addrs[1], model: model, rec: newRecorder(t)}
	case err := <-done:
		t.Fatalf("app.Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not start")
	}
	return nil
}

// chat sends one prompt through the proxy with the official SDK, after the earlier turns
// of its conversation (user, assistant, user, ...).
func (r *consoleRig) chat(t *testing.T, prompt string, earlier ...string) *openai.ChatCompletion {
	t.Helper()
	c := openai.NewClient(
		openaioption.WithBaseURL(r.proxyURL+"/openai/v1"),
		openaioption.WithAPIKey(consoleClientKey),
		openaioption.WithMaxRetries(0),
		openaioption.WithHTTPClient(&http.Client{Transport: r.rec}),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var msgs []openai.ChatCompletionMessageParamUnion
	for i, m := range earlier {
		if i%2 == 0 {
			msgs = append(msgs, openai.UserMessage(m))
		} else {
			msgs = append(msgs, openai.AssistantMessage(m))
		}
	}
	out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: append(msgs, openai.UserMessage(prompt)),
	})
	if err != nil {
		t.Fatalf("chat %q: %v", prompt, err)
	}
	return out
}

// secretsPrompt carries three credentials of different kinds in one message.
const secretsPrompt = "Deploy with " + consoleDSN + ", push with " + consoleGitLab + " and pull the weights with " + consoleHF + "."

// browser starts headless Chromium, or skips (fails under HOOKPROXY_REQUIRE_BROWSER, as
// .ci/run sets) when it is not installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("HOOKPROXY_REQUIRE_BROWSER") != "" {
			t.Fatal("chromium is not installed (HOOKPROXY_REQUIRE_BROWSER is set)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); the console's browser tests need it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1360, 860), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// artifactsDir is where screenshots go: HOOKPROXY_ARTIFACTS_DIR (CI keeps it), else the
// test's temporary directory.
func artifactsDir(t *testing.T) string {
	if d := os.Getenv("HOOKPROXY_ARTIFACTS_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// docPictures are the screenshots docs/console.md and README show.
var docPictures = map[string]bool{"console-live.png": true, "console-session.png": true}

// screenshot saves the page as name under the artifacts directory and, for the pictures
// of the documentation with HOOKPROXY_UPDATE_DOCS=1, as docs/img/name.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{artifactsDir(t)}
	if os.Getenv("HOOKPROXY_UPDATE_DOCS") == "1" && docPictures[name] {
		dirs = append(dirs, filepath.Join("..", "docs", "img"))
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s", filepath.Join(dirs[0], name))
}

// TestConsoleInBrowser: a person signs in to the console with the admin token (a wrong one
// is refused), watches the live view while an agent's traffic passes, sees the denied tool
// call with the rule that refused it appear by itself, and opens the session whose prompt
// carried credentials: its timeline shows the redaction with the removed text masked.
func TestConsoleInBrowser(t *testing.T) {
	ctx := browser(t)
	rig := startConsoleRig(t)

	// Without the token the console shows nothing but its sign-in form.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(rig.adminURL+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "/ui/login") {
		t.Fatalf("without the token the console opened %s, want the sign-in form", loc)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("login-failed")),
	); err != nil {
		t.Fatalf("a wrong token: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), consoleAdminToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("#live-status.on")), // the event stream is open
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}

	// Traffic while the live view is open: a prompt with credentials, then one that makes
	// the model ask for `rm -rf /`.
	first := rig.chat(t, secretsPrompt)
	answer := rig.chat(t, "Please clean up the build directory.", secretsPrompt, first.Choices[0].Message.Content)
	for _, c := range answer.Choices[0].Message.ToolCalls {
		if strings.Contains(c.Function.Arguments, "rm -rf") {
			t.Fatalf("the destructive call reached the client: %s", c.Function.Arguments)
		}
	}

	// .fresh marks a row the event stream added (the page itself was empty when loaded).
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#decisions tbody tr.outcome-refused.fresh"))); err != nil {
		t.Fatalf("the live view did not show the refusal: %v", err)
	}
	refused := textOf(t, ctx, "#decisions tbody tr.outcome-refused")
	for _, want := range []string{"tool.before", "Bash", "refused", "hookproxy.builtin.tools", "hookproxy.tools.destructive", "recursive-delete"} {
		if !strings.Contains(refused, want) {
			t.Errorf("live row of the refused call %q lacks %q", refused, want)
		}
	}
	screenshot(t, ctx, "console-live.png")

	// The session of the prompt with credentials: its request was rewritten.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#decisions tbody tr.outcome-rewritten td a")),
		chromedp.WaitVisible(chromedp.CSS(".redaction")),
	); err != nil {
		t.Fatalf("the session timeline: %v", err)
	}
	before, after := textOf(t, ctx, ".redaction .before pre"), textOf(t, ctx, ".redaction .after pre")
	if !strings.Contains(before, "chars removed]") || !strings.Contains(before, "Deploy with") {
		t.Errorf("before of the redaction = %q, want the text with the removed part masked", before)
	}
	if !strings.Contains(after, "[REDACTED:gitlab_token:") || !strings.Contains(after, "[REDACTED:huggingface_token:") {
		t.Errorf("after of the redaction = %q, want the placeholders that went upstream", after)
	}
	screenshot(t, ctx, "console-session.png")

	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, "chars removed]") {
		t.Fatalf("the page read is not the session timeline: %s", html)
	}
	for _, s := range consoleSecrets {
		if strings.Contains(html, s) {
			t.Errorf("the session page shows %q", s)
		}
	}
}

// TestConsoleApprovesHeldCall: a policy asks before any `rm` runs; the agent's call is
// held while a person, on the console's Approvals page, sees it arrive by itself, reads the
// command and approves it by clicking; the held call then reaches the agent as it was
// judged, and the page lists the decision with the token's name as the decider.
func TestConsoleApprovesHeldCall(t *testing.T) {
	ctx := browser(t)
	rig := startConsoleRig(t, `{"protocolVersion": "draft", "hooks": [
  {"id": "hookproxy.builtin.tools", "transport": {"type": "in_process", "policy": "tools",
     "config": {"deny": [{"name": "confirm-delete", "tool": "Bash", "command": "rm", "action": "ask"}]}},
   "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 2000,
     "failurePolicy": "fail-closed", "content": {"default": "body"}}]}]}`)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(rig.adminURL+"/ui/approvals"),
		chromedp.SendKeys(chromedp.ID("token"), consoleAdminToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("no-pending")),
	); err != nil {
		t.Fatalf("open the approvals page: %v", err)
	}

	type result struct {
		answer *openai.ChatCompletion
		err    error
	}
	done := make(chan result, 1)
	go func() {
		c := openai.NewClient(openaioption.WithBaseURL(rig.proxyURL+"/openai/v1"), openaioption.WithAPIKey(consoleClientKey),
			openaioption.WithMaxRetries(0))
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		a, err := c.Chat.Completions.New(cctx, openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please clean up the build directory.")}})
		done <- result{a, err}
	}()

	// The held call appears without a reload (the approvals event stream).
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.approval"))); err != nil {
		t.Fatalf("the held call did not appear: %v", err)
	}
	held := textOf(t, ctx, "section.approval")
	for _, want := range []string{"Bash", "rm -rf /", "hookproxy.builtin.tools", "confirm-delete"} {
		if !strings.Contains(held, want) {
			t.Errorf("the pending approval %q lacks %q", held, want)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("the call was not held: %+v %v", r.answer, r.err)
	default:
	}
	screenshot(t, ctx, "console-approvals.png")
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, a); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			t.Fatalf("%s: %v; at %s: %s", what, err, loc, html)
		}
	}
	step("type a reason", chromedp.SendKeys(chromedp.CSS("section.approval input[name=reason]"), "cleaning the build box"))
	step("click approve", chromedp.Click(chromedp.CSS("section.approval button.approve")))
	step("see the notice", chromedp.WaitVisible(chromedp.ID("notice")))

	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call did not reach the agent")
	}
	if r.err != nil {
		t.Fatalf("chat: %v", r.err)
	}
	var bash string
	for _, c := range r.answer.Choices[0].Message.ToolCalls {
		if c.Function.Name == "Bash" {
			bash = c.Function.Arguments
		}
	}
	if !strings.Contains(bash, "rm -rf /") {
		t.Fatalf("the approved call is not in the answer: %+v", r.answer.Choices[0].Message)
	}
	decided := textOf(t, ctx, "table.decided tbody tr")
	for _, want := range []string{"Bash", "approved", "admin", "cleaning the build box"} {
		if !strings.Contains(decided, want) {
			t.Errorf("the decided row %q lacks %q", decided, want)
		}
	}
}

// textOf reads the text of the first element matching the CSS selector. A page that has
// just loaded can still be replacing its document, which drops the node being read: the
// read is tried again then, for a few seconds.
func textOf(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	var err error
	for range 50 {
		var s string
		if s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css))); err == nil {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("read %s: %v", css, err)
	return ""
}

// TestConsoleRefusesWithoutToken: every console page and stream answers 401 (or sends a
// browser to the sign-in form) without the admin token or with a wrong one; with it, they
// answer. Control: the same requests with the token succeed.
func TestConsoleRefusesWithoutToken(t *testing.T) {
	rig := startConsoleRig(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, auth, accept string) int {
		req, _ := http.NewRequest(http.MethodGet, rig.adminURL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/ui/", "/ui/sessions", "/ui/health", "/ui/events", "/ui/static/console.js"} {
		if got := get(p, "", ""); got != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", p, got)
		}
		if got := get(p, "Bearer wrong-"+consoleAdminToken, ""); got != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", p, got)
		}
		if got := get(p, "", "text/html"); got != http.StatusSeeOther {
			t.Errorf("GET %s from a browser without a token: %d, want 303 to the sign-in form", p, got)
		}
		if p == "/ui/events" {
			continue // a stream: its control is in TestConsoleShowsNoCredential
		}
		if got := get(p, "Bearer "+consoleAdminToken, ""); got != http.StatusOK {
			t.Errorf("GET %s with the token (control): %d, want 200", p, got)
		}
	}
	// A forged session cookie is no sign-in.
	req, _ := http.NewRequest(http.MethodGet, rig.adminURL+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: "hookproxy_console", Value: strings.Repeat("0", 64)})
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged session cookie: %d, want 401", resp.StatusCode)
	}
}

// TestConsoleShowsNoCredential: over a session that carried several credentials (the
// client's API key, a database password, a GitLab and a Hugging Face token), neither the
// console's pages nor its event stream contain any of them, nor the admin token. Control:
// the same check over what the client sent finds every one of them, and the upstream got
// none of the removed ones (so a leak could only have come from the console).
func TestConsoleShowsNoCredential(t *testing.T) {
	rig := startConsoleRig(t)

	// The live stream, read raw, while the traffic passes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rig.adminURL+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+consoleAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/events: %v %v", resp, err)
	}
	var (
		mu     sync.Mutex
		stream strings.Builder
		events int
	)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			stream.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "event: decision") {
				events++
			}
			mu.Unlock()
		}
	}()

	// One conversation, three requests: the credentials, a follow-up quoting them again,
	// and a destructive tool call.
	first := rig.chat(t, secretsPrompt)
	rig.chat(t, "Again: "+secretsPrompt+" Then clean up.", secretsPrompt, first.Choices[0].Message.Content)
	rig.chat(t, "Please clean up with the token "+consoleGitLab)

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := events
		mu.Unlock()
		if n >= 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-streamDone

	// Control: the traffic did carry every credential but the admin token, and the
	// policy kept the removed ones from the upstream.
	rig.rec.mu.Lock()
	var sent strings.Builder
	for _, b := range rig.rec.sent {
		sent.Write(b)
	}
	rig.rec.mu.Unlock()
	mustContain(t, "what the client sent (control)", sent.String(), consoleGitLab, consoleHF, consoleDBPassword)
	received := consoleGet(t, rig.model.URL+"/_received", "")
	mustNotContain(t, "what reached the model", received, consoleGitLab, consoleHF, consoleDBPassword)

	pages := map[string]string{"event stream": stream.String()}
	// The live view's filter: only the refusals.
	refusals := consoleGet(t, rig.adminURL+"/ui/?outcome=refused", consoleAdminToken)
	if !strings.Contains(refusals, "hookproxy.tools.destructive") || strings.Contains(refusals, `class="outcome-forwarded"`) ||
		strings.Contains(refusals, `class="outcome-rewritten"`) {
		t.Errorf("the live view filtered on refused shows other outcomes or not the refusal:\n%s", refusals)
	}
	pages["/ui/?outcome=refused"] = refusals
	for _, p := range []string{"/ui/", "/ui/sessions", "/ui/health"} {
		pages[p] = consoleGet(t, rig.adminURL+p, consoleAdminToken)
	}
	sessions := regexp.MustCompile(`href="(/ui/sessions/[^"]+)"`).FindAllStringSubmatch(pages["/ui/sessions"], -1)
	if len(sessions) == 0 {
		t.Fatalf("no session listed: %s", pages["/ui/sessions"])
	}
	for _, m := range sessions {
		pages[m[1]] = consoleGet(t, rig.adminURL+m[1], consoleAdminToken)
	}
	if events < 6 || !strings.Contains(pages["event stream"], "hookproxy.tools.destructive") {
		t.Fatalf("the event stream carried %d decisions: %s", events, pages["event stream"])
	}
	redactions := 0
	for name, body := range pages {
		redactions += strings.Count(body, `class="redaction"`)
		for _, s := range consoleSecrets {
			if strings.Contains(body, s) {
				t.Errorf("%s contains the credential %q", name, s)
			}
		}
	}
	if redactions < 3 {
		t.Errorf("the session pages show %d redactions, want one per request that carried credentials", redactions)
	}
}

func consoleGet(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
