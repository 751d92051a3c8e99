package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// Azure OpenAI through the openai route: openai-go's azure options build the Azure paths
// (/openai/deployments/{deployment}/chat/completions?api-version=...) and send the key in
// the api-key header, which is a credential like Authorization.

const (
	azureKey        = "azure-e2e-CLIENTKEY-3f9e1b77c0"
	azureAPIVersion = "2024-10-21"
)

func azureClient(base string) openai.Client {
	return openai.NewClient(
		azure.WithEndpoint(base, azureAPIVersion),
		azure.WithAPIKey(azureKey),
		azure.WithUnsafeAllowHTTP(), // loopback only: the fake upstream and the proxy
		openaioption.WithMaxRetries(0),
	)
}

func azureCall(ctx context.Context, c openai.Client, stream bool) (string, error) {
	params := openaiParams(convPrompt)
	if !stream {
		r, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			return "", err
		}
		return r.Choices[0].Message.Content, nil
	}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return acc.Choices[0].Message.Content, nil
}

// TestAzureSDKDenyAndRedaction: through the Azure paths a deny raises the SDK's error
// with the reason and code, and a secret is redacted before the deployment sees it; the
// api-key header reaches the upstream and never a backend. Control: the same SDK call
// straight to the upstream carries the secret.
func TestAzureSDKDenyAndRedaction(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(modeName(stream), func(t *testing.T) {
			up := newUpstream(t, answer{json: openaiText, sse: openaiTextSSE})
			denier, _ := newBackend(t, viaHTTP, "deny-request", "model.request.before")
			px := startGeminiProxy(t, up.URL, denier)
			_, err := azureCall(withTimeout(t), azureClient(px+"/azure"), stream)
			var oe *openai.Error
			if !errors.As(err, &oe) || oe.StatusCode != http.StatusForbidden || oe.Message != denyReason || oe.Code != denyCode {
				t.Fatalf("err = %v", err)
			}
			if len(up.requests()) != 0 {
				t.Fatal("a denied request reached the upstream")
			}

			redactor, b := newBackend(t, viaHTTP, "redact", "model.request.before")
			px = startGeminiProxy(t, up.URL, redactor)
			if _, err := azureCall(withTimeout(t), azureClient(up.URL), stream); err != nil {
				t.Fatalf("direct (control): %v", err)
			}
			text, err := azureCall(withTimeout(t), azureClient(px+"/azure"), stream)
			if err != nil || text != "Hello from upstream." {
				t.Fatalf("through the proxy: %q, %v", text, err)
			}
			reqs := up.requests()
			if len(reqs) != 2 {
				t.Fatalf("upstream got %d requests", len(reqs))
			}
			mustContain(t, "direct request (control)", string(reqs[0].Body), secret)
			got := reqs[1]
			if got.Path != "/openai/deployments/gpt-4o/chat/completions" || got.Query != "api-version="+azureAPIVersion {
				t.Fatalf("upstream path %s?%s", got.Path, got.Query)
			}
			if got.Header.Get("Api-Key") != azureKey {
				t.Fatal("the api-key header did not reach the upstream")
			}
			mustNotContain(t, "upstream request", string(got.Body), secret)
			mustContain(t, "upstream request", string(got.Body), redacted, systemText, unknownFieldJSON)
			assertFrames(t, b, azureKey)
		})
	}
}

