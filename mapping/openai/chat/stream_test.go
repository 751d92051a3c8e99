package chat

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/mapping"
)

// toolStream is toolResponse as OpenAI streams it: an opening role delta, reasoning and
// content in pieces, tool-call arguments in fragments, a finish chunk, the usage chunk
// (stream_options.include_usage), a keep-alive comment and CRLF line ends in places.
var toolStream = strings.Join([]string{
	`: keep-alive`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x"}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"reasoning_content":"Two "},"logprobs":null,"finish_reason":null}],"usage":null}` + "\r",
	"\r",
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"reasoning_content":"cities."},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"content":"Let me "},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"content":"check both."},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`: ping`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Par"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"run","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"cmd\":\"rm"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":" -rf /\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`,
	``,
	`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f33640a400","choices":[],"usage":{"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99, "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}}`,
	``,
	`data: [DONE]`,
	``,
	``,
}, "\n")

// toolStreamBody is the non-streamed completion equivalent to toolStream.
const toolStreamBody = `{"id":"chatcmpl-abc123","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06",
 "choices":[{"index":0,"message":{"role":"assistant","content":"Let me check both.","refusal":null,"reasoning_content":"Two cities.",
   "tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                 {"id":"call_b","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"rm -rf /\"}"}}]},
   "logprobs":null,"finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},
 "service_tier":"default","system_fingerprint":"fp_f33640a400"}`

// assemble feeds stream to a fresh assembler in pieces of the given sizes (cycled).
func assemble(t testing.TB, stream []byte, sizes ...int) ([]byte, error) {
	t.Helper()
	a := NewChat().NewAssembler()
	for i := 0; len(stream) > 0; i++ {
		n := len(stream)
		if len(sizes) > 0 {
			n = min(sizes[i%len(sizes)], len(stream))
		}
		if w, err := a.Write(stream[:n]); w != n || err != nil {
			t.Fatalf("Write = %d, %v", w, err)
		}
		stream = stream[n:]
	}
	return a.Body()
}

func TestAssembler(t *testing.T) {
	tests := []struct {
		desc  string
		sizes []int
	}{
		{desc: "whole stream"},
		{desc: "one byte at a time", sizes: []int{1}},
		{desc: "odd splits", sizes: []int{7, 13, 2, 31}},
		{desc: "splits inside CRLF and escapes", sizes: []int{3, 5, 11}},
	}
	want, err := NewChat().DecodeResponse([]byte(toolStreamBody))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := assemble(t, []byte(toolStream), tc.sizes...)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, body, []byte(toolStreamBody)) {
				t.Errorf("assembled:\n%s\nwant:\n%s", body, compact(t, toolStreamBody))
			}
			got, err := NewChat().DecodeResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Items, want.Items) || !reflect.DeepEqual(got.Usage, want.Usage) || got.FinishReason != want.FinishReason {
				t.Errorf("canonical view differs from the non-streamed response")
			}
		})
	}
	t.Run("every single cut", func(t *testing.T) {
		s := []byte(toolStream)
		for cut := 1; cut < len(s); cut++ {
			body, err := assemble(t, s, cut, len(s))
			if err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			if !jsonEqual(t, body, []byte(toolStreamBody)) {
				t.Fatalf("cut %d: %s", cut, body)
			}
		}
	})
	t.Run("canonical view equals the non-streamed response", func(t *testing.T) {
		orig, err := NewChat().DecodeResponse([]byte(toolResponse))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(orig.Items, want.Items) {
			t.Errorf("stream items differ from toolResponse items")
		}
	})
}

