package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// received is exactly what the fake upstream got.
type received struct {
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// answer is what the upstream sends back: a JSON body, or SSE events when the request
// asked to stream. gate, when set, holds the stream after its first event until closed.
type answer struct {
	json string
	sse  []string
	gate <-chan struct{}
}

// upstream is a loopback model API that records every request byte for byte and every
// response byte it wrote.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []received
	written bytes.Buffer
	answer  answer
}

func newUpstream(t testing.TB, a answer) *upstream {
	t.Helper()
	u := &upstream{answer: a}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.reqs = append(u.reqs, received{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	u.mu.Unlock()

	if !gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		u.write(w, u.answer.json)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	for i, ev := range u.answer.sse {
		u.write(w, ev)
		fl.Flush()
		if i == 0 && u.answer.gate != nil {
			select {
			case <-u.answer.gate:
			case <-r.Context().Done():
				return
			}
		}
	}
}

func (u *upstream) write(w io.Writer, s string) {
	u.mu.Lock()
	u.written.WriteString(s)
	u.mu.Unlock()
	_, _ = io.WriteString(w, s)
}

func (u *upstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.reqs...)
}

// sent is every response byte the upstream wrote so far.
func (u *upstream) sent() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]byte(nil), u.written.Bytes()...)
}

// only returns the single request the upstream received.
func (u *upstream) only(t testing.TB) received {
	t.Helper()
	reqs := u.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream received %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

func sse(data string) string { return "data: " + data + "\n\n" }

func namedSSE(event, data string) string { return "event: " + event + "\ndata: " + data + "\n\n" }

// OpenAI chat completions as the API sends them. The tool-call stream splits the arguments
// over several deltas and ends with the usage chunk (choices: []) that include_usage asks
// for, then [DONE].
const (
	openaiText = `{"id":"chatcmpl-e2e1","object":"chat.completion","created":1760000000,"model":"gpt-4o-2024-08-06",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from upstream.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":21,"completion_tokens":4,"total_tokens":25},"service_tier":"default","system_fingerprint":"fp_e2e"}`

	openaiCalls = `{"id":"chatcmpl-e2e2","object":"chat.completion","created":1760000000,"model":"gpt-4o-2024-08-06",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"annotations":[],"tool_calls":[` +
		`{"id":"call_bash","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}},` +
		`{"id":"call_read","type":"function","function":{"name":"Read","arguments":"{\"path\":\"README.md\"}"}}]},` +
		`"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":40,"completion_tokens":30,"total_tokens":70},"system_fingerprint":"fp_e2e"}`
)

func openaiChunk(id, choices string) string {
	return sse(`{"id":"` + id + `","object":"chat.completion.chunk","created":1760000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_e2e","choices":` + choices + `}`)
}

var openaiTextSSE = []string{
	openaiChunk("chatcmpl-e2e3", `[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e3", `[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e3", `[{"index":0,"delta":{"content":" from"},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e3", `[{"index":0,"delta":{"content":" upstream."},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e3", `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`),
	openaiChunk("chatcmpl-e2e3", `[],"usage":{"prompt_tokens":21,"completion_tokens":4,"total_tokens":25}`),
	sse("[DONE]"),
}

var openaiCallsSSE = []string{
	openaiChunk("chatcmpl-e2e4", `[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_bash","type":"function","function":{"name":"Bash","arguments":""}}]},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e4", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e4", `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"rm -rf /\"}"}}]},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e4", `[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_read","type":"function","function":{"name":"Read","arguments":""}}]},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e4", `[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":\"README.md\"}"}}]},"logprobs":null,"finish_reason":null}]`),
	openaiChunk("chatcmpl-e2e4", `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]`),
	openaiChunk("chatcmpl-e2e4", `[],"usage":{"prompt_tokens":40,"completion_tokens":30,"total_tokens":70}`),
	sse("[DONE]"),
}

// Anthropic messages as the API sends them, with a ping between blocks and tool input
// streamed as input_json_delta fragments.
const (
	anthropicText = `{"id":"msg_e2e1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[{"type":"text","text":"Hello from upstream."}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":21,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":4,"service_tier":"standard"}}`

	anthropicCalls = `{"id":"msg_e2e2","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[` +
		`{"type":"text","text":"Cleaning up."},` +
		`{"type":"tool_use","id":"toolu_bash","name":"Bash","input":{"command":"rm -rf /"}},` +
		`{"type":"tool_use","id":"toolu_read","name":"Read","input":{"path":"README.md"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":30}}`
)

const anthropicStart = `{"type":"message_start","message":{"id":"MSGID","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":21,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`

var anthropicTextSSE = []string{
	namedSSE("message_start", strings.ReplaceAll(anthropicStart, "MSGID", "msg_e2e3")),
	namedSSE("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	namedSSE("ping", `{"type": "ping"}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" from upstream."}}`),
	namedSSE("content_block_stop", `{"type":"content_block_stop","index":0}`),
	namedSSE("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`),
	namedSSE("message_stop", `{"type":"message_stop"}`),
}

var anthropicCallsSSE = []string{
	namedSSE("message_start", strings.ReplaceAll(anthropicStart, "MSGID", "msg_e2e4")),
	namedSSE("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Cleaning up."}}`),
	namedSSE("content_block_stop", `{"type":"content_block_stop","index":0}`),
	namedSSE("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_bash","name":"Bash","input":{}}}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"rm"}}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" -rf /\"}"}}`),
	namedSSE("content_block_stop", `{"type":"content_block_stop","index":1}`),
	namedSSE("ping", `{"type": "ping"}`),
	namedSSE("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_read","name":"Read","input":{}}}`),
	namedSSE("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"README.md\"}"}}`),
	namedSSE("content_block_stop", `{"type":"content_block_stop","index":2}`),
	namedSSE("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}`),
	namedSSE("message_stop", `{"type":"message_stop"}`),
}
