package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// What real agents send that SDK samples do not: the proxy is never stricter
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
		if got := strings.Contains(withoutRefusals(string(b)), "rm -rf /"); got != direct {
			t.Errorf("direct=%v: the client got the call: %v\n%s", direct, got, b)
		}
	}
}

// outsideMessages are requests that carry text the model reads outside the messages:
// tool descriptions, metadata, user, prompt variables (the request's params).
func outsideMessages(secret string) map[string]string {
	return map[string]string{
		"/openai/v1/chat/completions": `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"user":"` + secret + `",` +
			`"tools":[{"type":"function","function":{"name":"deploy","description":"uses key ` + secret + `","parameters":{"type":"object"}}}]}`,
		"/openai/v1/responses": `{"model":"gpt-5","input":"hi","prompt":{"id":"pmpt_1","variables":{"key":"` + secret + `"}},` +
			`"tools":[{"type":"function","name":"deploy","description":"uses key ` + secret + `","parameters":{"type":"object"}}]}`,
		"/anthropic/v1/messages": `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"` + secret + `"},` +
			`"tools":[{"name":"deploy","description":"uses key ` + secret + `","input_schema":{"type":"object"}}]}`,
	}
}

func answerFor(path string) answer {
	switch {
	case strings.HasPrefix(path, "/anthropic"):
		return answer{json: anthropicText}
	case strings.HasSuffix(path, "/responses"):
		return answer{json: `{"id":"resp_r","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[]}`}
	}
	return answer{json: openaiText}
}

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestCredentialOutsideMessagesRedacted: a key in a tool description, metadata, user or a
// prompt variable reaches the model as surely as one in a message. No AHP modify target
// covers the request's params, so the default chain's secrets policy (action redact) has
// the proxy replace it in place (hookproxy.redact_params); the messages and every other
// byte of the request are the client's.
func TestCredentialOutsideMessagesRedacted(t *testing.T) {
	for path, body := range outsideMessages(defaultAWSKey) {
		t.Run(path, func(t *testing.T) {
			// Control: straight to the upstream, the key is there.
			direct := newUpstream(t, answerFor(path))
			postJSON(t, direct.URL+path[strings.Index(path[1:], "/")+1:], body)
			if !strings.Contains(string(direct.only(t).Body), defaultAWSKey) {
				t.Fatal("control: the request does not carry the key")
			}
			up := newUpstream(t, answerFor(path))
			status, b := postJSON(t, startDefaultProxy(t, up)+path, body)
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			got := string(up.only(t).Body)
			if strings.Contains(got, defaultAWSKey) {
				t.Fatalf("the key reached the upstream:\n%s", got)
			}
			want := strings.ReplaceAll(body, defaultAWSKey, "[REDACTED:aws_access_key_id:")
			if n := strings.Count(got, "[REDACTED:aws_access_key_id:"); n != strings.Count(want, "[REDACTED:aws_access_key_id:") {
				t.Errorf("%d placeholders, want one per occurrence:\n%s", n, got)
			}
			mustContain(t, "upstream body", got, `"hi"`, "uses key [REDACTED:")
		})
	}
}

// TestCredentialOutsideMessagesDenied: with action deny the same requests are refused
// and never reach the upstream; without the key they are served.
func TestCredentialOutsideMessagesDenied(t *testing.T) {
	secrets := hookEntry("com.example.e2e.secrets", map[string]any{"type": "in_process", "policy": "secrets", "config": map[string]any{"action": "deny"}},
		subscription{events: []string{"model.request.before"}})
	for path, body := range outsideMessages(defaultAWSKey) {
		t.Run(path, func(t *testing.T) {
			up := newUpstream(t, answerFor(path))
			base := startInlineProxy(t, up.URL, registrationDoc(t, secrets))
			status, b := postJSON(t, base+path, body)
			if status != http.StatusForbidden || len(up.requests()) != 0 {
				t.Fatalf("%d %s, upstream got %d requests", status, b, len(up.requests()))
			}
			mustContain(t, "refusal", string(b), "parameters")
			// Control: the same request without the key is served.
			if status, b := postJSON(t, base+path, strings.ReplaceAll(body, defaultAWSKey, "none")); status != 200 {
				t.Errorf("control: %d %s", status, b)
			}
		})
	}
}

