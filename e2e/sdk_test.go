package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// The client credentials. They must reach the upstream and must never reach a backend.
const (
	openaiKey    = "sk-e2e-CLIENTKEY-openai-5b1f0c"
	anthropicKey = "sk-ant-e2e-CLIENTKEY-anthropic-9d27"
)

// callBound caps one SDK call. No scenario comes near it; reaching it means a hang.
const callBound = 10 * time.Second

// unknownField is a top-level request member neither SDK nor proxy knows; it must reach the
// upstream byte for byte whatever the proxy rewrites.
var unknownField = map[string]any{"keep": []any{1, "two", map[string]any{"three": 3.5}}}

const unknownFieldJSON = `"x_e2e_unknown":{"keep":[1,"two",{"three":3.5}]}`

// conversation is the history a scenario sends.
type conversation int

const (
	// convPrompt: a system prompt, one earlier exchange, and a new user prompt that carries
	// the secret.
	convPrompt conversation = iota
	// convToolResult: a user prompt, the assistant's Bash call and its result, which
	// carries the secret.
	convToolResult
)

// Texts of the conversations; the tests look for them at the upstream.
const (
	systemText  = "You are a terse deploy assistant."
	earlierText = "What is the deploy status?"
	answerText  = "Green."
	promptText  = "Deploy with key " + secret + " please."
	toolAskText = "List the files."
	toolOutText = "secrets.txt holds " + secret
)

// toolCall is a tool call as the SDK user sees it.
type toolCall struct{ ID, Name, Args string }

// result is an SDK answer reduced to what the scenarios look at.
type result struct {
	Text  string
	Calls []toolCall
}

// apiError is an SDK error reduced to what the scenarios look at.
type apiError struct {
	Status        int
	Type, Message string
	Code          string // OpenAI only
}

// recorder is the SDK's http.RoundTripper: it keeps the exact request bodies the SDK sent
// and the exact response bytes it read, so the tests can compare them with the upstream's.
type recorder struct {
	base *http.Transport
	mu   sync.Mutex
	sent [][]byte
	got  bytes.Buffer
}

func newRecorder(t testing.TB) *recorder {
	t.Helper()
	r := &recorder{base: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(r.base.CloseIdleConnections)
	return r
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.sent = append(r.sent, b)
		r.mu.Unlock()
		out.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := r.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	resp.Body = &teeBody{ReadCloser: resp.Body, r: r}
	return resp, nil
}

type teeBody struct {
	io.ReadCloser
	r *recorder
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	b.r.got.Write(p[:n])
	b.r.mu.Unlock()
	return n, err
}

// only returns the single request body the SDK sent.
func (r *recorder) only(t testing.TB) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sent) != 1 {
		t.Fatalf("the SDK sent %d requests, want 1", len(r.sent))
	}
	return r.sent[0]
}

func (r *recorder) received() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.got.Bytes()...)
}

// provider is one native API as the official SDK speaks it, plus the upstream answers a
// fake of that API gives.
type provider struct {
	name         string
	prefix       string // proxy route prefix
	upstreamPath string // what the upstream must be asked for
	key          string
	text, calls  answer
	// send runs one SDK call through baseURL (the proxy route, or the upstream itself).
	send func(ctx context.Context, baseURL string, rec *recorder, conv conversation, stream bool) (result, error)
	// streamFirst opens a stream, reads its first event (describing it), calls release, and
	// reads the rest.
	streamFirst func(ctx context.Context, baseURL string, rec *recorder, release func()) (first string, res result, err error)
	// asAPIError extracts the SDK's API error type from err.
	asAPIError func(err error) (apiError, bool)
}

var providers = []provider{openaiProvider(), anthropicProvider()}

func openaiProvider() provider {
	p := provider{
		name: "openai", prefix: "/openai", upstreamPath: "/v1/chat/completions", key: openaiKey,
		text:  answer{json: openaiText, sse: openaiTextSSE},
		calls: answer{json: openaiCalls, sse: openaiCallsSSE},
	}
	client := func(baseURL string, rec *recorder) openai.Client {
		return openai.NewClient(
			openaioption.WithBaseURL(baseURL+"/v1"),
			openaioption.WithAPIKey(openaiKey),
			openaioption.WithMaxRetries(0),
			openaioption.WithHTTPClient(&http.Client{Transport: rec}),
		)
	}
	p.send = func(ctx context.Context, baseURL string, rec *recorder, conv conversation, stream bool) (result, error) {
		c, params := client(baseURL, rec), openaiParams(conv)
		if !stream {
			completion, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				return result{}, err
			}
			return openaiResult(completion), nil
		}
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		s := c.Chat.Completions.NewStreaming(ctx, params)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		return openaiResult(&acc.ChatCompletion), nil
	}
	p.streamFirst = func(ctx context.Context, baseURL string, rec *recorder, release func()) (string, result, error) {
		params := openaiParams(convPrompt)
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		c := client(baseURL, rec)
		s := c.Chat.Completions.NewStreaming(ctx, params)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		if !s.Next() {
			release()
			return "", result{}, errors.Join(errors.New("no first chunk"), s.Err())
		}
		first := s.Current()
		acc.AddChunk(first)
		release()
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		return first.RawJSON(), openaiResult(&acc.ChatCompletion), s.Err()
	}
	p.asAPIError = func(err error) (apiError, bool) {
		var e *openai.Error
		if !errors.As(err, &e) {
			return apiError{}, false
		}
		return apiError{Status: e.StatusCode, Type: e.Type, Message: e.Message, Code: e.Code}, true
	}
	return p
}

