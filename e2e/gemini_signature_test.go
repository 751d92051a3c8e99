package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/config"
)

// Gemini 3 thought signatures through a removed call. Gemini 3 signs a turn that calls
// functions on its first functionCall part and refuses, with 400 INVALID_ARGUMENT, a
// request whose current turn holds a model step whose first call lacks the signature it
// was given. The imitation upstream below enforces that rule; the client keeps the
// model's content exactly as it received it (as a client that does not patch its history
// does) and answers each call it got.

const (
	g3Model     = "gemini-3-pro-preview"
	g3Signature = "CiQBjz1rX8Z3-first-call-signature=="
	g3Prompt    = "Clean the build directory and show me the README."
)

// g3Turn is the model's step: a thought, then two parallel calls — a destructive one the
// default tools policy removes, which carries the step's signature, and a harmless one.
var (
	g3Thought = `{"text":"The user wants a clean build.","thought":true}`
	g3Rm      = `{"functionCall":{"name":"run_shell_command","args":{"command":"rm -rf /"}},"thoughtSignature":"` + g3Signature + `"}`
	g3Read    = `{"functionCall":{"name":"read_file","args":{"path":"README.md"}}}`
	g3Usage   = `"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":12,"totalTokenCount":32},"modelVersion":"` + g3Model + `","responseId":"resp-g3-1"`
	g3Final   = `{"candidates":[{"content":{"parts":[{"text":"The README says hello."}],"role":"model"},"finishReason":"STOP","index":0}],` + g3Usage + `}`
)

func g3Whole(calls ...string) string {
	return `{"candidates":[{"content":{"parts":[` + strings.Join(append([]string{g3Thought}, calls...), ",") + `],"role":"model"},"finishReason":"STOP","index":0}],` + g3Usage + `}`
}

func g3Chunks(calls ...string) []string {
	out := []string{`{"candidates":[{"content":{"parts":[` + g3Thought + `],"role":"model"},"index":0}],"modelVersion":"` + g3Model + `","responseId":"resp-g3-1"}`}
	for _, c := range calls {
		// Each call in a chunk of its own: the signature must follow the stream across chunks.
		out = append(out, `{"candidates":[{"content":{"parts":[`+c+`],"role":"model"},"index":0}],"modelVersion":"`+g3Model+`","responseId":"resp-g3-1"}`)
	}
	return append(out, `{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],`+g3Usage+`}`)
}

// g3Upstream imitates Gemini 3: the first request is answered with the step (calls), every
// later one — which carries function responses — is checked for the signature rule and
// answered with a final text.
type g3Upstream struct {
	*httptest.Server
	calls []string
	mu    sync.Mutex
	got   [][]byte
}

