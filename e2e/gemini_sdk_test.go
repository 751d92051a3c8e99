package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"google.golang.org/genai"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/proxy"
)

// The Gemini scenarios run the official Go GenAI SDK (google.golang.org/genai) with its
// HTTP base URL pointed at the proxy's /gemini route, in front of a recording fake Gemini
// upstream on loopback.

const (
	geminiKey   = "AIzaE2E-CLIENTKEY-gemini-7c3d9a"
	geminiModel = "gemini-2.5-flash"
	denyRunText = "the run tool may not delete files"
)

func init() {
	// deny-run denies the Gemini scenario's destructive call (tool "run").
	scripts["deny-run"] = func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "tool.before" || ev.Get("tool.name").String() != "run" {
			return nil
		}
		return []effect{{"type": "deny", "reason": denyRunText}}
	}
}

// geminiUpstream is a loopback Gemini API: it records every request and answers
// generateContent with one JSON body, streamGenerateContent with the chunks as SSE
// (alt=sse) or as one JSON array (without it).
type geminiUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []received
	chunks []string // the answer, as stream chunks; generateContent gets them merged
	whole  string
}

func newGeminiUpstream(t testing.TB, whole string, chunks ...string) *geminiUpstream {
	t.Helper()
	u := &geminiUpstream{chunks: chunks, whole: whole}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *geminiUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, received{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	u.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent") && r.URL.Query().Get("alt") == "sse":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range u.chunks {
			fmt.Fprintf(w, "data: %s\r\n\r\n", c)
			w.(http.Flusher).Flush()
		}
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "["+strings.Join(u.chunks, ",\r\n")+"]")
	case strings.Contains(r.URL.Path, "/models/") && r.Method == http.MethodPost:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, u.whole)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"models":[{"name":"models/`+geminiModel+`"}]}`)
	}
}

func (u *geminiUpstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.reqs...)
}

// startGeminiProxy runs the real proxy with /gemini and /vertex routes (api gemini) and an
// /azure route (api openai) to up, loaded as `hookproxy serve` loads them.
func startGeminiProxy(t testing.TB, upURL string, hooks ...map[string]any) string {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
source: urn:hookproxy:e2e
routes:
  - prefix: /gemini
    api: gemini
    upstream: %[1]s
  - prefix: /azure
    api: openai
    upstream: %[1]s
  - prefix: /vertex
    api: gemini
    upstream: %[1]s
`, upURL)), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	var ch *chain.Chain
	if len(hooks) > 0 {
		doc, problems, err := registration.Parse(registrationDoc(t, hooks...), registration.Options{})
		if err != nil {
			t.Fatalf("registration: %v (%v)", err, problems)
		}
		ch, err = chain.New(doc, chain.Options{Source: cfg.Source, ObserveTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("chain.New: %v", err)
		}
		t.Cleanup(func() { _ = ch.Close() })
	}
	s, err := proxy.New(cfg, ch, proxy.Options{})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); _ = s.Close() })
	return srv.URL
}

// geminiClient is the SDK client for base (the proxy's /gemini route, or the upstream).
func geminiClient(t testing.TB, base string, rec *recorder) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: geminiKey, Backend: genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: rec},
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	return c
}

// The answer of the fake upstream: text, then two parallel calls — a destructive one a
// policy denies and a harmless one — then the finish.
var geminiChunks = []string{
	`{"candidates":[{"content":{"parts":[{"text":"I will "}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"resp-e2e"}`,
	`{"candidates":[{"content":{"parts":[{"text":"look first."}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"resp-e2e"}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"run","args":{"cmd":"rm -rf /srv"}},"thoughtSignature":"c2lnbmF0dXJl"},{"functionCall":{"name":"read","args":{"path":"README.md"}}}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"resp-e2e"}`,
	`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":9,"totalTokenCount":21},"modelVersion":"gemini-2.5-flash","responseId":"resp-e2e"}`,
}

const geminiWhole = `{"candidates":[{"content":{"parts":[{"text":"I will look first."},` +
	`{"functionCall":{"name":"run","args":{"cmd":"rm -rf /srv"}},"thoughtSignature":"c2lnbmF0dXJl"},{"functionCall":{"name":"read","args":{"path":"README.md"}}}],"role":"model"},` +
	`"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":9,"totalTokenCount":21},"modelVersion":"gemini-2.5-flash","responseId":"resp-e2e"}`

// geminiResult is an SDK answer reduced to what the scenarios look at.
type geminiResult struct {
	Text  string
	Calls []string // name + arguments
}

