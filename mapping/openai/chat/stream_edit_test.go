package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// events splits a stream into its SSE blocks (each with its blank line).
func events(stream string) []string {
	var out []string
	for _, b := range strings.SplitAfter(strings.ReplaceAll(stream, "\r", ""), "\n\n") {
		if b != "" {
			out = append(out, b)
		}
	}
	return out
}

func TestChatEditRelaysTextAsItArrives(t *testing.T) {
	// Each event without tool call data reaches the client, byte for byte, before the next
	// event is read; the tool call chunks do not, until the call is decided.
	c := NewChat()
	var out bytes.Buffer
	d := &mappingtest.Decider{}
	ed := c.NewStreamEditor(&out, d)
	for _, ev := range events(toolStream) {
		before := out.Len()
		if _, err := ed.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		got := out.String()[before:]
		switch {
		case strings.Contains(ev, `"content":"Let me "`), strings.Contains(ev, "reasoning_content"), strings.HasPrefix(ev, ":"):
			if got != ev {
				t.Errorf("event %q relayed as %q", ev, got)
			}
		case strings.Contains(ev, `"arguments":"{\"ci"`):
			if got != "" {
				t.Errorf("a fragment of an open call was sent: %q", got)
			}
		}
	}
	if err := ed.Close(); err != nil {
		t.Fatal(err)
	}
	if len(d.Decided) != 2 || d.Decided[0].Name != "get_weather" || string(d.Decided[0].Input) != `{"city":"Paris"}` ||
		d.Decided[1].ID != "call_b" || d.Decided[1].Index != 1 {
		t.Fatalf("decided %+v", d.Decided)
	}
	// Nothing removed: the client assembles what the upstream sent.
	body, err := mappingtest.Assembled(c, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, body, []byte(toolStreamBody)) {
		t.Errorf("assembled\n%s\nwant\n%s", body, toolStreamBody)
	}
}

func TestChatEditDecidesEachCallWhenComplete(t *testing.T) {
	// The first call is decided as soon as the second opens (not at the end), and at that
	// moment the client has the text but nothing of either call.
	c := NewChat()
	var out bytes.Buffer
	var seen []string
	d := &mappingtest.Decider{OnDecide: func(sc mapping.StreamCall) { seen = append(seen, out.String()) }}
	ed := c.NewStreamEditor(&out, d)
	var decidedAt []int
	for i, ev := range events(toolStream) {
		n := len(d.Decided)
		if _, err := ed.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		if len(d.Decided) > n {
			decidedAt = append(decidedAt, i)
		}
	}
	if err := ed.Close(); err != nil {
		t.Fatal(err)
	}
	evs := events(toolStream)
	if len(decidedAt) != 2 || !strings.Contains(evs[decidedAt[0]], `"index":1,"id":"call_b"`) || !strings.Contains(evs[decidedAt[1]], `"finish_reason":"tool_calls"`) {
		t.Fatalf("calls decided at events %v", decidedAt)
	}
	if !strings.Contains(seen[0], "check both.") || strings.Contains(seen[0], "get_weather") {
		t.Errorf("client had, when call 0 was decided:\n%s", seen[0])
	}
	if !strings.Contains(seen[1], "get_weather") || strings.Contains(seen[1], "call_b") {
		t.Errorf("client had, when call 1 was decided:\n%s", seen[1])
	}
}

