package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// What real agents send that SDK samples do not (issue 12): the proxy is never stricter
// than the upstream about it.

// claudeCodeBody is shaped like a Claude Code 2.x request: its environment block as a
// "system" entry inside messages, cache_control, thinking, context_management,
// output_config and metadata.user_id.
func claudeCodeBody(env string) string {
	return `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,` +
		`"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"system","content":[{"type":"text","text":` + jsonQuote(env) + `,"cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"user","content":[{"type":"text","text":"list the files"}]}],` +
		`"thinking":{"type":"enabled","budget_tokens":31999},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` +
		`"output_config":{"effort":"high"},"metadata":{"user_id":"user_4f2a_account__session_9c1e"},"tools":[]}`
}

func jsonQuote(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func postClaudeCode(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", anthropicKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27")
	req.Header.Set("X-Claude-Code-Session-Id", "9c1e5a2b-1111-4222-8333-944455556666")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestClaudeCodeShapedRequestThroughDefaultChain(t *testing.T) {
	t.Run("no secret: byte-identical", func(t *testing.T) {
		up := newUpstream(t, answer{json: anthropicText, sse: anthropicTextSSE})
		body := claudeCodeBody("<env>Working directory: /repo\nPlatform: linux</env>")
		status, got := postClaudeCode(t, startDefaultProxy(t, up)+"/anthropic/v1/messages?beta=true", body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, got)
		}
		r := up.only(t)
		if r.Path != "/v1/messages" || r.Query != "beta=true" || r.Header.Get("Anthropic-Beta") == "" {
			t.Errorf("upstream got %s?%s beta %q", r.Path, r.Query, r.Header.Get("Anthropic-Beta"))
		}
		assertBytesEqual(t, "the upstream's body", r.Body, []byte(body))
	})
	t.Run("secret in the system entry: redacted there", func(t *testing.T) {
		up := newUpstream(t, answer{json: anthropicText, sse: anthropicTextSSE})
		body := claudeCodeBody("<env>AWS_ACCESS_KEY_ID=" + defaultAWSKey + "</env>")
		status, got := postClaudeCode(t, startDefaultProxy(t, up)+"/anthropic/v1/messages?beta=true", body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, got)
		}
		sent := up.only(t).Body
		mustNotContain(t, "the upstream's body", string(sent), defaultAWSKey)
		m := gjson.GetBytes(sent, "messages.0")
		if m.Get("role").String() != "system" || !strings.Contains(m.Get("content.0.text").String(), "[REDACTED:aws_access_key_id:") ||
			m.Get("content.0.cache_control.type").String() != "ephemeral" {
			t.Errorf("system entry as sent: %s", m.Raw)
		}
		for _, k := range []string{"thinking", "context_management", "output_config", "metadata", "system"} {
			if gjson.GetBytes(sent, k).Raw != gjson.Get(body, k).Raw {
				t.Errorf("%s changed: %s", k, gjson.GetBytes(sent, k).Raw)
			}
		}
	})
	t.Run("control: the secret is in the request", func(t *testing.T) {
		up := newUpstream(t, answer{json: anthropicText, sse: anthropicTextSSE})
		body := claudeCodeBody("<env>AWS_ACCESS_KEY_ID=" + defaultAWSKey + "</env>")
		postClaudeCode(t, up.URL+"/v1/messages?beta=true", body)
		mustContain(t, "the upstream's body", string(up.only(t).Body), defaultAWSKey)
	})
}

func TestCountTokensGetsRequestPolicy(t *testing.T) {
	// Claude Code counts tokens of the whole prompt: a secret in it is redacted there as in
	// /v1/messages, and the upstream's answer comes back untouched.
	body := `{"model":"claude-sonnet-4-5","system":` + jsonQuote(systemText) + `,"messages":[{"role":"user","content":"` + deployPrompt + `"}],"tools":[]}`
	for _, direct := range []bool{false, true} {
		up := newUpstream(t, answer{json: `{"input_tokens":42}`})
		url := up.URL + "/v1/messages/count_tokens?beta=true"
		if !direct {
			url = startDefaultProxy(t, up) + "/anthropic/v1/messages/count_tokens?beta=true"
		}
		status, got := postClaudeCode(t, url, body)
		if status != 200 || string(got) != `{"input_tokens":42}` {
			t.Fatalf("direct=%v: %d %s", direct, status, got)
		}
		r := up.only(t)
		if r.Path != "/v1/messages/count_tokens" {
			t.Errorf("upstream path %s", r.Path)
		}
		if direct {
			mustContain(t, "control: the upstream's body", string(r.Body), defaultAWSKey)
		} else {
			assertRedacted(t, string(r.Body))
		}
	}
}