// geminiConversation is the history the scenarios send: a prompt carrying the secret, the
// model's earlier call and its result carrying the secret, and a new prompt.
func geminiConversation() []*genai.Content {
	return []*genai.Content{
		{Role: "user", Parts: []*genai.Part{{Text: promptText}}},
		{Role: "model", Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: "read", Args: map[string]any{"path": "secrets.txt"}}}}},
		{Role: "user", Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{Name: "read", Response: map[string]any{"output": toolOutText}}}}},
	}
}

var geminiConfig = &genai.GenerateContentConfig{
	SystemInstruction: &genai.Content{Parts: []*genai.Part{{Text: systemText}}},
	Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
		{Name: "run", Description: "run a shell command"}, {Name: "read", Description: "read a file"}}}},
}

// callGemini runs one SDK call, streamed or not, and reduces its answer.
func callGemini(t *testing.T, c *genai.Client, stream bool) (geminiResult, error) {
	t.Helper()
	ctx := withTimeout(t)
	var res geminiResult
	add := func(r *genai.GenerateContentResponse) {
		for _, cand := range r.Candidates {
			if cand.Content == nil {
				continue
			}
			for _, p := range cand.Content.Parts {
				res.Text += p.Text
				if p.FunctionCall != nil {
					res.Calls = append(res.Calls, fmt.Sprintf("%s %v", p.FunctionCall.Name, p.FunctionCall.Args))
				}
			}
		}
	}
	if !stream {
		r, err := c.Models.GenerateContent(ctx, geminiModel, geminiConversation(), geminiConfig)
		if err != nil {
			return res, err
		}
		add(r)
		return res, nil
	}
	for r, err := range c.Models.GenerateContentStream(ctx, geminiModel, geminiConversation(), geminiConfig) {
		if err != nil {
			return res, err
		}
		add(r)
	}
	return res, nil
}

// TestGeminiSDKPassThrough: with a backend that sees every boundary and changes nothing,
// the upstream receives the SDK's request byte for byte and the SDK gets the answer it
// gets from the upstream directly; the key reaches the upstream and no backend.
func TestGeminiSDKPassThrough(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
			entry, b := newBackend(t, viaHTTP, "none", "tool.after", "turn.start", "model.request.before", "model.response.after", "tool.before", "turn.finish.before")
			px := startGeminiProxy(t, up.URL, entry)

			direct := newRecorder(t)
			want, err := callGemini(t, geminiClient(t, up.URL, direct), stream)
			if err != nil {
				t.Fatalf("direct call: %v", err)
			}
			rec := newRecorder(t)
			got, err := callGemini(t, geminiClient(t, px+"/gemini", rec), stream)
			if err != nil {
				t.Fatalf("call through the proxy: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || len(got.Calls) != 2 {
				t.Fatalf("answer through the proxy %+v, direct %+v", got, want)
			}
			reqs := up.requests()
			if len(reqs) != 2 {
				t.Fatalf("upstream got %d requests", len(reqs))
			}
			viaProxy := reqs[1]
			assertBytesEqual(t, "upstream body", viaProxy.Body, rec.sent[0])
			if viaProxy.Path != reqs[0].Path || viaProxy.Query != reqs[0].Query {
				t.Fatalf("upstream path %s?%s, direct %s?%s", viaProxy.Path, viaProxy.Query, reqs[0].Path, reqs[0].Query)
			}
			if viaProxy.Header.Get("X-Goog-Api-Key") != geminiKey {
				t.Fatal("the client's key did not reach the upstream")
			}
			assertBytesEqual(t, "answer bytes", rec.got.Bytes(), direct.got.Bytes())
			frames := assertFrames(t, b, geminiKey)
			evs := strings.Join(eventsOf(frames), ",")
			mustContain(t, "events", evs, "tool.after", "model.request.before", "model.response.after", "tool.before")
		})
	}
}

// TestGeminiSDKDeny: a deny at model.request.before raises the SDK's own error carrying
// the reason; the upstream is never called.
func TestGeminiSDKDeny(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
			entry, _ := newBackend(t, viaHTTP, "deny-request", "model.request.before")
			px := startGeminiProxy(t, up.URL, entry)
			_, err := callGemini(t, geminiClient(t, px+"/gemini", newRecorder(t)), stream)
			var ae genai.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want a genai.APIError", err, err)
			}
			if ae.Code != http.StatusForbidden || ae.Status != "PERMISSION_DENIED" || ae.Message != denyReason {
				t.Fatalf("APIError = %+v", ae)
			}
			if n := len(up.requests()); n != 0 {
				t.Fatalf("the upstream was called %d times", n)
			}
		})
	}
}