func TestChatEditRemovesAndRewrites(t *testing.T) {
	c := NewChat()
	deny := mapping.CallVerdict{Remove: true, Note: "Tool call run was blocked by policy: no"}
	tests := []struct {
		desc   string
		script mappingtest.Script
		want   []string // substrings of the assembled body
		not    []string
		skips  int
	}{
		{desc: "second removed", script: mappingtest.Script{1: deny},
			want: []string{`"content":"Let me check both.\n\nTool call run was blocked by policy: no"`, `"finish_reason":"tool_calls"`, `"name":"get_weather"`},
			not:  []string{"call_b"}},
		{desc: "first removed: the second is renumbered", script: mappingtest.Script{0: {Remove: true, Note: "n0"}},
			want: []string{`"name":"run"`, `"finish_reason":"tool_calls"`, "check both.\\n\\nn0"}, not: []string{"get_weather"}},
		{desc: "both removed: stop", script: mappingtest.Script{0: {Remove: true, Note: "n0"}, 1: {Remove: true, Note: "n1"}},
			want: []string{`"finish_reason":"stop"`, `n0\nn1`}, not: []string{"get_weather", "call_b", `"tool_calls"`}},
		{desc: "flow stop on the first removes the second unasked", script: mappingtest.Script{0: {Stop: true, Remove: true, Note: "stopped"}},
			want: []string{`"finish_reason":"stop"`, "stopped"}, not: []string{"get_weather", "call_b"}, skips: 1},
		{desc: "modified input", script: mappingtest.Script{1: {Input: json.RawMessage(`{"cmd":"ls"}`)}},
			want: []string{`"arguments":"{\"cmd\":\"ls\"}"`}, not: []string{"rm -rf"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d := &mappingtest.Decider{Script: tc.script}
			out, err := mappingtest.Edit(c, []byte(toolStream), 13, d)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Skips) != tc.skips {
				t.Errorf("skipped %d calls, want %d", len(d.Skips), tc.skips)
			}
			body, err := mappingtest.Assembled(c, out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("assembled body lacks %s:\n%s", w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(out), n) {
					t.Errorf("the client received %s:\n%s", n, out)
				}
			}
			// Kept calls are numbered 0.. in the stream the client reads.
			k := 0
			for _, ev := range events(string(out)) {
				for _, tcall := range gjson.Get(strings.TrimPrefix(strings.TrimSpace(ev), "data: "), "choices.0.delta.tool_calls").Array() {
					if int(tcall.Get("index").Int()) != k {
						t.Errorf("kept call %d has index %d", k, tcall.Get("index").Int())
					}
					k++
				}
			}
			if why, err := mappingtest.Equivalent(c, []byte(toolStream), 7, tc.script); err != nil || why != "" {
				t.Errorf("not the held path's result: %v\n%s", err, why)
			}
		})
	}
}

func TestChatEditOneChunkCalls(t *testing.T) {
	// vLLM and others put a whole call, even the finish, in one chunk.
	c := NewChat()
	stream := `data: {"id":"x","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"}}]}` + "\n\n" +
		`data: {"id":"x","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"a","arguments":"{}"}},{"index":1,"id":"call_1","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n"
	for _, script := range []mappingtest.Script{nil, {0: {Remove: true, Note: "no a"}}, {1: {Remove: true, Note: "no b"}}, {0: {Remove: true}, 1: {Remove: true}}} {
		d := &mappingtest.Decider{Script: script}
		out, err := mappingtest.Edit(c, []byte(stream), 0, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Decided) != 2 {
			t.Fatalf("decided %d calls", len(d.Decided))
		}
		if why, err := mappingtest.Equivalent(c, []byte(stream), 5, script); err != nil || why != "" {
			t.Errorf("%v: %v\n%s\n%s", script, err, why, out)
		}
	}
}

func TestChatEditEndsWithoutSendingUndecided(t *testing.T) {
	c := NewChat()
	evs := events(toolStream)
	cut := strings.Join(evs[:11], "") // inside the first call
	d := &mappingtest.Decider{}
	out, err := mappingtest.Edit(c, []byte(cut), 0, d)
	if err == nil {
		t.Fatal("a stream cut inside a call closed without error")
	}
	if strings.Contains(string(out), "get_weather") || len(d.Decided) != 0 {
		t.Errorf("an undecided call reached the client:\n%s", out)
	}
	// Control: the same stream uncut delivers the call.
	out, err = mappingtest.Edit(c, []byte(toolStream), 0, &mappingtest.Decider{})
	if err != nil || !strings.Contains(string(out), "get_weather") {
		t.Fatalf("control: %v\n%s", err, out)
	}
}

func TestChatEditDecideErrorStopsTheStream(t *testing.T) {
	c := NewChat()
	boom := errors.New("backend down")
	d := &mappingtest.Decider{Err: boom, ErrAt: 1}
	var out bytes.Buffer
	ed := c.NewStreamEditor(&out, d)
	_, err := ed.Write([]byte(toolStream))
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the decider's error", err)
	}
	if strings.Contains(out.String(), "call_b") || strings.Contains(out.String(), "[DONE]") {
		t.Errorf("sent past the failed decision:\n%s", out.String())
	}
	if err := ed.Fail("hookproxy_error", "hookproxy.stream_failed", "policy backend unavailable"); err != nil {
		t.Fatal(err)
	}
	last := events(out.String())
	ev := strings.TrimPrefix(strings.TrimSpace(last[len(last)-1]), "data: ")
	if gjson.Get(ev, "error.code").String() != "hookproxy.stream_failed" || gjson.Get(ev, "error.message").String() == "" {
		t.Errorf("last event %s", ev)
	}
	// An assembler (as an SDK) reports it as the stream's error.
	if _, err := mappingtest.Assembled(c, out.Bytes()); err == nil {
		t.Error("the failed stream assembled without error")
	}
}

func TestChatEditHeldIsBoundedByCalls(t *testing.T) {
	// Text is never held; a call's arguments are, until it completes.
	c := NewChat()
	var out bytes.Buffer
	ed := c.NewStreamEditor(&out, &mappingtest.Decider{})
	head := `data: {"id":"x","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("a", 1000) + `"}}]}` + "\n\n"
	for i := 0; i < 100; i++ {
		ed.Write([]byte(head))
		if ed.Held() != 0 {
			t.Fatalf("text held: %d bytes", ed.Held())
		}
	}
	ed.Write([]byte(`data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"` + strings.Repeat("b", 5000) + `"}}]}}]}` + "\n\n"))
	if h := ed.Held(); h < 5000 || h > 6000 {
		t.Fatalf("held %d bytes for a 5000-byte call", h)
	}
	ed.Write([]byte(`data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"))
	if ed.Held() != 0 {
		t.Fatalf("held %d after the end", ed.Held())
	}
}