func newG3Upstream(t *testing.T, calls ...string) *g3Upstream {
	u := &g3Upstream{calls: calls}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *g3Upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.got = append(u.got, body)
	u.mu.Unlock()
	stream := strings.Contains(r.URL.Path, ":streamGenerateContent")
	if msg := g3SignatureProblem(body); msg != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"status":"INVALID_ARGUMENT"}}`, msg)
		return
	}
	first := !strings.Contains(string(body), "functionResponse")
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		if first {
			io.WriteString(w, g3Whole(u.calls...))
		} else {
			io.WriteString(w, g3Final)
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunks := []string{g3Final}
	if first {
		chunks = g3Chunks(u.calls...)
	}
	for _, c := range chunks {
		io.WriteString(w, "data: "+c+"\r\n\r\n")
		w.(http.Flusher).Flush()
	}
}

// g3SignatureProblem applies Gemini 3's rule to a request: in the current turn (the
// contents after the last user content that is not only function responses), the first
// functionCall part of every model step must carry the signature the upstream issued.
func g3SignatureProblem(body []byte) string {
	contents := gjson.GetBytes(body, "contents").Array()
	start := 0
	for i, c := range contents {
		if c.Get("role").String() != "user" {
			continue
		}
		onlyResponses := true
		c.Get("parts").ForEach(func(_, p gjson.Result) bool {
			onlyResponses = onlyResponses && p.Get("functionResponse").Exists()
			return true
		})
		if !onlyResponses {
			start = i + 1
		}
	}
	for i := start; i < len(contents); i++ {
		c := contents[i]
		if c.Get("role").String() != "model" {
			continue
		}
		for j, p := range c.Get("parts").Array() {
			if !p.Get("functionCall").Exists() {
				continue
			}
			if p.Get("thoughtSignature").String() != g3Signature {
				return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d.",
					p.Get("functionCall.name").String(), j+1)
			}
			break // only the step's first call is signed
		}
	}
	return ""
}

// g3Client is a Gemini client that keeps the model content it receives as it is: it
// sends the prompt, assembles the answer (streamed or not), then sends the history with a
// functionResponse for every call it got. It returns the model content it kept and the
// status and body of the second request.
func g3Client(t *testing.T, base string, stream bool) (model []json.RawMessage, status int, answer string) {
	t.Helper()
	user := `{"role":"user","parts":[{"text":"` + g3Prompt + `"}]}`
	req := func(contents ...string) (int, string) {
		path := base + "/v1beta/models/" + g3Model + ":generateContent"
		if stream {
			path = base + "/v1beta/models/" + g3Model + ":streamGenerateContent?alt=sse"
		}
		body := `{"contents":[` + strings.Join(contents, ",") + `],"tools":[{"functionDeclarations":[{"name":"run_shell_command"},{"name":"read_file"}]}]}`
		r, err := http.NewRequestWithContext(withTimeout(t), http.MethodPost, path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("x-goog-api-key", geminiKey)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, first := req(user)
	if status != http.StatusOK {
		t.Fatalf("first request: %d %s", status, first)
	}
	var chunks []string
	if stream {
		for _, line := range strings.Split(first, "\n") {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: "); ok {
				chunks = append(chunks, d)
			}
		}
	} else {
		chunks = []string{first}
	}
	// The SDKs keep every part of every chunk in order (empty text parts dropped).
	var responses []string
	for _, c := range chunks {
		gjson.Get(c, "candidates.0.content.parts").ForEach(func(_, p gjson.Result) bool {
			if p.Get("text").Exists() && p.Get("text").String() == "" && !p.Get("thoughtSignature").Exists() {
				return true
			}
			model = append(model, json.RawMessage(p.Raw))
			if fc := p.Get("functionCall"); fc.Exists() {
				responses = append(responses, `{"functionResponse":{"name":`+fc.Get("name").Raw+`,"response":{"output":"ok"}}}`)
			}
			return true
		})
	}
	parts := make([]string, len(model))
	for i, p := range model {
		parts[i] = string(p)
	}
	contents := []string{user, `{"role":"model","parts":[` + strings.Join(parts, ",") + `]}`}
	if len(responses) > 0 {
		contents = append(contents, `{"role":"user","parts":[`+strings.Join(responses, ",")+`]}`)
	} else {
		contents = append(contents, `{"role":"user","parts":[{"text":"Go on."}]}`)
	}
	status, answer = req(contents...)
	return model, status, answer
}

// startGemini3Proxy runs the real proxy with the embedded default chain (tools, secrets)
// on a /gemini route to up.
func startGemini3Proxy(t *testing.T, up string) string {
	t.Helper()
	return startAllRoutesProxy(t, up, config.Default().RegistrationInline) + "/gemini"
}

// TestGemini3SignatureSurvivesRemovedCall: the default tools policy removes the step's
// first call (rm -rf /), which carries its thoughtSignature; the call kept carries it
// instead, so the client's next request is accepted by an upstream enforcing Gemini 3's
// rule, streamed or not. Controls: the same conversation sent straight to the upstream is
// accepted (the rule accepts a whole step), and the kept call without the signature — what
// the client got before signatures were moved — is refused 400 by it.
func TestGemini3SignatureSurvivesRemovedCall(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newG3Upstream(t, g3Rm, g3Read)
			model, status, answer := g3Client(t, startGemini3Proxy(t, up.URL), stream)
			var calls []string
			for _, p := range model {
				if fc := gjson.GetBytes(p, "functionCall"); fc.Exists() {
					calls = append(calls, fc.Get("name").String()+"/"+gjson.GetBytes(p, "thoughtSignature").String())
				}
			}
			if want := []string{"read_file/" + g3Signature}; fmt.Sprint(calls) != fmt.Sprint(want) {
				t.Errorf("calls the client got (name/signature) = %v, want %v", calls, want)
			}
			if status != http.StatusOK {
				t.Errorf("second request through the proxy: %d %s", status, answer)
			}

			direct := newG3Upstream(t, g3Rm, g3Read)
			if _, status, answer := g3Client(t, direct.URL, stream); status != http.StatusOK {
				t.Errorf("control, straight to the upstream: %d %s", status, answer)
			}
			unsigned := `{"contents":[{"role":"user","parts":[{"text":"` + g3Prompt + `"}]},{"role":"model","parts":[` + g3Thought + `,` + g3Read + `]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"output":"ok"}}}]}]}`
			if msg := g3SignatureProblem([]byte(unsigned)); !strings.Contains(msg, "missing a thought_signature") {
				t.Errorf("control: the upstream accepts a kept call without the signature (%q)", msg)
			}
		})
	}
}

// TestGemini3SignatureOnNoteWhenNoCallKept: when the only call is removed, the signature
// goes on the text that names the removal, and the client's next turn is accepted.
func TestGemini3SignatureOnNoteWhenNoCallKept(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newG3Upstream(t, g3Rm)
			model, status, answer := g3Client(t, startGemini3Proxy(t, up.URL), stream)
			signed := ""
			for _, p := range model {
				if gjson.GetBytes(p, "functionCall").Exists() {
					t.Errorf("a removed call reached the client: %s", p)
				}
				if gjson.GetBytes(p, "thoughtSignature").String() == g3Signature {
					signed = gjson.GetBytes(p, "text").String()
				}
			}
			if signed == "" {
				t.Errorf("no part the client kept carries the signature: %s", model)
			} else if !strings.Contains(signed, "run_shell_command") {
				t.Errorf("the signature is on %q, not on the note of the removal", signed)
			}
			if status != http.StatusOK {
				t.Errorf("next request through the proxy: %d %s", status, answer)
			}
		})
	}
}
