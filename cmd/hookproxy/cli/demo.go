package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/internal/fakemodel"
	"github.com/hookproxy/hookproxy/proxy"
)

// demoSecret is the made-up AWS access key id of the demo: real format (AKIA + 16 of
// [A-Z0-9]), so the secrets policy catches it, and obviously not a real key.
const demoSecret = "AKIAZ7DEMO4HOOKPROXY"

// runDemo is `hookproxy demo [--listen ADDR]`: the first thing a newcomer runs. Offline and
// without an API key, it starts an imitation of the OpenAI, Anthropic and Gemini APIs on a
// loopback port, then the real proxy on ADDR (default app.DemoListen, or any free port
// when that is taken, so it runs beside `hookproxy serve`) in front of it with the embedded default's
// policies (tools, secrets), and prints curl commands that show each of them at work.
// Ctrl-C stops it.
func runDemo(args []string, stdout, stderr io.Writer) int {
	ctx, stop := app.StopSignals(context.Background())
	defer stop()
	return runDemoContext(ctx, args, stdout, stderr)
}

func runDemoContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	flags.SetOutput(stderr)
	listen := flags.String("listen", "", "address of the demo proxy (default "+app.DemoListen+", or a free port when that one is taken)")
	logLevel := flags.String("log-level", "warn", "log level of the proxy's own log on stderr: debug | info | warn | error")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "hookproxy demo: unexpected arguments %q\n", flags.Args())
		return 2
	}
	logger, err := app.NewWriterLogger(stderr, "console", *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy demo: %v\n", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()
	addr := *listen
	if addr == "" {
		addr = app.DemoListen
	}
	err = app.Demo(ctx, app.DemoOptions{
		Listen: addr, AnyPortIfTaken: *listen == "", Logger: logger, Decisions: decisionPrinter(stderr),
		Started:  func(proxyURL, modelURL string) { fmt.Fprint(stdout, demoInstructions(proxyURL, modelURL)) },
		Stopping: func() { fmt.Fprintln(stderr, "hookproxy demo: stopping") },
	})
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy demo: %v\n", err)
		return 1
	}
	return 0
}

// demoStep is one command of the demo and what its answer shows.
type demoStep struct {
	title   string
	command string
	lookFor string
}

// demoSteps are the demo's commands for a proxy at proxyURL in front of the imitation at
// modelURL. Each command is one line starting with curl (tests parse and replay them).
func demoSteps(proxyURL, modelURL string) []demoStep {
	chat := func(body string) string {
		return "curl -s " + proxyURL + "/openai/v1/chat/completions -H 'Content-Type: application/json' -d '" + body + "'"
	}
	return []demoStep{
		{
			title:   "1) An allowed request passes through unchanged.",
			command: chat(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to hookproxy"}]}`),
			lookFor: `"content": "You said: \"Say hello to hookproxy\" ..." - the model got the prompt as written.`,
		},
		{
			title:   "2) A prompt carrying a secret (a made-up AWS access key id) is redacted before it leaves.",
			command: chat(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Deploy to production with the AWS key ` + demoSecret + ` please"}]}`),
			lookFor: `the model echoes [REDACTED:aws_access_key_id:...] where you wrote ` + demoSecret + `.`,
		},
		{
			title:   "   What the model API itself received:",
			command: "curl -s " + modelURL + fakemodel.PathReceived,
			lookFor: `the request body as it reached the upstream: the key is [REDACTED:aws_access_key_id:...], the rest intact.`,
		},
		{
			title:   "3) The model asks for two tool calls; the destructive one is removed before your agent sees it.",
			command: chat(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Please clean up my workspace"}]}`),
			lookFor: `one tool call is left, "Read" with {"path":"README.md"}; the "Bash" call with "rm -rf /" is gone, and the content says why.`,
		},
		{
			title: "4) The same through the Anthropic API, streamed.",
			command: "curl -sN " + proxyURL + "/anthropic/v1/messages -H 'Content-Type: application/json' -H 'anthropic-version: 2023-06-01' -d '" +
				`{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"clean up please"}]}` + "'",
			lookFor: `server-sent events with one tool_use block, for "Read", and a text block saying the Bash call was blocked; no "rm -rf".`,
		},
		{
			title: "5) And through the Gemini API.",
			command: "curl -s " + proxyURL + "/gemini/v1beta/models/gemini-2.5-flash:generateContent -H 'Content-Type: application/json' -d '" +
				`{"contents":[{"role":"user","parts":[{"text":"clean up please"}]}]}` + "'",
			lookFor: `one functionCall part, "Read"; the "Bash" call with "rm -rf /" is gone, and a text part says why.`,
		},
	}
}

func demoInstructions(proxyURL, modelURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hookproxy demo - offline, no API key needed.\n\n")
	fmt.Fprintf(&b, "  proxy            %s  (routes /openai, /anthropic and /gemini)\n", proxyURL)
	fmt.Fprintf(&b, "  model imitation  %s  (stands in for api.openai.com, api.anthropic.com and generativelanguage.googleapis.com)\n", modelURL)
	fmt.Fprintf(&b, "  policies         tools (destructive-command deny list), secrets (redaction):\n")
	fmt.Fprintf(&b, "                   the same chain `hookproxy serve` runs with no configuration\n\n")
	fmt.Fprintf(&b, "Try these in another terminal (each decision is also logged here, on stderr):\n\n")
	for _, s := range demoSteps(proxyURL, modelURL) {
		fmt.Fprintf(&b, "%s\n%s\n   look for: %s\n\n", s.title, s.command, s.lookFor)
	}
	fmt.Fprintf(&b, "Point an SDK at it the same way: OpenAI base URL %s/openai/v1, Anthropic base URL %s/anthropic,\nGemini base URL %s/gemini (any API key).\n", proxyURL, proxyURL, proxyURL)
	fmt.Fprintf(&b, "Ctrl-C stops the demo.\n")
	return b.String()
}

// decisionPrinter reports every intercepted boundary on w, one line each, so the demo's
// terminal shows what the chain decided while the curl terminal shows the effect.
func decisionPrinter(w io.Writer) proxy.Auditor {
	var mu sync.Mutex
	return proxy.AuditorFunc(func(_ context.Context, rec proxy.BoundaryRecord) {
		if rec.Delivery != proxy.DeliveryIntercept {
			return
		}
		what := rec.EventType
		if rec.ToolName != "" {
			what += " " + rec.ToolName
		}
		line := fmt.Sprintf("[decision] %s %s: %s", rec.Route, what, rec.Enforcement)
		switch {
		case rec.Denial != nil:
			line += " - " + rec.Denial.Reason
		case rec.Modified:
			line += " - content modified by the policies"
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, line)
	})
}