// TestAzurePathsMapped: the other Azure forms are examined too (the v1 API and a
// deployment whose body names no model, which then takes the deployment's name).
func TestAzurePathsMapped(t *testing.T) {
	up := newUpstream(t, answer{json: openaiText})
	entry, b := newBackend(t, viaHTTP, "none", "model.request.before")
	px := startGeminiProxy(t, up.URL, entry)
	for _, path := range []string{
		"/azure/openai/deployments/my-deploy/chat/completions?api-version=" + azureAPIVersion,
		"/azure/openai/v1/chat/completions",
	} {
		req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, px+path,
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Api-Key", azureKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	frames := assertFrames(t, b, azureKey)
	if len(frames) != 2 {
		t.Fatalf("the backend saw %d requests, want both", len(frames))
	}
	if m := gjson.GetBytes(frames[0], "params.event.model.id").String(); m != "my-deploy" {
		t.Fatalf("model of the deployment request = %q", m)
	}
	if m := gjson.GetBytes(frames[1], "params.event.model.id").String(); m != "unknown" {
		t.Fatalf("model of the v1 request = %q", m)
	}
}

// The shape local OpenAI-compatible servers (vLLM, Ollama, llama.cpp) stream: ids call_0,
// call_1 that repeat in every response, reasoning in reasoning_content, every tool call
// whole in the last chunk, and no usage at all.
var compatCallsSSE = []string{
	openaiChunk("chatcmpl-local", `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`),
	openaiChunk("chatcmpl-local", `[{"index":0,"delta":{"reasoning_content":"The user wants a cleanup."},"finish_reason":null}]`),
	openaiChunk("chatcmpl-local", `[{"index":0,"delta":{"content":"Cleaning up."},"finish_reason":null}]`),
	openaiChunk("chatcmpl-local", `[{"index":0,"delta":{"tool_calls":[`+
		`{"index":0,"id":"call_0","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}},`+
		`{"index":1,"id":"call_1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"README.md\"}"}}]},"finish_reason":"tool_calls"}]`),
	sse("[DONE]"),
}

// TestOpenAICompatibleStream: through the SDK, the denied call_0 never reaches the agent
// while call_1 does, the text and reasoning flow on, and the response's events are valid
// without usage. Control: straight to the server the agent gets both calls.
func TestOpenAICompatibleStream(t *testing.T) {
	up := newUpstream(t, answer{sse: compatCallsSSE})
	denier, b := newBackend(t, viaHTTP, "deny-bash", "tool.before")
	ob := newHTTPBackend(t, "none")
	observer := map[string]any{"id": "com.example.e2e.observer", "transport": map[string]any{"type": "http", "url": ob.endpoint()},
		"subscriptions": []any{map[string]any{"events": []string{"model.response.after"}, "mode": "observe", "content": map[string]string{"default": "body"}}}}
	px := startProxy(t, up, denier, observer)
	p := openaiProvider()

	direct, err := p.send(withTimeout(t), up.URL, newRecorder(t), convPrompt, true)
	if err != nil || len(direct.Calls) != 2 {
		t.Fatalf("direct (control): %+v, %v", direct, err)
	}
	rec := newRecorder(t)
	got, err := p.send(withTimeout(t), px+"/openai", rec, convPrompt, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Calls) != 1 || got.Calls[0].ID != "call_1" || got.Calls[0].Name != "Read" {
		t.Fatalf("calls the SDK got: %+v", got.Calls)
	}
	mustContain(t, "answer text", got.Text, "Cleaning up.", toolDeny)
	mustContain(t, "stream the SDK read", rec.got.String(), `"reasoning_content":"The user wants a cleanup."`)
	mustNotContain(t, "stream the SDK read", rec.got.String(), "rm -rf")

	frames := assertFrames(t, b, openaiKey)
	if evs := eventsOf(frames); len(evs) != 2 {
		t.Fatalf("tool.before events = %v", evs)
	}
	if a, c := gjson.GetBytes(frames[0], "params.event.id").String(), gjson.GetBytes(frames[1], "params.event.id").String(); a == c {
		t.Fatal("two calls share an event id")
	}
	// The observer gets the upstream's message: reasoning classified, no usage invented.
	// It is delivered once the upstream's stream has ended; an SDK that hangs up right
	// after [DONE] may leave first (then nothing is observed, by design: no observation
	// starts after the client went away), so this request reads the stream to its end.
	req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, px+"/openai/v1/chat/completions",
		strings.NewReader(`{"model":"local","stream":true,"messages":[{"role":"user","content":"clean up"}]}`))
	req.Header.Set("Authorization", "Bearer "+openaiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var mra gjson.Result
	for deadline := time.Now().Add(callBound); !mra.Exists() && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, f := range ob.Frames(t) {
			if ev := gjson.GetBytes(f, "params.event"); ev.Get("type").String() == "model.response.after" {
				mra = ev
			}
		}
	}
	assertFrames(t, ob, openaiKey)
	if !mra.Exists() {
		t.Fatal("model.response.after was not observed")
	}
	if mra.Get("usage").Exists() {
		t.Fatalf("usage invented: %s", mra.Get("usage").Raw)
	}
	reasoning := mra.Get(`items.0.parts.#(category=="reasoning").text`).String()
	if reasoning != "The user wants a cleanup." {
		t.Fatalf("reasoning part = %q in %s", reasoning, mra.Get("items").Raw)
	}
}

// TestOpenAICompatibleRepeatedCallIDs: a local server numbers calls call_0 in every
// response; two different calls with that id are two tool.before events, each decided on
// its own (a deny of one is not replayed onto the other).
func TestOpenAICompatibleRepeatedCallIDs(t *testing.T) {
	rm := `{"id":"c1","object":"chat.completion","created":1,"model":"local","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}}]},"finish_reason":"tool_calls"}]}`
	ls := strings.Replace(rm, `rm -rf /`, `ls`, 1)
	for _, tc := range []struct{ desc, answer, want string }{{"destructive", rm, ""}, {"harmless", ls, "ls"}} {
		up := newUpstream(t, answer{json: tc.answer})
		entry, _ := newBackend(t, viaHTTP, "deny-bash-rm", "tool.before")
		px := startProxy(t, up, entry)
		got, err := openaiProvider().send(withTimeout(t), px+"/openai", newRecorder(t), convPrompt, false)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == "" && len(got.Calls) != 0 || tc.want != "" && (len(got.Calls) != 1 || !strings.Contains(got.Calls[0].Args, tc.want)) {
			t.Fatalf("%s: calls = %+v", tc.desc, got.Calls)
		}
	}
}