// TestGeminiSDKRedaction: a secret in a user part and in a functionResponse is replaced
// before the upstream sees it (model.request.before and tool.after rewrite), and the
// rest of the request is kept. Control: the same SDK call straight to the upstream
// carries the secret.
func TestGeminiSDKRedaction(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
			entry, b := newBackend(t, viaHTTP, "redact", "tool.after", "model.request.before")
			px := startGeminiProxy(t, up.URL, entry)
			if _, err := callGemini(t, geminiClient(t, up.URL, newRecorder(t)), stream); err != nil {
				t.Fatal(err)
			}
			if _, err := callGemini(t, geminiClient(t, px+"/gemini", newRecorder(t)), stream); err != nil {
				t.Fatal(err)
			}
			reqs := up.requests()
			mustContain(t, "direct request (control)", string(reqs[0].Body), secret)
			body := string(reqs[1].Body)
			mustNotContain(t, "upstream request", body, secret)
			mustContain(t, "upstream request", body, redacted, systemText, `"functionDeclarations"`)
			root := gjson.Parse(body)
			if got := root.Get("contents.2.parts.0.functionResponse.response.output").String(); got != strings.ReplaceAll(toolOutText, secret, redacted) {
				t.Fatalf("functionResponse at the upstream = %q", got)
			}
			if got := root.Get("contents.0.parts.0.text").String(); got != strings.ReplaceAll(promptText, secret, redacted) {
				t.Fatalf("prompt at the upstream = %q", got)
			}
			evs := eventsOf(assertFrames(t, b, geminiKey))
			if len(evs) < 2 || evs[0] != "tool.after" {
				t.Fatalf("events = %v", evs)
			}
		})
	}
}

// TestGeminiSDKDeniedCallRemoved: a functionCall denied at tool.before never reaches the
// SDK, the other call of the same answer does, and the agent is told why. Control: the
// same call straight to the upstream gets both calls.
func TestGeminiSDKDeniedCallRemoved(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
			entry, b := newBackend(t, viaHTTP, "deny-run", "tool.before")
			px := startGeminiProxy(t, up.URL, entry)
			direct, err := callGemini(t, geminiClient(t, up.URL, newRecorder(t)), stream)
			if err != nil || len(direct.Calls) != 2 {
				t.Fatalf("direct (control): %+v, %v", direct, err)
			}
			rec := newRecorder(t)
			got, err := callGemini(t, geminiClient(t, px+"/gemini", rec), stream)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Calls) != 1 || !strings.HasPrefix(got.Calls[0], "read ") {
				t.Fatalf("calls the SDK got: %v", got.Calls)
			}
			mustNotContain(t, "bytes the SDK read", rec.got.String(), "rm -rf")
			mustContain(t, "answer text", got.Text, "I will look first.", denyRunText)
			if evs := eventsOf(assertFrames(t, b, geminiKey)); len(evs) != 2 {
				t.Fatalf("tool.before events = %v", evs)
			}
		})
	}
}

// TestGeminiArrayStreamHeld: the JSON-array stream (no alt=sse) is held whole while its
// calls are judged, and answered as a JSON array without the denied call.
func TestGeminiArrayStreamHeld(t *testing.T) {
	up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
	entry, _ := newBackend(t, viaHTTP, "deny-run", "tool.before")
	px := startGeminiProxy(t, up.URL, entry)
	body := `{"contents":[{"role":"user","parts":[{"text":"clean up"}]}]}`
	req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, px+"/gemini/v1beta/models/"+geminiModel+":streamGenerateContent", strings.NewReader(body))
	req.Header.Set("X-Goog-Api-Key", geminiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	root := gjson.ParseBytes(out)
	if resp.StatusCode != 200 || !root.IsArray() {
		t.Fatalf("status %d body %s", resp.StatusCode, out)
	}
	mustNotContain(t, "answer", string(out), "rm -rf")
	mustContain(t, "answer", string(out), "README.md", denyRunText)
}

