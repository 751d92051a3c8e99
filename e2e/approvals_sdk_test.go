package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/proxy"
)

// Streams whose only tool call (Bash running git push) the tools policy asks about.
var (
	heldChatSSE = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Pushing now."},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_p","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"git push\"}"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	heldAnthropicSSE = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Pushing now.\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"git push\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	heldGeminiSSE = `data: {"candidates":[{"content":{"parts":[{"text":"Pushing now."}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\n\n" +
		`data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"Bash","args":{"command":"git push"}}}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\n\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":3,"totalTokenCount":6},"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\n\n"
)

// TestApprovalKeepAlivesParsedBySDKs holds one streamed call per provider for 60 s, the
// three concurrently, while the proxy writes its keep-alives (every 10 s) into each
// stream; then approves them. The official SDKs read the streams without an error and
// get the call. The received bytes show the keep-alives were there to be parsed.
func TestApprovalKeepAlivesParsedBySDKs(t *testing.T) {
	if testing.Short() {
		t.Skip("holds three streams for 60 s")
	}
	const hold = 60 * time.Second
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			_, _ = io.WriteString(w, heldChatSSE)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_, _ = io.WriteString(w, heldAnthropicSSE)
		case strings.Contains(r.URL.Path, ":streamGenerateContent"):
			_, _ = io.WriteString(w, heldGeminiSSE)
		default:
			http.NotFound(w, r)
		}
	}))
	defer up.Close()
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nsource: urn:hookproxy:e2e\nroutes:\n"+
		"  - {prefix: /openai, api: openai, upstream: %[1]s}\n  - {prefix: /anthropic, api: anthropic, upstream: %[1]s}\n"+
		"  - {prefix: /gemini, api: gemini, upstream: %[1]s}\n", up.URL)), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RegistrationInline = registrationDoc(t, hookEntry("com.example.e2e.tools",
		map[string]any{"type": "in_process", "policy": "tools", "config": map[string]any{"deny": []any{
			map[string]any{"name": "push", "tool": "Bash", "command": "git", "inputPattern": "push", "action": "ask"}}}},
		subscription{events: []string{"tool.before"}}))
	ch, err := app.BuildChain(cfg, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	svc, err := approvals.New(approvals.Options{Store: approvals.NewMemory(), Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	s, err := proxy.New(cfg, ch, proxy.Options{Approvals: &proxy.Approvals{Service: svc, Generation: "e2e"}})
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(s)
	defer func() { px.Close(); _ = s.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), hold+time.Minute)
	defer cancel()
	type outcome struct {
		calls string
		err   error
	}
	recs := map[string]*recorder{"openai": newRecorder(t), "anthropic": newRecorder(t), "gemini": newRecorder(t)}
	out := map[string]outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(name string, f func() (string, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls, err := f()
			mu.Lock()
			out[name] = outcome{calls, err}
			mu.Unlock()
		}()
	}
	run("openai", func() (string, error) {
		c := openai.NewClient(openaioption.WithBaseURL(px.URL+"/openai/v1"), openaioption.WithAPIKey(openaiKey),
			openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{Transport: recs["openai"]}))
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("push it")}})
		defer st.Close()
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			b.WriteString(tc.Function.Name + tc.Function.Arguments)
		}
		return b.String(), nil
	})
	run("anthropic", func() (string, error) {
		c := anthropic.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(px.URL+"/anthropic"),
			anthropicoption.WithAPIKey(anthropicKey), anthropicoption.WithMaxRetries(0),
			anthropicoption.WithHTTPClient(&http.Client{Transport: recs["anthropic"]}))
		st := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("push it"))}})
		defer st.Close()
		var msg anthropic.Message
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				return "", err
			}
		}
		if err := st.Err(); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, blk := range msg.Content {
			if blk.Type == "tool_use" {
				b.WriteString(blk.Name + string(blk.Input))
			}
		}
		return b.String(), nil
	})
	run("gemini", func() (string, error) {
		c := geminiClient(t, px.URL+"/gemini", recs["gemini"])
		var b strings.Builder
		for resp, err := range c.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("push it"), nil) {
			if err != nil {
				return "", err
			}
			for _, fc := range resp.FunctionCalls() {
				b.WriteString(fc.Name + fmt.Sprint(fc.Args))
			}
		}
		return b.String(), nil
	})

	// Wait until the three calls are held, hold them, then approve them.
	deadline := time.Now().Add(30 * time.Second)
	var pending []approvals.Record
	for len(pending) < 3 && time.Now().Before(deadline) {
		pending, _ = svc.List(ctx, "pending")
		time.Sleep(50 * time.Millisecond)
	}
	if len(pending) != 3 {
		t.Fatalf("%d calls held, want 3", len(pending))
	}
	time.Sleep(hold)
	for _, r := range pending {
		if _, err := svc.Decide(ctx, r.ID, approvals.DecisionApprove, "e2e", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	keepAlives := map[string]func(string) int{
		"openai":    func(s string) int { return strings.Count(s, ": keep-alive\n\n") },
		"anthropic": func(s string) int { return strings.Count(s, "event: ping\ndata: {\"type\": \"ping\"}\n\n") },
		// Gemini's keep-alive is an empty line: a run of n+2 line feeds after an event.
		"gemini": func(s string) int {
			run, longest := 0, 0
			for _, c := range s {
				if c == '\n' {
					run++
					longest = max(longest, run)
				} else {
					run = 0
				}
			}
			return longest - 2
		},
	}
	for name, o := range out {
		if o.err != nil {
			t.Errorf("%s SDK: %v", name, o.err)
			continue
		}
		if !strings.Contains(o.calls, "Bash") || !strings.Contains(o.calls, "git push") {
			t.Errorf("%s SDK: approved call missing: %q", name, o.calls)
		}
		if n := keepAlives[name](string(recs[name].received())); n < 4 {
			t.Errorf("%s: %d keep-alives in the stream over %s, want at least 4", name, n, hold)
		}
	}
}
