package e2e

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Streaming through the embedded default chain: tool.before intercepts (the
// tools and secrets policies), yet the answer's text reaches the client while the model is
// still producing it; only the tool calls are held, each until its own tool.before
// settled, and the destructive one never reaches the client.
//
// The upstream is gated, not timed: it sends its text, then waits until the test has read
// that text through the proxy before it sends any tool call. A proxy that holds the
// response whole would never deliver the text, and the test would fail at its deadline.

type gatedStream struct {
	path, body string
	before     []string // SSE blocks sent before the gate (text)
	after      []string // SSE blocks sent after it (the tool calls, the finish)
	firstText  string   // a substring of the first text delta
}

var gatedStreams = map[string]gatedStream{
	"openai-chat": {
		path: "/openai/v1/chat/completions",
		body: `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"clean up"}]}`,
		before: []string{
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Cleaning up the workspace now."},"finish_reason":null}]}`,
		},
		after: []string{
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_rm","type":"function","function":{"name":"Bash","arguments":""}}]},"finish_reason":null}]}`,
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"rm -rf /\"}"}}]},"finish_reason":null}]}`,
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_ls","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls -la\"}"}}]},"finish_reason":null}]}`,
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`data: [DONE]`,
		},
		firstText: "Cleaning up the workspace",
	},
	"openai-responses": {
		path: "/openai/v1/responses",
		body: `{"model":"gpt-4o","stream":true,"input":"clean up"}`,
		before: []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"model\":\"gpt-4o\",\"output\":[]}}",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}",
			"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Cleaning up the workspace now.\"}",
		},
		after: []string{
			"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":4,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"text\":\"Cleaning up the workspace now.\"}",
			"event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":5,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"Cleaning up the workspace now.\",\"annotations\":[]}}",
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":6,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Cleaning up the workspace now.\",\"annotations\":[]}]}}",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":7,\"output_index\":1,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"in_progress\",\"call_id\":\"call_rm\",\"name\":\"Bash\",\"arguments\":\"\"}}",
			"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":8,\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"{\\\"command\\\":\\\"rm -rf /\\\"}\"}",
			"event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"sequence_number\":9,\"item_id\":\"fc_1\",\"output_index\":1,\"arguments\":\"{\\\"command\\\":\\\"rm -rf /\\\"}\"}",
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":10,\"output_index\":1,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":\"call_rm\",\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"rm -rf /\\\"}\"}}",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":11,\"output_index\":2,\"item\":{\"id\":\"fc_2\",\"type\":\"function_call\",\"status\":\"in_progress\",\"call_id\":\"call_ls\",\"name\":\"Bash\",\"arguments\":\"\"}}",
			"event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"sequence_number\":12,\"item_id\":\"fc_2\",\"output_index\":2,\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}",
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":13,\"output_index\":2,\"item\":{\"id\":\"fc_2\",\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":\"call_ls\",\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}}",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":14,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"completed\",\"model\":\"gpt-4o\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Cleaning up the workspace now.\",\"annotations\":[]}]},{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":\"call_rm\",\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"rm -rf /\\\"}\"},{\"id\":\"fc_2\",\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":\"call_ls\",\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}],\"usage\":{\"input_tokens\":5,\"output_tokens\":9,\"total_tokens\":14}}}",
		},
		firstText: "Cleaning up the workspace",
	},
	"anthropic": {
		path: "/anthropic/v1/messages",
		body: `{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"clean up"}]}`,
		before: []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Cleaning up the workspace now.\"}}",
		},
		after: []string{
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_rm\",\"name\":\"Bash\",\"input\":{}}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\"}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"rm -rf /\\\"}\"}}",
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_ls\",\"name\":\"Bash\",\"input\":{}}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}}",
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}",
		},
		firstText: "Cleaning up the workspace",
	},
}

// newGatedUpstream serves g: the blocks before the gate, flushed, then — once gate is
// closed — the rest.
func newGatedUpstream(t *testing.T, g gatedStream, gate <-chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for _, b := range g.before {
			_, _ = io.WriteString(w, b+"\n\n")
			fl.Flush()
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Second):
			return
		}
		for _, b := range g.after {
			_, _ = io.WriteString(w, b+"\n\n")
			fl.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDefaultChainStreamsTextBeforeToolCalls(t *testing.T) {
	for name, g := range gatedStreams {
		for _, direct := range []bool{false, true} {
			mode := "through-proxy"
			if direct {
				mode = "control-direct"
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				gate := make(chan struct{})
				up := newGatedUpstream(t, g, gate)
				url := up.URL + strings.TrimPrefix(strings.TrimPrefix(g.path, "/openai"), "/anthropic")
				if !direct {
					url = startDefaultProxy(t, &upstream{Server: up}) + g.path
				}
				req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, strings.NewReader(g.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+openaiKey)
				req.Header.Set("X-Api-Key", anthropicKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				// Read until the first text delta arrives: the gate is still closed, so the
				// upstream has not sent a tool call yet.
				br := bufio.NewReader(resp.Body)
				var got strings.Builder
				for !strings.Contains(got.String(), g.firstText) {
					line, err := br.ReadString('\n')
					got.WriteString(line)
					if err != nil {
						t.Fatalf("stream ended before the first text (read %q): %v", got.String(), err)
					}
				}
				if strings.Contains(got.String(), "rm -rf") || strings.Contains(got.String(), "ls -la") {
					t.Fatal("a tool call arrived before the gate opened")
				}
				close(gate)
				rest, err := io.ReadAll(br)
				if err != nil {
					t.Fatalf("reading the rest: %v", err)
				}
				all := got.String() + string(rest)
				mustContain(t, "the client's stream", all, "ls -la")
				if direct {
					// Control: the upstream's stream does carry the destructive call.
					mustContain(t, "the upstream's own stream", all, "rm -rf /")
				} else {
					mustNotContain(t, "the client's stream", withoutRefusals(all), "rm -rf")
					mustContain(t, "the client's stream", all, "blocked by policy")
				}
			})
		}
	}
}
