package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/policies"
	"github.com/hookproxy/hookproxy/proxy"
)

// A credential typed into a conversation whose history holds content the canonical list
// cannot carry whole — a reasoning model's encrypted reasoning, an item reference, server-
// held history, Anthropic redacted thinking and signed thinking, images — is taken out of
// the visible text in place (hookproxy.redact_text) by the embedded default chain, and the
// request is answered: the upstream receives every opaque item byte for byte and the
// credential nowhere.

const withheldKey = defaultAWSKey

// withheldPlaceholder is what the secrets policy writes for withheldKey.
func withheldPlaceholder() string {
	sum := sha256.Sum256([]byte(withheldKey))
	return "[REDACTED:aws_access_key_id:" + hex.EncodeToString(sum[:4]) + "]"
}

const (
	withheldPrompt = "Deploy with key " + withheldKey + " and report back."
	pngData        = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

	responsesDone = `{"id":"resp_e2e","object":"response","created_at":1760000000,"status":"completed","model":"gpt-5","output":[` +
		`{"id":"msg_e2e","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[]}]}],` +
		`"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}`
	geminiDone = `{"candidates":[{"content":{"parts":[{"text":"Done."}],"role":"model"},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"totalTokenCount":12},"modelVersion":"gemini-3-pro-preview","responseId":"resp-g3"}`
)

// withheldCase is one conversation: the request path under the proxy's route, the body,
// the paths (gjson) of what must pass byte for byte, and the path of the text that holds
// the credential.
type withheldCase struct {
	name, route, path, body string
	opaque                  []string
	text                    string
}

var withheldCases = []withheldCase{
	{
		name: "responses/encrypted-reasoning-and-image", route: "/openai", path: "/v1/responses",
		body: `{"model":"gpt-5","store":false,"include":["reasoning.encrypted_content"],"input":[` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files."}]},` +
			`{"type":"reasoning","id":"rs_01a","summary":[],"encrypted_content":"gAAAAABoE2ncRYPTEDreasoning-one=="},` +
			`{"type":"function_call","id":"fc_01","call_id":"call_ls","name":"shell","arguments":"{\"command\":[\"ls\"]}"},` +
			`{"type":"function_call_output","call_id":"call_ls","output":"README.md\ngo.mod"},` +
			`{"type":"reasoning","id":"rs_01b","summary":[{"type":"summary_text","text":"Listed."}],"encrypted_content":"gAAAAABoE2ncRYPTEDreasoning-two=="},` +
			`{"type":"message","id":"msg_01","role":"assistant","content":[{"type":"output_text","text":"Two files.","annotations":[]}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"` + withheldPrompt + `"},{"type":"input_image","image_url":"data:image/png;base64,` + pngData + `","detail":"auto"}]}]}`,
		opaque: []string{"input.0", "input.1", "input.2", "input.3", "input.4", "input.5", "input.6.content.1", "include", "store"},
		text:   "input.6.content.0.text",
	},
	{
		name: "responses/previous-response-and-item-reference", route: "/openai", path: "/v1/responses",
		body: `{"model":"gpt-5","previous_response_id":"resp_prev01","input":[` +
			`{"type":"item_reference","id":"rs_prev01"},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"` + withheldPrompt + `"}]}]}`,
		opaque: []string{"previous_response_id", "input.0"},
		text:   "input.1.content.0.text",
	},
	{
		name: "chat/image", route: "/openai", path: "/v1/chat/completions",
		body: `{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},` +
			`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + pngData + `"}},{"type":"text","text":"` + withheldPrompt + `"}]}]}`,
		opaque: []string{"messages.0", "messages.1.content.0"},
		text:   "messages.1.content.1.text",
	},
	{
		name: "anthropic/redacted-thinking-and-images", route: "/anthropic", path: "/v1/messages",
		body: `{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngData + `"}}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"I should open the file.","signature":"EqQBCkYIBxgCKkBsignedthinking=="},` +
			`{"type":"redacted_thinking","data":"EmwKAhgBEgyredactedthinkingdata=="},` +
			`{"type":"tool_use","id":"toolu_01","name":"Read","input":{"path":"shot.png"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngData + `"}}]},` +
			`{"type":"text","text":"` + withheldPrompt + `"}]}]}`,
		opaque: []string{"messages.0", "messages.1", "messages.2.content.0", "thinking"},
		text:   "messages.2.content.1.text",
	},
	{
		name: "anthropic/tool-result-with-image", route: "/anthropic", path: "/v1/messages",
		body: `{"model":"claude-sonnet-4-5","max_tokens":2048,"messages":[` +
			`{"role":"user","content":"Show me the deploy screen."},` +
			`{"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwKAhgBEgyredactedthinkingdata=="},{"type":"tool_use","id":"toolu_02","name":"Screenshot","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02","content":[` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngData + `"}},{"type":"text","text":"` + withheldPrompt + `"}]}]}]}`,
		opaque: []string{"messages.0", "messages.1", "messages.2.content.0.content.0", "messages.2.content.0.tool_use_id"},
		text:   "messages.2.content.0.content.1.text",
	},
	{
		name: "gemini/3-signatures-and-image", route: "/gemini", path: "/v1beta/models/gemini-3-pro-preview:generateContent",
		body: `{"contents":[` +
			`{"role":"user","parts":[{"text":"What is in this picture?"},{"inlineData":{"mimeType":"image/png","data":"` + pngData + `"}}]},` +
			`{"role":"model","parts":[{"text":"Reading the file first.","thought":true},{"functionCall":{"name":"read_file","args":{"path":"a.txt"}},"thoughtSignature":"CiQB0e2Kb3Nsignature=="}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"content":"hello"}}}]},` +
			`{"role":"user","parts":[{"text":"` + withheldPrompt + `"},{"inlineData":{"mimeType":"image/jpeg","data":"` + pngData + `"}}]}],` +
			`"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`,
		opaque: []string{"contents.0", "contents.1", "contents.2", "contents.3.parts.1", "generationConfig"},
		text:   "contents.3.parts.0.text",
	},
}