func openaiParams(conv conversation) openai.ChatCompletionNewParams {
	var params openai.ChatCompletionNewParams
	switch conv {
	case convPrompt:
		params = openai.ChatCompletionNewParams{
			Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage(systemText),
				openai.UserMessage(earlierText),
				openai.AssistantMessage(answerText),
				openai.UserMessage(promptText),
			},
			Temperature: openai.Float(0.2),
		}
	case convToolResult:
		bash := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: "call_ls", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "Bash", Arguments: `{"command":"ls"}`}}}
		params = openai.ChatCompletionNewParams{
			Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage(toolAskText),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{bash}}},
				openai.ToolMessage(toolOutText, "call_ls"),
			},
		}
	}
	params.SetExtraFields(map[string]any{"x_e2e_unknown": unknownField})
	return params
}

func openaiResult(c *openai.ChatCompletion) result {
	if len(c.Choices) == 0 {
		return result{}
	}
	m := c.Choices[0].Message
	r := result{Text: m.Content}
	for _, tc := range m.ToolCalls {
		r.Calls = append(r.Calls, toolCall{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
	}
	return r
}

func anthropicProvider() provider {
	p := provider{
		name: "anthropic", prefix: "/anthropic", upstreamPath: "/v1/messages", key: anthropicKey,
		text:  answer{json: anthropicText, sse: anthropicTextSSE},
		calls: answer{json: anthropicCalls, sse: anthropicCallsSSE},
	}
	client := func(baseURL string, rec *recorder) anthropic.Client {
		return anthropic.NewClient(
			anthropicoption.WithoutEnvironmentDefaults(), // no ANTHROPIC_* or profile files
			anthropicoption.WithBaseURL(baseURL),
			anthropicoption.WithAPIKey(anthropicKey),
			anthropicoption.WithMaxRetries(0),
			anthropicoption.WithHTTPClient(&http.Client{Transport: rec}),
		)
	}
	p.send = func(ctx context.Context, baseURL string, rec *recorder, conv conversation, stream bool) (result, error) {
		c, params := client(baseURL, rec), anthropicParams(conv)
		if !stream {
			msg, err := c.Messages.New(ctx, params)
			if err != nil {
				return result{}, err
			}
			return anthropicResult(msg), nil
		}
		s := c.Messages.NewStreaming(ctx, params)
		defer s.Close()
		var msg anthropic.Message
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				return result{}, err
			}
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		return anthropicResult(&msg), nil
	}
	p.streamFirst = func(ctx context.Context, baseURL string, rec *recorder, release func()) (string, result, error) {
		c := client(baseURL, rec)
		s := c.Messages.NewStreaming(ctx, anthropicParams(convPrompt))
		defer s.Close()
		var msg anthropic.Message
		if !s.Next() {
			release()
			return "", result{}, errors.Join(errors.New("no first event"), s.Err())
		}
		first := s.Current()
		err := msg.Accumulate(first)
		release()
		for err == nil && s.Next() {
			err = msg.Accumulate(s.Current())
		}
		return first.RawJSON(), anthropicResult(&msg), errors.Join(err, s.Err())
	}
	p.asAPIError = func(err error) (apiError, bool) {
		var e *anthropic.Error
		if !errors.As(err, &e) {
			return apiError{}, false
		}
		raw := e.RawJSON()
		return apiError{Status: e.StatusCode, Type: string(e.Type()), Message: gjson.Get(raw, "error.message").String()}, true
	}
	return p
}

func anthropicParams(conv conversation) anthropic.MessageNewParams {
	var params anthropic.MessageNewParams
	switch conv {
	case convPrompt:
		params = anthropic.MessageNewParams{
			Model:     "claude-sonnet-4-5",
			MaxTokens: 256,
			System:    []anthropic.TextBlockParam{{Text: systemText}},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock(earlierText)),
				anthropic.NewAssistantMessage(anthropic.NewTextBlock(answerText)),
				anthropic.NewUserMessage(anthropic.NewTextBlock(promptText)),
			},
			Temperature: anthropic.Float(0.2),
		}
	case convToolResult:
		params = anthropic.MessageNewParams{
			Model:     "claude-sonnet-4-5",
			MaxTokens: 256,
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock(toolAskText)),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_ls", map[string]any{"command": "ls"}, "Bash")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_ls", toolOutText, false)),
			},
		}
	}
	params.SetExtraFields(map[string]any{"x_e2e_unknown": unknownField})
	return params
}

func anthropicResult(m *anthropic.Message) result {
	var r result
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			r.Text += b.Text
		case "tool_use":
			r.Calls = append(r.Calls, toolCall{ID: b.ID, Name: b.Name, Args: string(b.Input)})
		}
	}
	return r
}