func init() {
	// deny-bash-rm denies a Bash call only when it deletes.
	scripts["deny-bash-rm"] = func(ev gjson.Result) []effect {
		if ev.Get("type").String() != "tool.before" || !strings.Contains(ev.Get("tool.input.command").String(), "rm ") {
			return nil
		}
		return []effect{{"type": "deny", "reason": toolDeny}}
	}
}

// TestAzureSDKResponsesDeny: the Responses API through the Azure options
// (/openai/responses?api-version=...) is examined like /v1/responses: a deny raises the
// SDK's error and the upstream is not called.
func TestAzureSDKResponsesDeny(t *testing.T) {
	up := newUpstream(t, answer{json: openaiText})
	entry, b := newBackend(t, viaHTTP, "deny-request", "model.request.before")
	px := startGeminiProxy(t, up.URL, entry)
	c := azureClient(px + "/azure")
	_, err := c.Responses.New(withTimeout(t), responses.ResponseNewParams{
		Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(promptText)}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusForbidden || oe.Message != denyReason {
		t.Fatalf("err = %v", err)
	}
	if len(up.requests()) != 0 {
		t.Fatal("a denied request reached the upstream")
	}
	frames := assertFrames(t, b, azureKey)
	if len(frames) != 1 {
		t.Fatalf("frames = %d", len(frames))
	}
	// the prompt reached model.request.before as canonical content
	mustContain(t, "model.request.before", gjson.GetBytes(frames[0], "params.event.items").Raw, "Deploy with key")
}

// TestAzureModelsPolicyJudgesDeployment: Azure serves the deployment the path names, so the
// models allow list judges it, and the body's own model too. A request whose body names an
// allowed model while its path names a deployment outside the list is refused before the
// upstream sees it; so is one whose body names a model outside the list. Controls: the
// same request straight to the upstream reaches it, and the SDK's request for an allowed
// deployment is served through the proxy.
func TestAzureModelsPolicyJudgesDeployment(t *testing.T) {
	models := hookEntry("com.example.e2e.models", map[string]any{"type": "in_process", "policy": "models",
		"config": map[string]any{"allow": []string{"gpt-4o*"}}}, subscription{events: []string{"model.request.before"}})
	up := newUpstream(t, answer{json: openaiText})
	px := startInlineProxy(t, up.URL, registrationDoc(t, models))
	const query = "/chat/completions?api-version=" + azureAPIVersion
	post := func(base, deployment, model string) (int, []byte) {
		body := `{"messages":[{"role":"user","content":"hi"}]}`
		if model != "" {
			body = `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
		}
		req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, base+"/openai/deployments/"+deployment+query, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Api-Key", azureKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}

	// Control: straight to the upstream the disallowed deployment is called.
	if status, b := post(up.URL, "gpt-5-pro", "gpt-4o"); status != 200 {
		t.Fatalf("direct (control): %d %s", status, b)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("the upstream got %d requests from the control", n)
	}
	for _, tc := range []struct{ deployment, model, named string }{
		{"gpt-5-pro", "gpt-4o", "gpt-5-pro"},   // allowed body model, deployment outside the list
		{"gpt-5-pro", "", "gpt-5-pro"},         // no body model
		{"gpt-4o-prod", "o3-pro", "o3-pro"},    // allowed deployment, body model outside the list
		{"gpt%2D5-pro", "gpt-4o", "gpt-5-pro"}, // an escaped deployment name is judged unescaped
	} {
		status, b := post(px+"/azure", tc.deployment, tc.model)
		if status != http.StatusForbidden || gjson.GetBytes(b, "error.code").String() != "hookproxy.models.not_allowed" {
			t.Errorf("%s/%s: %d %s", tc.deployment, tc.model, status, b)
		}
		mustContain(t, "refusal", string(b), tc.named)
	}
	if n := len(up.requests()); n != 1 {
		t.Fatalf("a refused request reached the upstream (%d requests)", n)
	}

	// Control: the SDK's call for an allowed deployment is served; for another, refused.
	params := openaiParams(convPrompt)
	params.Model = "gpt-4o"
	client := azureClient(px + "/azure")
	if _, err := client.Chat.Completions.New(withTimeout(t), params); err != nil {
		t.Fatalf("allowed deployment through the proxy: %v", err)
	}
	params.Model = "gpt-5-pro"
	_, err := client.Chat.Completions.New(withTimeout(t), params)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusForbidden || oe.Code != "hookproxy.models.not_allowed" {
		t.Fatalf("disallowed deployment through the SDK: %v", err)
	}
	reqs := up.requests()
	if len(reqs) != 2 || reqs[1].Path != "/openai/deployments/gpt-4o/chat/completions" {
		t.Fatalf("upstream requests: %d", len(reqs))
	}
}
