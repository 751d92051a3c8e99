package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Credentials of the kinds added to the secrets policy (basic_auth, url_password,
// gitlab_token, huggingface_token), and credentials in strings the canonical messages do
// not model (a chat message's name, an Anthropic document's title and context, a search
// result's source), in Gemini inline JSON, and in a computer-use screenshot's current_url:
// the default chain keeps each from the upstream. Every value is made up.
const (
	detGitLabToken = "glpat-ORS-6ilI8ihN5KXSc7Tv"
	detHFToken     = "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"
	detDBPassword  = "s3cr3t-Pw7x"
	detDSN         = "postgres://app:" + detDBPassword + "@db.internal:5432/orders"
	detBasicValue  = "ZGVwbG95OlpxOCF2UjIja0xtOQ==" // deploy:Zq8!vR2#kLm9
)

// TestNewCredentialKindsRedacted: a prompt carrying a connection string, a GitLab token, a
// Hugging Face token and an HTTP Basic header reaches the upstream with each credential
// replaced by its kind's placeholder, the connection string still naming its user and
// host. Control: straight to the upstream every credential arrives.
func TestNewCredentialKindsRedacted(t *testing.T) {
	prompt := "Connect with " + detDSN + ", push with " + detGitLabToken + ", pull the model with " + detHFToken +
		" and call the API with -H 'Authorization: Basic " + detBasicValue + "'."
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":` + jsonString(prompt) + `}]}`
	secrets := []string{detDBPassword, detGitLabToken, detHFToken, detBasicValue}

	direct := newUpstream(t, answer{json: openaiText})
	postJSON(t, direct.URL+"/v1/chat/completions", body)
	mustContain(t, "direct request (control)", string(direct.only(t).Body), secrets...)

	up := newUpstream(t, answer{json: openaiText})
	if status, b := postJSON(t, startDefaultProxy(t, up)+"/openai/v1/chat/completions", body); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	sent := string(up.only(t).Body)
	mustNotContain(t, "upstream request", sent, secrets...)
	mustContain(t, "upstream request", sent, "postgres://app:[REDACTED:url_password:", "@db.internal:5432/orders",
		"[REDACTED:gitlab_token:", "[REDACTED:huggingface_token:", "Basic [REDACTED:basic_auth:")
}

// TestCredentialsOutsideModeledTextRedacted: strings the message codecs do not model as
// parts — a chat message's name, an Anthropic document's title and context and a search
// result's source, file names and remote image and file URLs — are read by the policies
// (as the params' message-list residue) and redacted in place; Gemini inlineData of application/json and a Responses
// computer_call_output's current_url are text parts. Controls: straight to the upstream
// the credential arrives; with the secrets policy set to deny, the proxy refuses the same
// request (it is read, not blindly rewritten).
func TestCredentialsOutsideModeledTextRedacted(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		name, path, body, secret, placeholder string
		refusable                             bool // the list holds a withheld attachment
	}{
		{"chat message name", "/openai/v1/chat/completions",
			`{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},` +
				`{"role":"user","name":"` + detGitLabToken + `","content":"hello"}]}`,
			detGitLabToken, "[REDACTED:gitlab_token:", false},
		{"anthropic document title and search result source", "/anthropic/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[` +
				`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"},"title":"creds ` + detHFToken + `","context":"token ` + detHFToken + `"},` +
				`{"type":"search_result","source":"` + detDSN + `","title":"DB","content":[{"type":"text","text":"db notes"}]},` +
				`{"type":"text","text":"summarize"}]}]}`,
			detHFToken, "[REDACTED:huggingface_token:", false},
		{"chat remote image URL", "/openai/v1/chat/completions",
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` +
				`{"type":"image_url","image_url":{"url":"https://files.example/cat.png?access_token=` + detHFToken + `"}}]}]}`,
			detHFToken, "[REDACTED:huggingface_token:", false},
		{"responses input_file filename", "/openai/v1/responses",
			`{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"read it"},` +
				`{"type":"input_file","filename":"` + detGitLabToken + `.txt","file_data":"data:text/plain;base64,` + b64("notes") + `"}]}]}`,
			detGitLabToken, "[REDACTED:gitlab_token:", false},
		{"anthropic image source URL", "/anthropic/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[` +
				`{"type":"image","source":{"type":"url","url":"https://admin:` + detDBPassword + `@cdn.example/cat.png"}},{"type":"text","text":"describe"}]}]}`,
			detDBPassword, "[REDACTED:url_password:", false},
		{"gemini fileData URI", "/gemini/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"summarize"},` +
				`{"fileData":{"mimeType":"application/pdf","fileUri":"https://files.example/r.pdf?token=` + detGitLabToken + `"}}]}]}`,
			detGitLabToken, "[REDACTED:gitlab_token:", false},
		{"gemini inline JSON", "/gemini/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"read this config"},` +
				`{"inlineData":{"mimeType":"application/json","data":"` + b64(`{"gitlab":"`+detGitLabToken+`"}`) + `"}}]}]}`,
			detGitLabToken, "[REDACTED:gitlab_token:", false},
		{"computer_call_output current_url", "/openai/v1/responses",
			`{"model":"computer-use-preview","input":[` +
				`{"type":"computer_call","call_id":"call_cu","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"},` +
				`{"type":"computer_call_output","call_id":"call_cu","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,iVBORw0KGgo=",` +
				`"current_url":"https://admin:` + detDBPassword + `@intranet.example/dashboard"}}]}`,
			detDBPassword, "[REDACTED:url_password:", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := answerFor(tc.path)
			if strings.HasPrefix(tc.path, "/gemini") {
				a = answer{json: geminiWhole}
			}
			direct := newUpstream(t, a)
			postJSON(t, direct.URL+tc.path[strings.Index(tc.path[1:], "/")+1:], tc.body)
			if got := decodedText(direct.only(t).Body); !strings.Contains(got, tc.secret) {
				t.Fatal("control: the request does not carry the credential")
			}

			deny := hookEntry("com.example.e2e.secrets", map[string]any{"type": "in_process", "policy": "secrets", "config": map[string]any{"action": "deny"}},
				subscription{events: []string{"model.request.before"}})
			refused := newUpstream(t, a)
			if status, b := postJSON(t, startInlineProxy(t, refused.URL, registrationDoc(t, deny))+tc.path, tc.body); status != http.StatusForbidden {
				t.Fatalf("with action deny: %d %s", status, b)
			}
			if n := len(refused.requests()); n != 0 {
				t.Fatalf("a refused request reached the upstream (%d)", n)
			}

			up := newUpstream(t, a)
			status, b := postJSON(t, startDefaultProxy(t, up)+tc.path, tc.body)
			if status == http.StatusForbidden && tc.refusable {
				// A screenshot's bytes are withheld from the policy, so it may not replace
				// the list (a replacement could not carry them): it refuses instead, and
				// nothing is forwarded.
				mustContain(t, "refusal", string(b), "hookproxy.secrets.")
				if n := len(up.requests()); n != 0 {
					t.Fatalf("a refused request reached the upstream (%d)", n)
				}
				return
			}
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			sent := up.only(t).Body
			if got := decodedText(sent); strings.Contains(got, tc.secret) {
				t.Fatalf("the credential reached the upstream:\n%s", sent)
			}
			mustContain(t, "upstream body", decodedText(sent), tc.placeholder)

		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