// withheldUpstream records what it receives and answers each API with a short final answer.
type withheldUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newWithheldUpstream(t *testing.T) *withheldUpstream {
	u := &withheldUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, b)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/responses"):
			io.WriteString(w, responsesDone)
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			io.WriteString(w, openaiText)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			io.WriteString(w, anthropicText)
		case strings.Contains(r.URL.Path, ":generateContent"):
			io.WriteString(w, geminiDone)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *withheldUpstream) last(t *testing.T) []byte {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.bodies[len(u.bodies)-1]
}

// startAllRoutesProxy runs the real proxy with the registration reg on the three model
// APIs in front of upstreamURL, wired as `hookproxy serve` wires it.
func startAllRoutesProxy(t *testing.T, upstreamURL string, reg []byte) string {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
source: urn:hookproxy:e2e-withheld
routes:
  - prefix: /openai
    api: openai
    upstream: %[1]s
  - prefix: /anthropic
    api: anthropic
    upstream: %[1]s
  - prefix: /gemini
    api: gemini
    upstream: %[1]s
`, upstreamURL)), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.RegistrationInline = reg
	ch, err := app.BuildChain(cfg, "", nil)
	if err != nil || ch == nil {
		t.Fatalf("chain: %v", err)
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

func postWithheld(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-e2e-client")
	req.Header.Set("x-api-key", "sk-ant-e2e-client")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkWithheld reports what is wrong with got, the body the upstream received, against
// sent: an opaque member changed, the credential present, or the visible text not the
// sent text with the credential replaced by its placeholder.
func checkWithheld(c withheldCase, sent, got []byte) []string {
	var bad []string
	for _, p := range c.opaque {
		s, g := gjson.GetBytes(sent, p), gjson.GetBytes(got, p)
		if !s.Exists() || s.Raw != g.Raw {
			bad = append(bad, fmt.Sprintf("%s: sent %s, upstream got %s", p, s.Raw, g.Raw))
		}
	}
	if bytes.Contains(got, []byte(withheldKey)) {
		bad = append(bad, "the credential reached the upstream")
	}
	want := strings.ReplaceAll(withheldPrompt, withheldKey, withheldPlaceholder())
	if g := gjson.GetBytes(got, c.text).String(); g != want {
		bad = append(bad, fmt.Sprintf("%s = %q, want %q", c.text, g, want))
	}
	return bad
}

// TestDefaultChainRedactsBesideWithheldContent: through the proxy each conversation is
// answered 200, the credential is replaced by its placeholder in the one text that held it,
// and every opaque member arrives byte for byte. Control: the same body sent straight to
// the recording upstream fails the same check (the credential arrives), so the check can
// fail.
func TestDefaultChainRedactsBesideWithheldContent(t *testing.T) {
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			if !gjson.Valid(c.body) {
				t.Fatal("test body is not JSON")
			}
			up := newWithheldUpstream(t)
			base := startAllRoutesProxy(t, up.URL, config.Default().RegistrationInline)
			checkWithheldThrough(t, c, base, up)
		})
	}
}

// TestPolicyServerRedactsBesideWithheldContent: the same with the built-in policies served
// by `hookproxy backend` over HTTP (the compose deployment's policy server): the proxy's
// offer reaches them through the backend and their redactions come back in its one reply.
func TestPolicyServerRedactsBesideWithheldContent(t *testing.T) {
	doc, problems, err := registration.Parse(config.DefaultRegistration, app.RegistrationOptions())
	if err != nil || len(problems) > 0 {
		t.Fatalf("registration: %v %v", err, problems)
	}
	ps, err := backend.New(doc, policies.Factories(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	psrv := httptest.NewServer(ps.Handler())
	t.Cleanup(psrv.Close)
	reg := []byte(`{"protocolVersion":"draft","hooks":[{"id":"e2e.policy_server","transport":{"type":"http","url":"` + psrv.URL + `/"},` +
		`"subscriptions":[{"events":["model.request.before","tool.before","tool.after"],"mode":"intercept","timeoutMs":3000,"failurePolicy":"fail-closed","content":{"default":"body"}}]}]}`)
	for _, c := range withheldCases {
		t.Run(c.name, func(t *testing.T) {
			up := newWithheldUpstream(t)
			checkWithheldThrough(t, c, startAllRoutesProxy(t, up.URL, reg), up)
		})
	}
}

// checkWithheldThrough sends c through the proxy at base and straight to a second
// upstream (the control), and checks what each upstream received.
func checkWithheldThrough(t *testing.T, c withheldCase, base string, up *withheldUpstream) {
	t.Helper()
	status, answer := postWithheld(t, base+c.route+c.path, c.body)
	if status != http.StatusOK {
		t.Fatalf("through the proxy: %d %s", status, answer)
	}
	if bad := checkWithheld(c, []byte(c.body), up.last(t)); len(bad) > 0 {
		t.Errorf("through the proxy:\n%s\nupstream body: %s", strings.Join(bad, "\n"), up.last(t))
	}

	// Control: straight to the upstream the credential arrives.
	direct := newWithheldUpstream(t)
	if status, answer := postWithheld(t, direct.URL+c.path, c.body); status != http.StatusOK {
		t.Fatalf("control: %d %s", status, answer)
	}
	if bad := checkWithheld(c, []byte(c.body), direct.last(t)); len(bad) == 0 {
		t.Error("control: the check passes on the unprotected body")
	}
}