func TestChatEditRelaysNothingAfterDone(t *testing.T) {
	c := NewChat()
	stream := toolStream + `data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":5,"id":"late","type":"function","function":{"name":"evil","arguments":"{}"}}]}}]}` + "\n\n"
	d := &mappingtest.Decider{}
	out, err := mappingtest.Edit(c, []byte(stream), 0, d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "evil") || len(d.Decided) != 2 {
		t.Errorf("relayed after [DONE]:\n%s", out)
	}
}

func FuzzStreamEditChat(f *testing.F) {
	f.Add([]byte(toolStream), uint16(7), uint8(0b0110))
	f.Add([]byte(toolStream), uint16(1), uint8(0b1001))
	f.Add([]byte("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n"), uint16(1), uint8(0))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-1,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"), uint16(0), uint8(1))
	// Shapes the SDKs accept: a byte-order mark before the first event; chunks carrying
	// "error": "" or "error": {}, or sent as "event: error", that a client reads on past.
	f.Add([]byte("\ufeff"+toolStream), uint16(5), uint8(0b01))
	call := `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"Bash","arguments":"{\\"command\\":\\"rm -rf /\\"}"}}]},"finish_reason":null}]}`
	end := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	f.Add([]byte("data: {\"id\":\"c\",\"choices\":[],\"error\":\"\"}\n\ndata: "+call+"\n\n"+end), uint16(3), uint8(0b01))
	f.Add([]byte("data: {\"id\":\"c\",\"choices\":[],\"error\":{}}\n\ndata: "+call+"\n\n"+end), uint16(0), uint8(0b10))
	f.Add([]byte("event: error\ndata: "+call+"\n\n"+end), uint16(9), uint8(0b01))
	c := NewChat()
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16, bits uint8) {
		script := mappingtest.ScriptFromBits(bits)
		// Only single-choice streams are held to the held path's result (see the editor's
		// documentation for n > 1); every stream must edit without panicking.
		d := &mappingtest.Decider{Script: script}
		out, eerr := mappingtest.Edit(c, stream, int(chunk%64), d)
		if u := mappingtest.Undecided(c, out, d); u != "" {
			t.Fatalf("a call reached the client unjudged: %s\n%s", u, out)
		}
		whole, err := mappingtest.Assembled(c, stream)
		if _, herr := mappingtest.Held(c, stream, script); herr == nil && eerr != nil && !errors.Is(eerr, errCallResumed) {
			// Never stricter than the held path: what it accepts, the editor relays, but
			// for a call resumed after it was judged (errCallResumed).
			t.Fatalf("the held path accepts the stream, the editor fails: %v", eerr)
		}
		if err != nil || eerr != nil || gjson.GetBytes(whole, "choices.#").Int() != 1 {
			return
		}
		// A call without an id gets one derived from the whole body it is decoded in,
		// which differs between the two paths by construction; the client sees none.
		if m := gjson.GetBytes(whole, "choices.0.message"); m.Get(`tool_calls.#(id=="")`).Exists() || m.Get("function_call").Exists() {
			return
		}
		if _, aerr := mappingtest.Assembled(c, out); aerr != nil {
			t.Fatalf("edited stream does not assemble: %v\n%s", aerr, out)
		}
		why, err := mappingtest.Equivalent(c, stream, int(chunk%64), script)
		if err != nil {
			return
		}
		if why != "" {
			t.Fatal(why)
		}
	})
}

