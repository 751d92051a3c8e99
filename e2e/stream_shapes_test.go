package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// Stream shapes the official SDKs accept though the APIs never send them: each carries a
// Bash `rm -rf /` call that the SDK hands to the agent. Straight to the upstream (the
// control) the SDK returns the call; through the proxy with the embedded default chain
// (whose tools policy denies it) it must not.

const rmCall = `{"command":"rm -rf /"}`

// rawUpstream answers every request with body, labelled contentType.
func rawUpstream(t *testing.T, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// viaBoth runs judge against the upstream straight (control: it must return the call) and
// through the default proxy (it must not). It returns the calls the SDK got through the
// proxy.
func viaBoth(t *testing.T, contentType, body, prefix string, judge func(t *testing.T, base string) []string) []string {
	t.Helper()
	up := rawUpstream(t, contentType, body)
	if calls := judge(t, up); !hasRm(calls) {
		t.Fatalf("control: straight to the upstream the SDK did not return the call: %q", calls)
	}
	px := startDefaultProxyB(t, up)
	calls := judge(t, px+prefix)
	if hasRm(calls) {
		t.Fatalf("through the proxy the SDK returned the denied call: %q", calls)
	}
	return calls
}

func hasRm(calls []string) bool {
	for _, c := range calls {
		if strings.Contains(c, "rm -rf") {
			return true
		}
	}
	return false
}

func openaiShapeClient(base string) openai.Client {
	return openai.NewClient(openaioption.WithBaseURL(base+"/v1"), openaioption.WithAPIKey(openaiKey),
		openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{}))
}

// chatStreamCalls is what openai-go's ChatCompletionAccumulator gives the agent, read to
// the end or to the stream's error.
func chatStreamCalls(t *testing.T, base string) []string {
	c := openaiShapeClient(base)
	s := c.Chat.Completions.NewStreaming(withTimeout(t), openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("clean up")}})
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	var calls []string
	for _, ch := range acc.Choices {
		for _, tc := range ch.Message.ToolCalls {
			calls = append(calls, tc.Function.Name+" "+tc.Function.Arguments)
		}
	}
	return calls
}

func chunk(delta, finish string) string {
	return `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
}

var (
	rmDelta     = `{"role":"assistant","tool_calls":[{"index":0,"id":"call_rm","type":"function","function":{"name":"Bash","arguments":` + jsonQuote(rmCall) + `}}]}`
	finishChunk = sse(chunk(`{}`, `"tool_calls"`))
)

// TestChatErrorEventChunkJudged: a chunk sent as "event: error" is a chunk to openai-go
// (and openai-python), which read its tool call and go on.
func TestChatErrorEventChunkJudged(t *testing.T) {
	body := namedSSE("error", chunk(rmDelta, "null")) + finishChunk + sse("[DONE]")
	viaBoth(t, "text/event-stream", body, "/openai", chatStreamCalls)
}

// TestChatStreamLabelledJSONJudged: a streaming request answered with an event stream
// labelled application/json; openai-go reads it as a stream all the same. Through the
// proxy it is judged as the stream it is: the allowed Read call still arrives.
func TestChatStreamLabelledJSONJudged(t *testing.T) {
	read := `{"tool_calls":[{"index":1,"id":"call_read","type":"function","function":{"name":"Read","arguments":"{\"path\":\"README.md\"}"}}]}`
	body := sse(chunk(rmDelta, "null")) + sse(chunk(read, "null")) + finishChunk + sse("[DONE]")
	if calls := viaBoth(t, "application/json", body, "/openai", chatStreamCalls); len(calls) != 1 || !strings.HasPrefix(calls[0], "Read ") {
		t.Fatalf("through the proxy the SDK got %q, want the Read call alone", calls)
	}
}

// TestResponsesDoneWithoutOutputIndexJudged: an output_item.done without output_index
// carries a function call; openai-go yields the event (and Codex runs its item).
func TestResponsesDoneWithoutOutputIndexJudged(t *testing.T) {
	item := `{"type":"function_call","id":"fc_rm","call_id":"call_rm","name":"Bash","arguments":` + jsonQuote(rmCall) + `,"status":"completed"}`
	body := namedSSE("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_s","object":"response","status":"in_progress","output":[]}}`) +
		namedSSE("response.output_item.done", `{"type":"response.output_item.done","sequence_number":1,"item":`+item+`}`) +
		namedSSE("response.completed", `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_s","object":"response","status":"completed","output":[]}}`)
	viaBoth(t, "text/event-stream", body, "/openai", func(t *testing.T, base string) []string {
		c := openaiShapeClient(base)
		s := c.Responses.NewStreaming(withTimeout(t), responses.ResponseNewParams{Model: "gpt-4.1",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("clean up")}})
		defer s.Close()
		var calls []string
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.output_item.done" && ev.Item.Type == "function_call" {
				calls = append(calls, ev.Item.Name+" "+ev.Item.Arguments.OfString)
			}
		}
		return calls
	})
}

