package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// sseEvents splits a stream into its SSE blocks (each with its blank line).
func sseEvents(stream string) []string {
	var out []string
	for _, b := range strings.SplitAfter(stream, "\n\n") {
		if b != "" {
			out = append(out, b)
		}
	}
	return out
}

func TestEditRelaysBlocksAsTheyArrive(t *testing.T) {
	var out bytes.Buffer
	d := &mappingtest.Decider{}
	ed := tr.NewStreamEditor(&out, d)
	for _, ev := range sseEvents(sseStream) {
		before := out.Len()
		if _, err := ed.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		got := out.String()[before:]
		switch {
		case strings.Contains(ev, "text_delta"), strings.Contains(ev, "thinking_delta"), strings.Contains(ev, "message_start"), strings.Contains(ev, "redacted_thinking"):
			if got != ev {
				t.Errorf("event %q relayed as %q", ev, got)
			}
		case strings.Contains(ev, "input_json_delta"), strings.Contains(ev, `"tool_use","id"`):
			if got != "" {
				t.Errorf("part of an open tool_use block was sent: %q", got)
			}
		}
	}
	if err := ed.Close(); err != nil {
		t.Fatal(err)
	}
	if len(d.Decided) != 2 || d.Decided[0].Name != "get_weather" || d.Decided[1].ID != "toolu_02" || string(d.Decided[1].Input) != "{}" {
		t.Fatalf("decided %+v", d.Decided)
	}
	body, err := mappingtest.Assembled(tr, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, body, []byte(sseMessage))
}

func TestEditDecidesEachBlockAtItsStop(t *testing.T) {
	var out bytes.Buffer
	var seen []string
	d := &mappingtest.Decider{OnDecide: func(mapping.StreamCall) { seen = append(seen, out.String()) }}
	ed := tr.NewStreamEditor(&out, d)
	evs := sseEvents(sseStream)
	var at []int
	for i, ev := range evs {
		n := len(d.Decided)
		if _, err := ed.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		if len(d.Decided) > n {
			at = append(at, i)
		}
	}
	if len(at) != 2 || !strings.Contains(evs[at[0]], `"content_block_stop","index":3`) || !strings.Contains(evs[at[1]], `"content_block_stop","index":4`) {
		t.Fatalf("decided at events %v", at)
	}
	if !strings.Contains(seen[0], "the weather") || strings.Contains(seen[0], "get_weather") {
		t.Errorf("client had when call 0 was decided:\n%s", seen[0])
	}
}