func TestUnparseableArgumentsJudgedAsText(t *testing.T) {
	// Arguments that are not JSON are judged as their raw text, never as {}: the default
	// chain's destructive list still sees rm -rf / in them.
	resp := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"rm -rf / # not json"}}]},"finish_reason":"tool_calls"}]}`
	for _, direct := range []bool{false, true} {
		up := newUpstream(t, answer{json: resp})
		url := up.URL + "/v1/chat/completions"
		if !direct {
			url = startDefaultProxy(t, up) + "/openai/v1/chat/completions"
		}
		req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if got := strings.Contains(string(b), "rm -rf /"); got != direct {
			t.Errorf("direct=%v: the client got the call: %v\n%s", direct, got, b)
		}
	}
}

func TestCredentialOutsideMessagesRefused(t *testing.T) {
	// A key in a tool description reaches the model as surely as one in a message: the
	// default chain refuses it (no modify target covers the request's params).
	bodies := map[string]string{
		"/openai/v1/chat/completions": `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],` +
			`"tools":[{"type":"function","function":{"name":"deploy","description":"uses key ` + defaultAWSKey + `","parameters":{"type":"object"}}}]}`,
		"/anthropic/v1/messages": `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],` +
			`"tools":[{"name":"deploy","description":"uses key ` + defaultAWSKey + `","input_schema":{"type":"object"}}]}`,
	}
	for path, body := range bodies {
		up := newUpstream(t, answer{json: openaiText})
		if strings.HasPrefix(path, "/anthropic") {
			up = newUpstream(t, answer{json: anthropicText})
		}
		base := startDefaultProxy(t, up)
		req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || len(up.requests()) != 0 {
			t.Errorf("%s: %d %s, upstream got %d requests", path, res.StatusCode, b, len(up.requests()))
		}
		// Control: the same request without the key is served.
		clean := strings.ReplaceAll(body, defaultAWSKey, "none")
		req, _ = http.NewRequestWithContext(withTimeout(t), http.MethodPost, base+path, strings.NewReader(clean))
		req.Header.Set("Content-Type", "application/json")
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s control: %d", path, res.StatusCode)
		}
	}
}

func TestEmbeddingsAndCompletionsGetRequestPolicy(t *testing.T) {
	// Legacy completions and embeddings carry model input: the default chain redacts a key
	// in them as in chat (control: straight to the upstream the key arrives).
	for _, tc := range []struct{ path, body string }{
		{"/v1/embeddings", `{"model":"text-embedding-3-small","input":["` + deployPrompt + `","second"]}`},
		{"/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"` + deployPrompt + `","max_tokens":5}`},
	} {
		for _, direct := range []bool{false, true} {
			up := newUpstream(t, answer{json: `{"object":"list","data":[]}`})
			url := up.URL + tc.path
			if !direct {
				url = startDefaultProxy(t, up) + "/openai" + tc.path
			}
			req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("%s direct=%v: %d", tc.path, direct, res.StatusCode)
			}
			got := string(up.only(t).Body)
			if direct {
				mustContain(t, "control", got, defaultAWSKey)
			} else {
				mustNotContain(t, tc.path, got, defaultAWSKey, defaultGitHubPAT)
				mustContain(t, tc.path, got, "[REDACTED:aws_access_key_id:", "Deploy with key ")
			}
		}
	}
}

func TestCredentialSplitAcrossPartsRefused(t *testing.T) {
	half := len(defaultAWSKey) / 2
	split := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"key ` + defaultAWSKey[:half] +
		`"},{"type":"text","text":"` + defaultAWSKey[half:] + ` deploy"}]}]}`
	whole := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"key ` + defaultAWSKey + `"},{"type":"text","text":" deploy"}]}]}`
	for _, body := range []string{split, whole} {
		up := newUpstream(t, answer{json: openaiText})
		req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, startDefaultProxy(t, up)+"/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if body == split && (res.StatusCode != http.StatusForbidden || len(up.requests()) != 0) {
			t.Errorf("a key split across two parts: %d, upstream got %d requests", res.StatusCode, len(up.requests()))
		}
		if body == whole && (res.StatusCode != 200 || strings.Contains(string(up.only(t).Body), defaultAWSKey)) {
			t.Errorf("control: a whole key is redacted in place: %d", res.StatusCode)
		}
	}
}