// TestPersonalDataOutsideMessagesRedacted: the pii policy scans the params as well.
func TestPersonalDataOutsideMessagesRedacted(t *testing.T) {
	const email = "jane.doe@corp-mail.org"
	pii := hookEntry("com.example.e2e.pii", map[string]any{"type": "in_process", "policy": "pii", "config": map[string]any{}},
		subscription{events: []string{"model.request.before"}})
	for path, body := range outsideMessages(email) {
		t.Run(path, func(t *testing.T) {
			up := newUpstream(t, answerFor(path))
			status, b := postJSON(t, startInlineProxy(t, up.URL, registrationDoc(t, pii))+path, body)
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			got := string(up.only(t).Body)
			if strings.Contains(got, email) {
				t.Fatalf("the address reached the upstream:\n%s", got)
			}
			mustContain(t, "upstream body", got, "[REDACTED:email:")
		})
	}
}

// TestCredentialInDocumentsRedacted: text documents (plain and base64), Anthropic
// custom-content documents and search results — at the top level and inside a tool
// result — are text the model reads: the default chain redacts a key in each. Top-level
// blocks stay the kind the client sent (base64 stays base64); a rewritten tool result is
// rendered as text (docs/limitations.md).
func TestCredentialInDocumentsRedacted(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	doc := "deploy notes: key " + defaultAWSKey + " rotates monthly"
	bodies := map[string]string{
		"/anthropic/v1/messages": `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"read these"},` +
			`{"type":"document","source":{"type":"base64","media_type":"text/plain","data":"` + b64(doc) + `"}},` +
			`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"` + doc + `"}},` +
			`{"type":"document","source":{"type":"content","content":[{"type":"text","text":"` + doc + `"}]},"title":"t"},` +
			`{"type":"search_result","source":"https://wiki.example/deploy","title":"Deploy","content":[{"type":"text","text":"` + doc + `"}],"citations":{"enabled":true}}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"search","input":{"q":"deploy"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[` +
			`{"type":"search_result","source":"https://wiki.example/keys","title":"Keys","content":[{"type":"text","text":"` + doc + `"}]}]}]}]}`,
		"/openai/v1/chat/completions": `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"read this"},` +
			`{"type":"file","file":{"filename":"notes.txt","file_data":"data:text/plain;base64,` + b64(doc) + `"}}]}]}`,
		"/openai/v1/responses": `{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"read this"},` +
			`{"type":"input_file","filename":"notes.txt","file_data":"data:text/plain;base64,` + b64(doc) + `"}]}]}`,
	}
	for path, body := range bodies {
		t.Run(path, func(t *testing.T) {
			// Control: straight to the upstream, the key is in every document.
			direct := newUpstream(t, answerFor(path))
			postJSON(t, direct.URL+path[strings.Index(path[1:], "/")+1:], body)
			if got := decodedText(direct.only(t).Body); !strings.Contains(got, defaultAWSKey) {
				t.Fatal("control: the request does not carry the key")
			}
			up := newUpstream(t, answerFor(path))
			status, b := postJSON(t, startDefaultProxy(t, up)+path, body)
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			sent := up.only(t).Body
			if got := decodedText(sent); strings.Contains(got, defaultAWSKey) {
				t.Fatalf("the key reached the upstream:\n%s\ndecoded: %s", sent, got)
			}
			mustContain(t, "upstream body", decodedText(sent), "deploy notes: key [REDACTED:aws_access_key_id:")
			if strings.HasPrefix(path, "/anthropic") {
				for _, typ := range []string{`"type":"base64"`, `"type":"content"`, `"type":"search_result"`, `"citations":{"enabled":true}`, `"source":"https://wiki.example/deploy"`} {
					mustContain(t, "upstream body", string(sent), typ)
				}
			}
		})
	}
}

// decodedText is body with every base64 string (and data: URL payload) decoded in place,
// so a test can look for text inside encoded documents.
func decodedText(body []byte) string {
	var out strings.Builder
	out.Write(body)
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.Type == gjson.String:
			s := v.Str
			if i := strings.Index(s, ";base64,"); strings.HasPrefix(s, "data:") && i > 0 {
				s = s[i+len(";base64,"):]
			}
			if raw, err := base64.StdEncoding.DecodeString(s); err == nil && len(s) >= 8 {
				out.WriteString("\n")
				out.Write(raw)
			}
		case v.IsArray() || v.IsObject():
			v.ForEach(func(_, e gjson.Result) bool { walk(e); return true })
		}
	}
	walk(gjson.ParseBytes(body))
	return out.String()
}