func TestEditRemovesAndRewrites(t *testing.T) {
	tests := []struct {
		desc   string
		script mappingtest.Script
		check  func(t *testing.T, msg gjson.Result)
	}{
		{"first removed: the second moves up", mappingtest.Script{0: {Remove: true, Note: "Tool call get_weather was blocked by policy: no"}}, func(t *testing.T, m gjson.Result) {
			if m.Get("content.3.name").String() != "list_files" || m.Get("content.4.text").String() != "Tool call get_weather was blocked by policy: no" || m.Get("stop_reason").String() != "tool_use" {
				t.Errorf("%s", m.Raw)
			}
		}},
		{"both removed: end_turn", mappingtest.Script{0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}}, func(t *testing.T, m gjson.Result) {
			if m.Get("content.#").Int() != 4 || m.Get("content.3.text").String() != "\n\na\nb" || m.Get("stop_reason").String() != "end_turn" {
				t.Errorf("%s", m.Raw)
			}
		}},
		{"flow stop", mappingtest.Script{0: {Remove: true, Stop: true, Note: "stopped"}}, func(t *testing.T, m gjson.Result) {
			if strings.Contains(m.Raw, "tool_use\",") || m.Get("stop_reason").String() != "end_turn" {
				t.Errorf("%s", m.Raw)
			}
		}},
		{"rewritten input", mappingtest.Script{0: {Input: json.RawMessage(`{"location":"Paris"}`)}}, func(t *testing.T, m gjson.Result) {
			if m.Get("content.3.input.location").String() != "Paris" || strings.Contains(m.Raw, "San Fra") {
				t.Errorf("%s", m.Raw)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := mappingtest.Edit(tr, []byte(sseStream), 17, &mappingtest.Decider{Script: tc.script})
			if err != nil {
				t.Fatal(err)
			}
			body, err := mappingtest.Assembled(tr, out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			tc.check(t, gjson.ParseBytes(body))
			if why, err := mappingtest.Equivalent(tr, []byte(sseStream), 9, tc.script); err != nil || why != "" {
				t.Errorf("not the held path's result: %v\n%s", err, why)
			}
		})
	}
}

func TestEditEndsWithoutSendingUndecided(t *testing.T) {
	evs := sseEvents(sseStream)
	cut := strings.Join(evs[:17], "") // inside the first tool_use block
	d := &mappingtest.Decider{}
	out, err := mappingtest.Edit(tr, []byte(cut), 0, d)
	if err == nil || strings.Contains(string(out), "get_weather") || len(d.Decided) != 0 {
		t.Fatalf("err %v, decided %d, sent:\n%s", err, len(d.Decided), out)
	}
	boom := errors.New("backend down")
	var buf bytes.Buffer
	ed := tr.NewStreamEditor(&buf, &mappingtest.Decider{Err: boom, ErrAt: 1})
	if _, err := ed.Write([]byte(sseStream)); !errors.Is(err, boom) {
		t.Fatalf("Write = %v", err)
	}
	if strings.Contains(buf.String(), "list_files") || strings.Contains(buf.String(), "message_stop") {
		t.Errorf("sent past the failed decision:\n%s", buf.String())
	}
	ed.Fail("api_error", "hookproxy.stream_failed", "policy backend unavailable")
	if _, err := mappingtest.Assembled(tr, buf.Bytes()); err == nil || !strings.Contains(err.Error(), "policy backend unavailable") {
		t.Errorf("the failed stream assembles as %v", err)
	}
}

func TestEditHeldIsBoundedByCalls(t *testing.T) {
	var out bytes.Buffer
	ed := tr.NewStreamEditor(&out, &mappingtest.Decider{})
	evs := sseEvents(sseStream)
	ed.Write([]byte(strings.Join(evs[:10], ""))) // into the text block
	for i := 0; i < 200; i++ {
		ed.Write([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("x", 500) + "\"}}\n\n"))
		if ed.Held() != 0 {
			t.Fatalf("text held: %d", ed.Held())
		}
	}
}

// anthropicStream builds a Messages stream from block specs: "text:..." or
// "tool:id:name:json" (the input in n input_json_delta pieces).
func anthropicStream(pieces int, specs ...string) string {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	out := ev("message_start", `{"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
	stop := "end_turn"
	for i, spec := range specs {
		idx := strconv.Itoa(i)
		kind, rest, _ := strings.Cut(spec, ":")
		if kind == "text" {
			out += ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`)
			out += ev("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"text_delta","text":`+strconv.Quote(rest)+`}}`)
		} else {
			stop = "tool_use"
			parts := strings.SplitN(rest, ":", 3)
			out += ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"tool_use","id":"`+parts[0]+`","name":"`+parts[1]+`","input":{}}}`)
			in := parts[2]
			step := max(1, len(in)/pieces)
			for len(in) > 0 {
				n := min(step, len(in))
				out += ev("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"input_json_delta","partial_json":`+strconv.Quote(in[:n])+`}}`)
				in = in[n:]
			}
		}
		out += ev("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`)
	}
	out += ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":9}}`)
	return out + ev("message_stop", `{"type":"message_stop"}`)
}

func TestEditedStreamOfficialSDK(t *testing.T) {
	streams := map[string]string{
		"thinking, text, two calls": sseStream,
		"text after a tool call":    anthropicStream(1, "text:first", `tool:toolu_1:Bash:{"command":"ls"}`, "text:then more", `tool:toolu_2:Read:{"path":"x"}`),
		"input in 50 deltas":        anthropicStream(50, "text:ok", `tool:toolu_1:Bash:{"command":"echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`, `tool:toolu_2:Read:{"path":"x"}`),
	}
	scripts := map[string]mappingtest.Script{
		"allowed":          nil,
		"first removed":    {0: {Remove: true, Note: "blocked"}},
		"second rewritten": {1: {Input: json.RawMessage(`{"dir":"/tmp"}`)}},
		"all removed":      {0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}},
		"flow stop":        {0: {Remove: true, Stop: true, Note: "stopped"}},
		"fail-closed backend": {0: {Remove: true, Note: "Tool call was blocked by policy: Required policy backend b unavailable."},
			1: {Remove: true, Note: "Tool call was blocked by policy: Required policy backend b unavailable."}},
	}
	for sdesc, upstream := range streams {
		for desc, script := range scripts {
			t.Run(sdesc+"/"+desc, func(t *testing.T) { checkSDKAccumulates(t, upstream, script) })
		}
	}
}

