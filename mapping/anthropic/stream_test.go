package anthropic_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/hookproxy/hookproxy/mapping"
)

// sseStream is a stream in Anthropic's format: thinking with signature, redacted thinking,
// text in two deltas, a tool call whose input arrives in pieces (starting with an empty
// partial_json), a tool call without arguments, pings and a comment.
const sseStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_01S","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think \u003cfirst\u003e."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

: a comment line
event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Okay, let's check "}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"the weather:\n"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_01T1x1","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":" \"San Fra"}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"ncisco, CA\", \"unit\": \"fahrenheit\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: content_block_start
data: {"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"toolu_02","name":"list_files","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":4}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

`

// sseMessage is the message the non-streaming API returns for sseStream.
const sseMessage = `{"id":"msg_01S","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
	`{"type":"thinking","thinking":"Let me think <first>.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},` +
	`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},` +
	`{"type":"text","text":"Okay, let's check the weather:\n"},` +
	`{"type":"tool_use","id":"toolu_01T1x1","name":"get_weather","input":{"location":"San Francisco, CA","unit":"fahrenheit"}},` +
	`{"type":"tool_use","id":"toolu_02","name":"list_files","input":{}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":89}}`

func assemble(t testing.TB, stream string, chunk int) ([]byte, error) {
	t.Helper()
	a := tr.NewAssembler()
	for b := []byte(stream); len(b) > 0; {
		n := min(chunk, len(b))
		if w, err := a.Write(b[:n]); w != n || err != nil {
			t.Fatalf("Write = %d, %v", w, err)
		}
		b = b[n:]
	}
	return a.Body()
}

func TestAssemblerMatchesNonStreamed(t *testing.T) {
	tests := []struct {
		desc   string
		stream string
		chunk  int
	}{
		{"whole", sseStream, len(sseStream)},
		{"one byte at a time", sseStream, 1},
		{"odd chunks", sseStream, 7},
		{"CRLF line endings, one byte at a time", strings.ReplaceAll(sseStream, "\n", "\r\n"), 1},
		{"CR line endings", strings.ReplaceAll(sseStream, "\n", "\r"), 3},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			body, err := assemble(t, tt.stream, tt.chunk)
			if err != nil {
				t.Fatalf("Body: %v", err)
			}
			jsonEqual(t, body, []byte(sseMessage))
			resp, err := tr.DecodeResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			if got := *resp.Usage.OutputTokens; got != 89 {
				t.Errorf("output tokens %d", got)
			}
		})
	}
}

func TestAssemblerErrors(t *testing.T) {
	cut := sseStream[:strings.Index(sseStream, "event: message_stop")]
	tests := []struct {
		desc     string
		stream   string
		upstream string // expected UpstreamError type; "" for a plain error
		says     string // what a plain error must say, when it matters
	}{
		{"error event", sseStream[:strings.Index(sseStream, "event: content_block_start")] +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", "overloaded_error", ""},
		{"error event without data", sseStream[:strings.Index(sseStream, "event: content_block_start")] + "event: error\n\n", "api_error", ""},
		{"error event, then the rest of the stream", sseStream[:strings.Index(sseStream, "event: content_block_start")] +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n" +
			sseStream[strings.Index(sseStream, "event: content_block_start"):], "overloaded_error", ""},
		// One line past the 16 MiB bound: a broken upstream cannot grow the assembler without limit.
		{"unbounded line", "event: message_start\ndata: \"" + strings.Repeat("a", 16<<20), "", "SSE event larger than 16777216 bytes"},
		{"cut before message_stop", cut, "", ""},
		{"message_stop without the blank line", cut + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n", "", ""},
		{"empty", "", "", ""},
		{"not SSE JSON", "event: message_start\ndata: <html>\n\n", "", ""},
		{"block before message_start", "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", "", ""},
		{"delta for an unknown block", strings.Replace(sseStream, `"index":2,"delta"`, `"index":9,"delta"`, 1), "", ""},
		{"block index gap", strings.Replace(sseStream, `"index":4,"content_block"`, `"index":5,"content_block"`, 1), "", ""},
		{"unknown delta type", strings.Replace(sseStream, `"text_delta"`, `"hologram_delta"`, 1), "", ""},
		{"partial_json does not form JSON", strings.Replace(sseStream, `\"fahrenheit\"}`, `\"fahrenheit\"`, 1), "", ""},
		{"second message_start", strings.Replace(sseStream, "event: message_stop\ndata: {\"type\":\"message_stop\"}", sseStream[:strings.Index(sseStream, "\n\n")], 1), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			for _, chunk := range []int{1, 1 << 20} {
				body, err := assemble(t, tt.stream, chunk)
				if err == nil {
					t.Fatalf("Body = %s, want an error", body)
				}
				var up *mapping.UpstreamError
				if isUp := errors.As(err, &up); isUp != (tt.upstream != "") || isUp && up.Type != tt.upstream {
					t.Fatalf("err = %#v, want upstream %q", err, tt.upstream)
				}
				if !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("err = %v, want it to say %q", err, tt.says)
				}
			}
		})
	}
}