func TestEditResumedCall(t *testing.T) {
	c := NewChat()
	chunk := func(tc string) string {
		return `data: {"choices":[{"index":0,"delta":{"tool_calls":[` + tc + `]}}]}` + "\n\n"
	}
	head := chunk(`{"index":0,"id":"a","function":{"name":"ls","arguments":"{}"}}`) + chunk(`{"index":1,"id":"b","function":{"name":"pwd","arguments":"{}"}}`)
	end := `data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
	// An empty entry for an earlier index changes no call: the stream edits as without it.
	empty := head + chunk(`{}`) + chunk(`{"index":0,"function":{"arguments":""}}`) + end
	if why, err := mappingtest.Equivalent(c, []byte(empty), 0, nil); err != nil || why != "" {
		t.Errorf("empty entries: %v %s", err, why)
	}
	// A fragment for a call already judged and relayed fails the stream, and the fragment
	// never reaches the client.
	resumed := head + chunk(`{"index":0,"function":{"arguments":"; rm -rf /"}}`) + end
	out, err := mappingtest.Edit(c, []byte(resumed), 0, &mappingtest.Decider{})
	if !errors.Is(err, errCallResumed) || strings.Contains(string(out), "rm -rf") {
		t.Fatalf("err %v, sent:\n%s", err, out)
	}
	// Control: the held path merges it into the first call.
	if body, err := mappingtest.Assembled(c, []byte(resumed)); err != nil || !strings.Contains(string(body), "rm -rf") {
		t.Fatalf("control: the held path does not merge the fragment: %v %s", err, body)
	}
}

func TestEditReadsOnPastFalsyErrorChunks(t *testing.T) {
	// openai-python reads on past a chunk whose "error" is falsy, and past "event: error"
	// carrying a chunk: the call after (or in) it is decided; a truthy error ends the
	// stream there, held or edited, and the call after it is never sent.
	call := `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}}]},"finish_reason":null}]}`
	end := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	for _, c := range []struct {
		stream  string
		decided bool
	}{
		{"data: {\"id\":\"c\",\"choices\":[],\"error\":\"\"}\n\ndata: " + call + "\n\n" + end, true},
		{"data: {\"id\":\"c\",\"choices\":[],\"error\":{}}\n\ndata: " + call + "\n\n" + end, true},
		{"data: {\"id\":\"c\",\"choices\":[],\"error\":null}\n\ndata: " + call + "\n\n" + end, true},
		{"event: error\ndata: " + call + "\n\n" + end, true},
		{"\ufeffdata: " + call + "\n\n" + end, true},
		{"data: {\"error\":{\"message\":\"overloaded\"}}\n\ndata: " + call + "\n\n" + end, false},
		{"event: error\ndata: {\"message\":\"overloaded\"}\n\ndata: " + call + "\n\n" + end, false},
	} {
		script := mappingtest.Script{0: {Remove: true, Note: "denied"}}
		d := &mappingtest.Decider{Script: script}
		out, err := mappingtest.Edit(NewChat(), []byte(c.stream), 4, d)
		if err != nil || (len(d.Decided) == 1) != c.decided || strings.Contains(string(out), "rm -rf") {
			t.Fatalf("%q: err %v, decided %+v, sent:\n%s", c.stream, err, d.Decided, out)
		}
		_, herr := mappingtest.Held(NewChat(), []byte(c.stream), script)
		if (herr == nil) != c.decided {
			t.Errorf("%q: held path: %v", c.stream, herr)
		}
	}
}

// TestStreamedCallDecodedOnce: a streamed tool call passes through one decode of the call.
func TestStreamedCallDecodedOnce(t *testing.T) {
	mappingtest.DecodedOnce(t, NewChat(), []byte(toolStream))
}

// TestEditStates: the editor relays until a call opens, holds while it is open, relays
// again once it is settled, and is done after [DONE], where later input is dropped.
func TestEditStates(t *testing.T) {
	var out bytes.Buffer
	ed := NewChat().NewStreamEditor(&out, &mappingtest.Decider{}).(*chatEditor)
	var seen []mapping.EditState
	for _, ev := range events(toolStream) {
		if _, err := ed.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		if s := ed.State(); len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
	}
	want := []mapping.EditState{mapping.Relaying, mapping.HoldingCall, mapping.Relaying, mapping.Done}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("states %v, want %v", seen, want)
	}
	if err := ed.Close(); err != nil || ed.State() != mapping.Done {
		t.Fatalf("close: %v %v", ed.State(), err)
	}
}