// TestGeminiSDKDefaultPolicies: the embedded default chain stands in front of a gemini
// route as in front of the others: the keys in a prompt reach the upstream redacted, and
// a destructive shell call never reaches the SDK while the harmless one does.
func TestGeminiSDKDefaultPolicies(t *testing.T) {
	destructive := func(s string) string { return strings.ReplaceAll(s, "rm -rf /srv", "rm -rf /") }
	chunks := make([]string, len(geminiChunks))
	for i, c := range geminiChunks {
		chunks[i] = destructive(c)
	}
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newGeminiUpstream(t, destructive(geminiWhole), chunks...)
			cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nsource: urn:hookproxy:e2e-defaults\nroutes:\n  - prefix: /gemini\n    api: gemini\n    upstream: "+up.URL+"\n"), "")
			if err != nil {
				t.Fatal(err)
			}
			cfg.RegistrationInline = config.Default().RegistrationInline
			ch, err := app.BuildChain(cfg, "", nil)
			if err != nil || ch == nil {
				t.Fatalf("default chain: %v", err)
			}
			t.Cleanup(func() { _ = ch.Close() })
			s, err := proxy.New(cfg, ch, proxy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s)
			t.Cleanup(func() { srv.Close(); _ = s.Close() })

			c := geminiClient(t, srv.URL+"/gemini", newRecorder(t))
			ctx := withTimeout(t)
			contents := []*genai.Content{{Role: "user", Parts: []*genai.Part{{Text: deployPrompt}}}}
			var calls []string
			if stream {
				for r, err := range c.Models.GenerateContentStream(ctx, geminiModel, contents, geminiConfig) {
					if err != nil {
						t.Fatal(err)
					}
					for _, fc := range r.FunctionCalls() {
						calls = append(calls, fc.Name)
					}
				}
			} else {
				r, err := c.Models.GenerateContent(ctx, geminiModel, contents, geminiConfig)
				if err != nil {
					t.Fatal(err)
				}
				for _, fc := range r.FunctionCalls() {
					calls = append(calls, fc.Name)
				}
			}
			if strings.Join(calls, ",") != "read" {
				t.Fatalf("calls the SDK got: %v, want only read", calls)
			}
			body := string(up.requests()[0].Body)
			mustNotContain(t, "upstream body", body, defaultAWSKey, defaultGitHubPAT)
			mustContain(t, "upstream body", body, "[REDACTED:aws_access_key_id:", "[REDACTED:github_token:", systemText)
		})
	}
}

// TestGeminiSDKVertex: the SDK's Vertex AI backend (express mode, an API key) calls the
// same methods under publishers/google/models/...; a gemini route examines them alike: the
// destructive call is removed streamed and not, and a deny raises the SDK's error.
func TestGeminiSDKVertex(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
			entry, b := newBackend(t, viaHTTP, "deny-run", "tool.before")
			px := startGeminiProxy(t, up.URL, entry)
			c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
				APIKey: geminiKey, Backend: genai.BackendVertexAI,
				HTTPClient:  &http.Client{Transport: newRecorder(t)},
				HTTPOptions: genai.HTTPOptions{BaseURL: px + "/vertex"},
			})
			if err != nil {
				t.Fatalf("genai.NewClient: %v", err)
			}
			got, err := callGemini(t, c, stream)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Calls) != 1 || !strings.HasPrefix(got.Calls[0], "read ") {
				t.Fatalf("calls the SDK got: %v", got.Calls)
			}
			reqs := up.requests()
			if len(reqs) != 1 || !strings.Contains(reqs[0].Path, "/publishers/google/models/"+geminiModel+":") {
				t.Fatalf("upstream requests: %+v", reqs)
			}
			frames := assertFrames(t, b, geminiKey)
			if len(frames) != 2 || gjson.GetBytes(frames[0], "params.event.path").String() != "hookproxy.gemini.generate_content" {
				t.Fatalf("frames: %d", len(frames))
			}
		})
	}
}

// TestGeminiSDKCountTokensAndModels: countTokens carries the prompt, so it gets the
// request policy (a deny raises the SDK's error, the upstream is not called); reading the
// model list carries no input and passes.
func TestGeminiSDKCountTokensAndModels(t *testing.T) {
	up := newGeminiUpstream(t, geminiWhole, geminiChunks...)
	entry, b := newBackend(t, viaHTTP, "deny-request", "model.request.before", "turn.start")
	px := startGeminiProxy(t, up.URL, entry)
	c := geminiClient(t, px+"/gemini", newRecorder(t))
	_, err := c.Models.CountTokens(withTimeout(t), geminiModel, geminiConversation(), nil)
	var ae genai.APIError
	if !errors.As(err, &ae) || ae.Code != http.StatusForbidden || ae.Message != denyReason {
		t.Fatalf("CountTokens err = %v", err)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
	if evs := eventsOf(assertFrames(t, b, geminiKey)); strings.Join(evs, ",") != "model.request.before" {
		t.Fatalf("events for countTokens = %v (no turn.start: it is not a turn)", evs)
	}
	page, err := c.Models.List(withTimeout(t), nil)
	if err != nil || len(page.Items) != 1 || page.Items[0].Name != "models/"+geminiModel {
		t.Fatalf("List = %+v, %v", page.Items, err)
	}
}