// flushCounter records writes and flushes.
type flushCounter struct {
	bytes.Buffer
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++ }

func TestWriteStreamRoundTrip(t *testing.T) {
	synth, err := tr.SynthesizeResponse(nil, nil, "end_turn")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, body string
		events     int
	}{
		{"thinking, text and tool calls", message, 3 + 4 + 3 + 3*2},
		{"assembled stream", sseMessage, 3 + 4 + 2 + 3 + 3*2},
		{"synthesized, empty content", string(synth), 3},
		{"pretty-printed body", "{\n \"id\": \"msg_p\", \"type\": \"message\", \"role\": \"assistant\", \"model\": \"m\",\n \"content\": [ {\"type\": \"text\", \"text\": \"a\\nb\"} ],\n \"stop_reason\": \"end_turn\", \"stop_sequence\": null, \"usage\": {\"input_tokens\": 1, \"output_tokens\": 2}\n}", 6},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var w flushCounter
			if err := tr.WriteStream(&w, []byte(tt.body)); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(w.String(), "\n\n"); w.flushes != n || n != tt.events {
				t.Errorf("%d events, %d flushes, want %d", n, w.flushes, tt.events)
			}
			got, err := assemble(t, w.String(), 1)
			if err != nil {
				t.Fatalf("re-assemble: %v\n%s", err, w.String())
			}
			jsonEqual(t, got, []byte(tt.body))
		})
	}
	for _, bad := range []string{``, `nope`, `[]`, `{"content":3}`} {
		if err := tr.WriteStream(&bytes.Buffer{}, []byte(bad)); !errors.Is(err, mapping.ErrMalformed) {
			t.Errorf("WriteStream(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

// TestWriteStreamOfficialSDK serves WriteStream output on loopback and reads it with the
// official SDK's streaming client, as an unmodified agent would.
func TestWriteStreamOfficialSDK(t *testing.T) {
	for _, body := range []string{message, sseMessage} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/messages" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			if err := tr.WriteStream(w, []byte(body)); err != nil {
				t.Error(err)
			}
		}))
		client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{
			Model:     "claude-sonnet-4-5",
			MaxTokens: 64,
			Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("weather?"))},
		})
		var acc sdk.Message
		events := 0
		for stream.Next() {
			events++
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("Accumulate: %v", err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		stream.Close()
		cancel()
		srv.Close()

		if events < 4 {
			t.Errorf("%d events", events)
		}
		jsonEqual(t, []byte(acc.RawJSON()), []byte(body))
		want := decodeResp(t, body)
		if acc.ID != want.ID || string(acc.StopReason) != want.FinishReason || acc.Usage.OutputTokens != *want.Usage.OutputTokens {
			t.Errorf("accumulated %s %s %d", acc.ID, acc.StopReason, acc.Usage.OutputTokens)
		}
		for _, c := range acc.Content {
			switch c.Type {
			case "thinking":
				if c.Signature == "" || c.Thinking == "" {
					t.Errorf("thinking block lost its signature or text: %+v", c)
				}
			case "tool_use":
				if c.ID == "" || len(c.Input) < 2 {
					t.Errorf("tool_use: %+v", c)
				}
			}
		}
	}
}