// TestAnthropicToolUseInMessageStartJudged: message_start's message already holds a
// tool_use block; anthropic-sdk-go's Accumulate keeps it (as the TypeScript SDK's
// finalMessage() does).
func TestAnthropicToolUseInMessageStartJudged(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_rm","name":"Bash","input":` + rmCall + `}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`
	body := namedSSE("message_start", start) +
		namedSSE("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		namedSSE("message_stop", `{"type":"message_stop"}`)
	viaBoth(t, "text/event-stream", body, "/anthropic", func(t *testing.T, base string) []string {
		c := anthropic.NewClient(anthropicoption.WithBaseURL(base), anthropicoption.WithAPIKey(anthropicKey),
			anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(&http.Client{}))
		s := c.Messages.NewStreaming(withTimeout(t), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("clean up"))}})
		defer s.Close()
		var msg anthropic.Message
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				break
			}
		}
		var calls []string
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				calls = append(calls, b.Name+" "+string(b.Input))
			}
		}
		return calls
	})
}

// rawPost posts a chat request (streaming or not) and returns the answer's body.
func rawPost(t *testing.T, url string, stream bool) string {
	t.Helper()
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"clean up"}]}`
	if stream {
		body = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"clean up"}]}`
	}
	req, err := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+openaiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChatShapesOnlyLenientClientsReadJudged covers the shapes openai-go does not read
// but other official clients do: openai-node (and every client decoding with TextDecoder)
// drops a byte-order mark before the first event; openai-python and openai-node read on
// past a chunk whose "error" is ""; openai-python past "error": {}; openai-python parses a
// non-streaming answer as JSON whatever its Content-Type. The control is the upstream's
// own answer, which carries the call in that shape; through the proxy no byte of it may
// remain, and the allowed Read call after it still arrives: judging went on.
func TestChatShapesOnlyLenientClientsReadJudged(t *testing.T) {
	call := chunk(rmDelta, "null") + "\n\n" + "data: " + chunk(`{"tool_calls":[{"index":1,"id":"call_read","type":"function","function":{"name":"Read","arguments":"{\"path\":\"README.md\"}"}}]}`, "null")
	completion := `{"id":"chatcmpl-s","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_rm","type":"function","function":{"name":"Bash","arguments":` + jsonQuote(rmCall) + `}},{"id":"call_read","type":"function","function":{"name":"Read","arguments":"{\"path\":\"README.md\"}"}}]},"finish_reason":"tool_calls"}]}`
	for _, c := range []struct {
		name, body string
		stream     bool
	}{
		{"byte-order mark", "\ufeff" + sse(call) + finishChunk + sse("[DONE]"), true},
		{`"error": ""`, sse(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"error":""}`) + sse(call) + finishChunk + sse("[DONE]"), true},
		{`"error": {}`, sse(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"error":{}}`) + sse(call) + finishChunk + sse("[DONE]"), true},
		{"JSON labelled text/event-stream", completion, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := rawUpstream(t, "text/event-stream", c.body)
			if got := rawPost(t, up+"/v1/chat/completions", c.stream); !strings.Contains(got, "rm -rf") {
				t.Fatalf("control: the upstream's answer holds no call: %s", got)
			}
			px := startDefaultProxyB(t, up)
			got := rawPost(t, px+"/openai/v1/chat/completions", c.stream)
			if strings.Contains(withoutRefusals(got), "rm -rf") {
				t.Fatalf("the denied call reached the client:\n%s", got)
			}
			if !strings.Contains(got, `"name":"Read"`) {
				t.Fatalf("the allowed call did not reach the client:\n%s", got)
			}
		})
	}
}
