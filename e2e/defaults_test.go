package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/proxy"
)

// The chain `hookproxy serve` runs without any configuration: the embedded default
// registration (built-in secrets and tools policies), loaded through the same code as serve,
// here in front of a loopback upstream instead of the public APIs.

const (
	defaultAWSKey    = "AKIAW4162OR5EL2XEMIE"                     // made up, real format
	defaultGitHubPAT = "ghp_Vj5T3JeO5VGC2ZGwZcDTeBewmjfUM7bFkIsz" // made up, real format
	deployPrompt     = "Deploy with key " + defaultAWSKey + " and push with " + defaultGitHubPAT + ", then report back."
)

func startDefaultProxy(t *testing.T, up *upstream) string {
	t.Helper()
	return startDefaultProxyB(t, up.URL)
}

// startDefaultProxyB starts the proxy with the embedded default chain in front of the
// upstream at upstreamURL.
func startDefaultProxyB(t testing.TB, upstreamURL string) string {
	t.Helper()
	return startInlineProxy(t, upstreamURL, config.Default().RegistrationInline)
}

// startInlineProxy starts the proxy in front of the upstream at upstreamURL with the
// registration document reg wired as `hookproxy serve` wires one, built-in policies
// (in_process transports) included.
func startInlineProxy(t testing.TB, upstreamURL string, reg []byte) string {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
source: urn:hookproxy:e2e-defaults
routes:
  - prefix: /openai
    api: openai
    upstream: %[1]s
  - prefix: /anthropic
    api: anthropic
    upstream: %[1]s
  - prefix: /azure
    api: openai
    upstream: %[1]s
  - prefix: /gemini
    api: gemini
    upstream: %[1]s
`, upstreamURL)), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.RegistrationInline = reg
	if len(cfg.RegistrationInline) == 0 {
		t.Fatal("no registration")
	}
	ch, err := app.BuildChain(cfg, "", nil)
	if err != nil || ch == nil {
		t.Fatalf("default chain: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	s, err := proxy.New(cfg, ch, proxy.Options{})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); _ = s.Close() })
	return srv.URL
}

// TestDefaultPoliciesRedactCredentials: a prompt carrying an AWS access key id and a GitHub
// token reaches the upstream with both redacted and everything else intact.
func TestDefaultPoliciesRedactCredentials(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("openai/"+modeName(stream), func(t *testing.T) {
			up := newUpstream(t, answer{json: openaiText, sse: openaiTextSSE})
			base := startDefaultProxy(t, up)
			c := openai.NewClient(openaioption.WithBaseURL(base+"/openai/v1"), openaioption.WithAPIKey(openaiKey),
				openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{}))
			params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage(systemText), openai.UserMessage(deployPrompt)}}
			ctx := withTimeout(t)
			if stream {
				s := c.Chat.Completions.NewStreaming(ctx, params)
				for s.Next() {
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
			} else if _, err := c.Chat.Completions.New(ctx, params); err != nil {
				t.Fatal(err)
			}
			assertRedacted(t, string(up.only(t).Body))
		})
		t.Run("anthropic/"+modeName(stream), func(t *testing.T) {
			up := newUpstream(t, answer{json: anthropicText, sse: anthropicTextSSE})
			base := startDefaultProxy(t, up)
			c := anthropic.NewClient(anthropicoption.WithBaseURL(base+"/anthropic"), anthropicoption.WithAPIKey(anthropicKey),
				anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(&http.Client{}))
			params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
				System:   []anthropic.TextBlockParam{{Text: systemText}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(deployPrompt))}}
			ctx := withTimeout(t)
			if stream {
				s := c.Messages.NewStreaming(ctx, params)
				for s.Next() {
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
			} else if _, err := c.Messages.New(ctx, params); err != nil {
				t.Fatal(err)
			}
			assertRedacted(t, string(up.only(t).Body))
		})
	}
}

func assertRedacted(t *testing.T, body string) {
	t.Helper()
	mustNotContain(t, "upstream body", body, defaultAWSKey, defaultGitHubPAT)
	mustContain(t, "upstream body", body, "[REDACTED:aws_access_key_id:", "[REDACTED:github_token:",
		"Deploy with key ", " and push with ", ", then report back.", systemText)
}

// TestDefaultPoliciesRemoveDestructiveCall: the model asks for Bash `rm -rf /` and Read;
// the client receives only the Read call, streamed or not.
func TestDefaultPoliciesRemoveDestructiveCall(t *testing.T) {
	for _, p := range providers {
		for _, stream := range []bool{false, true} {
			t.Run(p.name+"/"+modeName(stream), func(t *testing.T) {
				up := newUpstream(t, p.calls)
				base := startDefaultProxy(t, up)
				res, err := p.send(withTimeout(t), base+p.prefix, newRecorder(t), convPrompt, stream)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Calls) != 1 || res.Calls[0].Name != "Read" {
					t.Fatalf("client got calls %+v, want only Read", res.Calls)
				}
				for _, c := range res.Calls {
					if strings.Contains(c.Args, "rm -rf") {
						t.Fatalf("destructive arguments reached the client: %+v", c)
					}
				}
			})
		}
	}
}