func TestAssemblerEdgeCases(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	tests := []struct {
		desc     string
		stream   string
		upstream bool
		errText  string
		check    func(t *testing.T, body []byte)
	}{
		{desc: "error event mid-stream", upstream: true,
			stream: chunk(`{"role":"assistant","content":"Hel"}`, "null") + `data: {"error":{"message":"server overloaded","type":"server_error"}}` + "\n\n"},
		{desc: "event: error", upstream: true, stream: "event: error\ndata: {\"message\":\"boom\"}\n\n"},
		{desc: "ends without finish or DONE", errText: "ended before completion",
			stream: chunk(`{"role":"assistant","content":"Hel"}`, "null")},
		{desc: "finish without DONE is complete", stream: chunk(`{"role":"assistant","content":"Hi"}`, `"stop"`),
			check: func(t *testing.T, body []byte) {
				if !jsonEqual(t, body, []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"logprobs":null,"finish_reason":"stop"}]}`)) {
					t.Errorf("body %s", body)
				}
			}},
		{desc: "last event without blank line", stream: chunk(`{"content":"x"}`, `"stop"`) + "data: [DONE]",
			check: func(t *testing.T, body []byte) {}},
		{desc: "only DONE", errText: "no chunks", stream: "data: [DONE]\n\n"},
		{desc: "not JSON", errText: "not JSON", stream: "data: {nope\n\n"},
		{desc: "choice index out of range", errText: "out of range",
			stream: `data: {"id":"c","choices":[{"index":999,"delta":{}}]}` + "\n\n"},
		{desc: "multiline data and legacy function_call", stream: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\n" +
			"data: \"delta\":{\"function_call\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}}]}\n\n" +
			chunk(`{"function_call":{"arguments":":1}"}}`, `"function_call"`) + "data: [DONE]\n\n",
			check: func(t *testing.T, body []byte) {
				resp, err := NewChat().DecodeResponse(body)
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Items[0].Parts[0].TextOf(); !strings.Contains(got, `"input":{"a":1}`) {
					t.Errorf("legacy call %s", got)
				}
			}},
		{desc: "n=2 interleaved", stream: `data: {"id":"c","choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]}` + "\n\n" +
			`data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, body []byte) {
				resp, err := NewChat().DecodeResponse(body)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Items) != 2 || resp.Items[0].Parts[0].TextOf() != "A" || resp.Items[1].Parts[0].TextOf() != "B" {
					t.Errorf("items %+v", resp.Items)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, sizes := range [][]int{nil, {1}} {
				body, err := assemble(t, []byte(tc.stream), sizes...)
				var ue *mapping.UpstreamError
				switch {
				case tc.upstream:
					if !errors.As(err, &ue) {
						t.Fatalf("err = %v, want *mapping.UpstreamError", err)
					}
				case tc.errText != "":
					if err == nil || !strings.Contains(err.Error(), tc.errText) || errors.As(err, &ue) {
						t.Fatalf("err = %v, want %q", err, tc.errText)
					}
				default:
					if err != nil {
						t.Fatal(err)
					}
					tc.check(t, body)
				}
			}
		})
	}
}

// flushRecorder counts flushes.
type flushRecorder struct {
	strings.Builder
	flushes int
}

func (f *flushRecorder) Flush() { f.flushes++ }

// streamBodies are completions WriteStream must re-emit faithfully (the official SDK reads
// the same output in ./sdkcheck).
func streamBodies(t testing.TB) []struct{ desc, body string } {
	long := strings.Repeat("héllo wörld ", 1000) // several deltas, cut at rune boundaries
	synth, err := NewChat().SynthesizeResponse(&mapping.Request{Model: "gpt-4o"}, nil, "stop")
	if err != nil {
		t.Fatal(err)
	}
	return []struct{ desc, body string }{
		{desc: "text, reasoning, two tool calls, usage", body: toolResponse},
		{desc: "long content", body: `{"id":"c2","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + jsonString(long) + `,"refusal":null},"logprobs":null,"finish_reason":"length"}]}`},
		{desc: "refusal", body: `{"id":"c3","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"No."},"logprobs":null,"finish_reason":"stop"}]}`},
		{desc: "n=2, legacy call, logprobs", body: `{"id":"c4","object":"chat.completion","created":5,"model":"m","choices":[
			{"index":0,"message":{"role":"assistant","content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"},
			{"index":1,"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},"logprobs":null,"finish_reason":"function_call"}]}`},
		{desc: "synthesized answer", body: string(synth)},
	}
}

func TestWriteStream(t *testing.T) {
	for _, tc := range streamBodies(t) {
		t.Run(tc.desc, func(t *testing.T) {
			var rec flushRecorder
			if err := NewChat().WriteStream(&rec, []byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			stream := rec.String()
			if events := strings.Count(stream, "\n\n"); rec.flushes != events || events < 3 {
				t.Errorf("%d events, %d flushes", events, rec.flushes)
			}
			if !strings.HasSuffix(stream, "data: [DONE]\n\n") {
				t.Errorf("stream does not end with [DONE]")
			}
			// The assembler turns the stream back into the same canonical response.
			body, err := assemble(t, []byte(stream), 5)
			if err != nil {
				t.Fatal(err)
			}
			a, err1 := NewChat().DecodeResponse(body)
			b, err2 := NewChat().DecodeResponse([]byte(tc.body))
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if !reflect.DeepEqual(a.Items, b.Items) || a.FinishReason != b.FinishReason || !reflect.DeepEqual(a.Usage, b.Usage) {
				t.Errorf("round trip differs:\n%s\n%s", body, tc.body)
			}
		})
	}
	t.Run("malformed body", func(t *testing.T) {
		for _, body := range []string{`nope`, `{"id":"x"}`, `[]`} {
			if err := NewChat().WriteStream(&strings.Builder{}, []byte(body)); !errors.Is(err, mapping.ErrMalformed) {
				t.Errorf("%s: err = %v", body, err)
			}
		}
	})
}