func checkSDKAccumulates(t *testing.T, upstream string, script mappingtest.Script) {
	edited, err := mappingtest.Edit(tr, []byte(upstream), 0, &mappingtest.Decider{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	held, err := mappingtest.Held(tr, []byte(upstream), script)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(edited)
	}))
	defer srv.Close()
	client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("weather?"))}})
	var acc sdk.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, []byte(acc.RawJSON()), held)
}

func FuzzStreamEditAnthropic(f *testing.F) {
	f.Add([]byte(sseStream), uint16(7), uint8(0b0110))
	f.Add([]byte(sseStream), uint16(0), uint8(0b11))
	f.Add([]byte(sseStream), uint16(3), uint8(0b0101))
	// Shapes the SDKs accept: a byte-order mark before the first event; a tool_use block
	// inside message_start's message (blocks 0..k-1), the streamed blocks after it.
	f.Add([]byte("\ufeff"+sseStream), uint16(5), uint8(0b01))
	startCall := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{\"command\":\"rm -rf /\"}}],\"stop_reason\":null}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"Read\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\\\"a\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	f.Add([]byte(startCall), uint16(0), uint8(0b01))
	f.Add([]byte(startCall), uint16(7), uint8(0b1001))
	f.Add([]byte(startCall), uint16(3), uint8(0b11))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16, bits uint8) {
		script := mappingtest.ScriptFromBits(bits)
		d := &mappingtest.Decider{Script: script}
		out, eerr := mappingtest.Edit(tr, stream, int(chunk%64), d)
		if u := mappingtest.Undecided(tr, out, d); u != "" {
			t.Fatalf("a call reached the client unjudged: %s\n%s", u, out)
		}
		if _, err := mappingtest.Held(tr, stream, script); err != nil {
			return
		}
		if eerr != nil {
			// Never stricter than the held path: what it accepts, the editor relays.
			t.Fatalf("the held path accepts the stream, the editor fails: %v", eerr)
		}
		if _, err := mappingtest.Assembled(tr, out); err != nil {
			t.Fatalf("edited stream does not assemble: %v\n%s", err, out)
		}
		why, err := mappingtest.Equivalent(tr, stream, int(chunk%64), script)
		if err == nil && why != "" {
			t.Fatal(why)
		}
	})
}

func TestEditJudgesToolUseInMessageStart(t *testing.T) {
	// message_start's message holds a text and a tool_use block (blocks 0 and 1); a Read
	// call streams as block 2. The removed Bash call never reaches the client, the text and
	// the Read call do, with Read moved to index 1; the held path agrees.
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{\"command\":\"rm -rf /\"}}],\"stop_reason\":null}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"Read\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\\\"a\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	script := mappingtest.Script{0: {Remove: true, Note: "denied"}}
	d := &mappingtest.Decider{Script: script}
	out, err := mappingtest.Edit(tr, []byte(stream), 0, d)
	if err != nil || len(d.Decided) != 2 || d.Decided[0].Name != "Bash" {
		t.Fatalf("err %v, decided %+v", err, d.Decided)
	}
	if strings.Contains(string(out), "rm -rf") || !strings.Contains(string(out), `"index":1,"content_block":{"type":"tool_use","id":"toolu_2"`) {
		t.Fatalf("sent:\n%s", out)
	}
	if why, err := mappingtest.Equivalent(tr, []byte(stream), 5, script); err != nil || why != "" {
		t.Fatalf("not the held path's result: %v\n%s", err, why)
	}
	// A delta for a block of message_start would be merged into it by the SDKs: refused.
	bad := strings.Replace(stream, `"index":2,"delta"`, `"index":1,"delta"`, 1)
	if out, err := mappingtest.Edit(tr, []byte(bad), 0, &mappingtest.Decider{}); err == nil {
		t.Fatalf("a delta for a message_start block was relayed:\n%s", out)
	}
}

// TestStreamedCallDecodedOnce: a streamed tool call passes through one decode of the call.
func TestStreamedCallDecodedOnce(t *testing.T) {
	mappingtest.DecodedOnce(t, tr, []byte(sseStream))
}
