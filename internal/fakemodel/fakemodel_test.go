package fakemodel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/hookproxy/hookproxy/internal/fakemodel"
)

// call is a tool call as an SDK returned it.
type call struct{ name, args string }

// answer is what an SDK made of one response.
type answer struct {
	text  string
	calls []call
}

func openaiClient(url string) openai.Client {
	return openai.NewClient(openaioption.WithBaseURL(url+"/v1"), openaioption.WithAPIKey("sk-test"), openaioption.WithMaxRetries(0))
}

func anthropicClient(url string) anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(url),
		anthropicoption.WithAPIKey("sk-ant-test"), anthropicoption.WithMaxRetries(0))
}

func askOpenAI(t *testing.T, url, prompt string, stream bool) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := openaiClient(url)
	params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	var cc *openai.ChatCompletion
	if stream {
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		s := c.Chat.Completions.NewStreaming(ctx, params)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("openai stream: %v", err)
		}
		cc = &acc.ChatCompletion
		if cc.Usage.TotalTokens == 0 {
			t.Error("the usage chunk is missing")
		}
	} else {
		var err error
		if cc, err = c.Chat.Completions.New(ctx, params); err != nil {
			t.Fatalf("openai: %v", err)
		}
	}
	if len(cc.Choices) != 1 {
		t.Fatalf("choices: %+v", cc.Choices)
	}
	m := cc.Choices[0].Message
	a := answer{text: m.Content}
	for _, tc := range m.ToolCalls {
		a.calls = append(a.calls, call{tc.Function.Name, tc.Function.Arguments})
	}
	return a
}

func askAnthropic(t *testing.T, url, prompt string, stream bool) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := anthropicClient(url)
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
	var msg *anthropic.Message
	if stream {
		s := c.Messages.NewStreaming(ctx, params)
		defer s.Close()
		var acc anthropic.Message
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatalf("anthropic accumulate: %v", err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("anthropic stream: %v", err)
		}
		msg = &acc
	} else {
		var err error
		if msg, err = c.Messages.New(ctx, params); err != nil {
			t.Fatalf("anthropic: %v", err)
		}
	}
	var a answer
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			a.text += b.Text
		case "tool_use":
			a.calls = append(a.calls, call{b.Name, string(b.Input)})
		}
	}
	return a
}

func askGemini(t *testing.T, url, prompt string, stream bool) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "gemini-test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	add := func(r *genai.GenerateContentResponse) {
		for _, cand := range r.Candidates {
			if cand.Content == nil {
				continue
			}
			for _, p := range cand.Content.Parts {
				a.text += p.Text
				if p.FunctionCall != nil {
					args, _ := json.Marshal(p.FunctionCall.Args)
					a.calls = append(a.calls, call{p.FunctionCall.Name, string(args)})
				}
			}
		}
	}
	contents := []*genai.Content{{Role: "user", Parts: []*genai.Part{{Text: prompt}}}}
	if stream {
		for r, err := range c.Models.GenerateContentStream(ctx, "gemini-2.5-flash", contents, nil) {
			if err != nil {
				t.Fatalf("gemini stream: %v", err)
			}
			add(r)
		}
		return a
	}
	r, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash", contents, nil)
	if err != nil {
		t.Fatalf("gemini: %v", err)
	}
	add(r)
	return a
}

// TestOfficialSDKsReadTheImitation: the three official SDKs parse every answer, JSON and
// streamed, into what the package documents.
func TestOfficialSDKsReadTheImitation(t *testing.T) {
	fm := fakemodel.New()
	srv := httptest.NewServer(fm.Handler())
	defer srv.Close()
	type asker func(t *testing.T, url, prompt string, stream bool) answer
	for _, api := range []struct {
		name string
		ask  asker
		path string
	}{{"openai", askOpenAI, fakemodel.PathChatCompletions}, {"anthropic", askAnthropic, fakemodel.PathMessages},
		{"gemini", askGemini, fakemodel.PathGeminiModels + "gemini-2.5-flash:generateContent"}} {
		for _, stream := range []bool{false, true} {
			name := api.name
			if stream {
				name += "/stream"
			}
			t.Run(name+"/echo", func(t *testing.T) {
				a := api.ask(t, srv.URL, "Hello there, imitation", stream)
				if a.text != `You said: "Hello there, imitation" (1 message(s) received)` || len(a.calls) != 0 {
					t.Errorf("answer %+v", a)
				}
				body, path := fm.Received()
				wantPath := api.path
				if stream && api.name == "gemini" {
					wantPath = fakemodel.PathGeminiModels + "gemini-2.5-flash:streamGenerateContent"
				}
				if path != wantPath || !strings.Contains(string(body), "Hello there, imitation") {
					t.Errorf("received %s %s", path, body)
				}
			})
			t.Run(name+"/clean up", func(t *testing.T) {
				a := api.ask(t, srv.URL, "Please Clean Up the repo", stream)
				want := []call{{fakemodel.DestructiveTool, fakemodel.DestructiveInput}, {fakemodel.HarmlessTool, fakemodel.HarmlessInput}}
				if len(a.calls) != 2 {
					t.Fatalf("answer %+v, want two tool calls", a)
				}
				for i, c := range a.calls {
					if c.name != want[i].name || !sameJSON(c.args, want[i].args) {
						t.Errorf("call %d = %+v, want %+v", i, c, want[i])
					}
				}
			})
		}
	}
}

func TestDeterministic(t *testing.T) {
	srv := httptest.NewServer(fakemodel.New().Handler())
	defer srv.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"clean up"}]}`
	get := func() string {
		resp, err := http.Post(srv.URL+fakemodel.PathChatCompletions, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if a, b := get(), get(); a != b {
		t.Errorf("two identical requests got different answers:\n%s\n%s", a, b)
	}
}

func TestReceivedAndErrors(t *testing.T) {
	srv := httptest.NewServer(fakemodel.New().Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + fakemodel.PathReceived)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/_received before any request: %d, want 404", resp.StatusCode)
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{fakemodel.PathChatCompletions, `not json`, http.StatusBadRequest},
		{fakemodel.PathChatCompletions, `{"model":"m","messages":[]}`, http.StatusBadRequest},
		{fakemodel.PathMessages, `{"model":"m","max_tokens":5,"messages":[]}`, http.StatusBadRequest},
		{"/v1/unknown", `{}`, http.StatusNotFound},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %q: %d, want %d", tc.path, tc.body, resp.StatusCode, tc.status)
		}
	}
	// The last model request is reported verbatim, even an invalid one.
	resp, err = http.Get(srv.URL + fakemodel.PathReceived)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != `{"model":"m","max_tokens":5,"messages":[]}` ||
		resp.Header.Get("X-Received-Path") != fakemodel.PathMessages {
		t.Errorf("/_received = %d %q (%s)", resp.StatusCode, b, resp.Header.Get("X-Received-Path"))
	}
}

// TestToolResultsEndTheLoop: after the agent sends tool results, the imitation stops asking.
func TestToolResultsEndTheLoop(t *testing.T) {
	srv := httptest.NewServer(fakemodel.New().Handler())
	defer srv.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"clean up"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"file text"}]}`
	resp, err := http.Post(srv.URL+fakemodel.PathChatCompletions, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cc struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []any  `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices) != 1 || len(cc.Choices[0].Message.ToolCalls) != 0 || cc.Choices[0].FinishReason != "stop" ||
		!strings.Contains(cc.Choices[0].Message.Content, "1 tool result") {
		t.Errorf("answer %+v", cc)
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
