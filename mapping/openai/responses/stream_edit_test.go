package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// blocks splits a stream into its SSE blocks (each with its blank line).
func blocks(stream string) []string {
	var out []string
	for _, b := range strings.SplitAfter(strings.ReplaceAll(stream, "\r\n", "\n"), "\n\n") {
		if b != "" {
			out = append(out, b)
		}
	}
	return out
}

// eventData is the data of an SSE block.
func eventData(block string) string {
	i := strings.Index(block, "data: ")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(block[i+6:])
}

// sseData is the data of each event of stream, read as the editor and the assemblers read
// it (mapping.SSEReader: "data:" with or without its space, any line end); the fuzz
// oracles must not read a stream differently from the code they judge.
func sseData(stream []byte) []string {
	var out []string
	r := mapping.SSEReader{Dispatch: func(_ string, data []byte) error {
		out = append(out, string(data))
		return nil
	}}
	if r.Write(stream) == nil {
		_ = r.Close() // a stream cut inside an event: its complete events are read
	}
	return out
}

func TestEditRelaysItemsAsTheyArrive(t *testing.T) {
	tr := New()
	var out bytes.Buffer
	d := &mappingtest.Decider{}
	ed := tr.NewStreamEditor(&out, d)
	for _, ev := range blocks(toolStream) {
		before := out.Len()
		if _, err := ed.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		got := out.String()[before:]
		switch {
		case strings.Contains(ev, "output_text.delta"), strings.Contains(ev, "reasoning_summary_text.delta"), strings.Contains(ev, "response.created"):
			if got != ev {
				t.Errorf("event %q relayed as %q", ev, got)
			}
		case strings.Contains(ev, "function_call_arguments.delta"):
			if got != "" {
				t.Errorf("part of an open call was sent: %q", got)
			}
		}
	}
	if err := ed.Close(); err != nil {
		t.Fatal(err)
	}
	if len(d.Decided) != 2 || d.Decided[0].ID != "call_a" || d.Decided[1].Name != "run" || d.Decided[1].Index != 1 {
		t.Fatalf("decided %+v", d.Decided)
	}
	body, err := mappingtest.Assembled(tr, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, body, []byte(toolResponse)) {
		t.Errorf("assembled\n%s", body)
	}
	checkSequence(t, out.String())
}

// checkSequence fails unless sequence_number counts the events from 0 and output_index
// never skips a position.
func checkSequence(t *testing.T, stream string) {
	t.Helper()
	want := int64(0)
	maxIndex := int64(-1)
	for _, b := range blocks(stream) {
		d := eventData(b)
		if d == "" {
			continue
		}
		if sn := gjson.Get(d, "sequence_number"); sn.Exists() {
			if sn.Int() != want {
				t.Errorf("sequence_number %d, want %d: %s", sn.Int(), want, d)
			}
			want = sn.Int() + 1
		}
		if gjson.Get(d, "type").String() == "response.output_item.added" {
			oi := gjson.Get(d, "output_index").Int()
			if oi != maxIndex+1 {
				t.Errorf("output_index %d after %d", oi, maxIndex)
			}
			maxIndex = oi
		}
	}
}

func TestEditRemovesAndRewrites(t *testing.T) {
	tr := New()
	tests := []struct {
		desc   string
		script mappingtest.Script
		check  func(t *testing.T, r gjson.Result)
	}{
		{"first removed: later items move up", mappingtest.Script{0: {Remove: true, Note: "Tool call get_weather was blocked by policy: no"}}, func(t *testing.T, r gjson.Result) {
			if r.Get("output.2.type").String() != "web_search_call" || r.Get("output.3.name").String() != "run" ||
				r.Get("output.4.content.0.text").String() != "Tool call get_weather was blocked by policy: no" {
				t.Errorf("%s", r.Raw)
			}
		}},
		{"both removed", mappingtest.Script{0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}}, func(t *testing.T, r gjson.Result) {
			if strings.Contains(r.Raw, "function_call") || r.Get("output.3.content.0.text").String() != "a\nb" || r.Get("status").String() != "completed" {
				t.Errorf("%s", r.Raw)
			}
		}},
		{"flow stop", mappingtest.Script{0: {Remove: true, Stop: true, Note: "stopped"}}, func(t *testing.T, r gjson.Result) {
			if strings.Contains(r.Raw, "function_call") {
				t.Errorf("%s", r.Raw)
			}
		}},
		{"rewritten", mappingtest.Script{1: {Input: json.RawMessage(`{"cmd":"ls"}`)}}, func(t *testing.T, r gjson.Result) {
			if r.Get("output.4.arguments").String() != `{"cmd":"ls"}` || strings.Contains(r.Raw, "rm -rf") {
				t.Errorf("%s", r.Raw)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := mappingtest.Edit(tr, []byte(toolStream), 23, &mappingtest.Decider{Script: tc.script})
			if err != nil {
				t.Fatal(err)
			}
			checkSequence(t, string(out))
			body, err := mappingtest.Assembled(tr, out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			tc.check(t, gjson.ParseBytes(body))
			// The items streamed are the ones the terminal response holds.
			var doneItems []string
			for _, b := range blocks(string(out)) {
				if d := eventData(b); gjson.Get(d, "type").String() == "response.output_item.done" {
					doneItems = append(doneItems, gjson.Get(d, "item").Raw)
				}
			}
			if got := gjson.GetBytes(body, "output").Array(); len(got) != len(doneItems) {
				t.Errorf("%d items streamed, %d in the terminal response", len(doneItems), len(got))
			}
			if why, err := mappingtest.Equivalent(tr, []byte(toolStream), 11, tc.script); err != nil || why != "" {
				t.Errorf("not the held path's result: %v\n%s", err, why)
			}
		})
	}
}

func TestEditJudgesWhatTheTerminalHolds(t *testing.T) {
	// A terminal response whose call differs from the one streamed: the client gets the
	// judged one. A call only the terminal response holds is judged there.
	tr := New()
	var evs []string
	for _, b := range blocks(toolStream) {
		if d := eventData(b); gjson.Get(d, "type").String() == "response.completed" {
			d2, _ := sjson.Set(d, "response.output.2.arguments", `{"city":"Evil"}`)
			d2, _ = sjson.SetRaw(d2, "response.output.-1", `{"id":"fc_x","type":"function_call","status":"completed","arguments":"{}","call_id":"call_x","name":"smuggled"}`)
			b = "event: response.completed\ndata: " + d2 + "\n\n"
		}
		evs = append(evs, b)
	}
	stream := strings.Join(evs, "")
	d := &mappingtest.Decider{Script: mappingtest.Script{2: {Remove: true, Note: "no"}}}
	out, err := mappingtest.Edit(tr, []byte(stream), 0, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Decided) != 3 || d.Decided[2].Name != "smuggled" {
		t.Fatalf("decided %+v", d.Decided)
	}
	body, err := mappingtest.Assembled(tr, out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "Evil") || strings.Contains(string(body), "smuggled") || gjson.GetBytes(body, "output.2.arguments").String() != `{"city":"Paris"}` {
		t.Errorf("the client's response is not the judged one:\n%s", body)
	}
	// Control: the upstream's own terminal event holds both, and the held path (the
	// assembler) refuses a stream whose events and summary disagree.
	if !strings.Contains(stream, `{\"city\":\"Evil\"}`) || !strings.Contains(stream, "smuggled") {
		t.Fatal("control: the stream does not carry the smuggled call")
	}
	if _, err := mappingtest.Assembled(tr, []byte(stream)); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("the held path accepts a stream whose summary disagrees with its events: %v", err)
	}
}

func TestEditFailures(t *testing.T) {
	tr := New()
	evs := blocks(toolStream)
	cut := strings.Join(evs[:len(evs)-3], "") // inside the second call
	d := &mappingtest.Decider{}
	out, err := mappingtest.Edit(tr, []byte(cut), 0, d)
	if err == nil || strings.Contains(string(out), "rm -rf") {
		t.Fatalf("err %v, sent:\n%s", err, out)
	}
	boom := errors.New("backend down")
	var buf bytes.Buffer
	ed := tr.NewStreamEditor(&buf, &mappingtest.Decider{Err: boom, ErrAt: 0})
	if _, err := ed.Write([]byte(toolStream)); !errors.Is(err, boom) {
		t.Fatalf("Write = %v", err)
	}
	if strings.Contains(buf.String(), "get_weather") || strings.Contains(buf.String(), "web_search_call") {
		t.Errorf("sent past the failed decision:\n%s", buf.String())
	}
	ed.Fail("hookproxy_error", "hookproxy.stream_failed", "policy backend unavailable")
	if _, err := mappingtest.Assembled(tr, buf.Bytes()); err == nil || !strings.Contains(err.Error(), "policy backend unavailable") {
		t.Errorf("the failed stream assembles as %v", err)
	}
}

func FuzzStreamEditResponses(f *testing.F) {
	f.Add([]byte(toolStream), uint16(7), uint8(0b0110))
	f.Add([]byte(toolStream), uint16(0), uint8(0b11))
	f.Add([]byte(toolStream), uint16(3), uint8(0b0101))
	f.Add([]byte(customToolStream), uint16(11), uint8(0b1001))
	f.Add([]byte(customToolStream), uint16(0), uint8(0b10))
	f.Add([]byte(resumedStream()), uint16(5), uint8(0b01)) // resumed inside a call (starting_after)
	// Shapes the SDKs accept: a byte-order mark before the first event; an
	// output_item.done without output_index (Codex runs its item).
	f.Add([]byte("\ufeff"+toolStream), uint16(5), uint8(0b01))
	f.Add([]byte(looseDoneStream), uint16(0), uint8(0b01))
	f.Add([]byte(looseDoneStream), uint16(13), uint8(0b10))
	tr := New()
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
			t.Fatalf("the held path accepts the stream, the editor fails: %v", eerr)
		}
		if _, err := mappingtest.Assembled(tr, out); err != nil {
			t.Fatalf("edited stream does not assemble: %v\n%s", err, out)
		}
		if !consistent(stream) {
			return // the terminal response disagrees with the items: the editor keeps the judged ones
		}
		why, err := mappingtest.Equivalent(tr, stream, int(chunk%64), script)
		if err == nil && why != "" {
			t.Fatal(why)
		}
	})
}

// looseDoneStream carries a call in an output_item.done without output_index, between
// a message and a terminal response that holds only the message.
const looseDoneStream = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
	"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"sequence_number\":1,\"item\":{\"type\":\"message\",\"id\":\"m1\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\",\"annotations\":[]}]}}\n\n" +
	"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":2,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"rm -rf /\\\"}\",\"status\":\"completed\"}}\n\n" +
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"id\":\"m1\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\",\"annotations\":[]}]}]}}\n\n"

// consistent reports whether every streamed item's done form is the terminal response's
// item at that index, and the terminal holds no item that was not streamed. A call in an
// output_item.done without output_index is judged where it comes in the editor and after
// the terminal's items on the held path: not the same order.
func consistent(stream []byte) bool {
	var done = map[int64]string{}
	var term gjson.Result
	for _, d := range sseData(stream) {
		switch gjson.Get(d, "type").String() {
		case "response.output_item.done":
			if !gjson.Get(d, "output_index").Exists() {
				return false
			}
			done[gjson.Get(d, "output_index").Int()] = gjson.Get(d, "item").Raw
		case "response.output_item.added":
			if _, ok := done[gjson.Get(d, "output_index").Int()]; !ok {
				done[gjson.Get(d, "output_index").Int()] = ""
			}
		case "response.completed", "response.incomplete":
			term = gjson.Get(d, "response.output")
		}
	}
	if !term.IsArray() {
		return len(done) == 0
	}
	arr := term.Array()
	if len(arr) != len(done) {
		return false
	}
	for i, it := range arr {
		if done[int64(i)] != it.Raw {
			return false
		}
	}
	return true
}

func TestEditRemovedTerminalOnlyCallFinishesTheTurn(t *testing.T) {
	// A call only the terminal response holds, removed: no call is left, so the turn is
	// finished as on the held path, even when the upstream's terminal carries no status.
	for _, status := range []string{``, `"status":"in_progress",`} {
		stream := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{" + status +
			`"output":[{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"}]}}` + "\n\n"
		script := mappingtest.Script{0: {Remove: true, Stop: true, Note: "stop"}}
		out, err := mappingtest.Edit(New(), []byte(stream), 0, &mappingtest.Decider{Script: script})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), `"shell"`) {
			t.Fatalf("the removed call reached the client:\n%s", out)
		}
		why, err := mappingtest.Equivalent(New(), []byte(stream), 0, script)
		if err != nil || why != "" {
			t.Errorf("status %q: not the held path's result: %v\n%s", status, err, why)
		}
	}
}

// resumedStream is toolStream as GET /v1/responses/{id}?stream=true&starting_after=N
// resumes it inside the first call: its output_item.added is behind, its arguments ahead.
func resumedStream() string {
	bs := blocks(toolStream)
	for i, b := range bs {
		if strings.Contains(b, "function_call_arguments.delta") {
			return strings.Join(bs[i:], "")
		}
	}
	panic("toolStream has no arguments delta")
}

// TestEditResumedStream: the arguments of a call this stream never announced are not
// relayed as they come; the call is judged at its output_item.done and, when kept,
// written whole (added, arguments, done), when removed not at all.
func TestEditResumedStream(t *testing.T) {
	tr := New()
	stream := resumedStream()
	firstArgs := gjson.Get(eventData(blocks(stream)[0]), "delta").String()
	for _, remove := range []bool{false, true} {
		d := &mappingtest.Decider{Script: mappingtest.Script{}}
		if remove {
			d.Script[0] = mapping.CallVerdict{Remove: true, Note: "removed"}
		}
		out, err := mappingtest.Edit(tr, []byte(stream), 17, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Decided) == 0 || d.Decided[0].Index != 0 {
			t.Fatalf("remove=%v: the resumed call was not judged first: %+v", remove, d.Decided)
		}
		var added, deltas int
		for _, b := range blocks(string(out)) {
			data := eventData(b)
			switch typ := gjson.Get(data, "type").String(); {
			case typ == "response.output_item.added" && gjson.Get(data, "item.call_id").String() == "call_a":
				added++
			case typ == "response.function_call_arguments.delta" && gjson.Get(data, "item_id").String() == "fc_9a":
				deltas++
			}
		}
		if remove && (added != 0 || deltas != 0 || strings.Contains(string(out), firstArgs)) {
			t.Errorf("the removed call's events reached the client:\n%s", out)
		}
		if !remove && (added != 1 || deltas != 1) {
			t.Errorf("the kept call is not written whole (added %d, deltas %d):\n%s", added, deltas, out)
		}
		// The numbering continues the upstream's: the first event written is the first
		// resumed one's number.
		first := gjson.Get(eventData(blocks(string(out))[0]), "sequence_number").Int()
		if want := gjson.Get(eventData(blocks(stream)[0]), "sequence_number").Int(); first != want {
			t.Errorf("remove=%v: first sequence_number %d, want %d", remove, first, want)
		}
	}
}

func TestEditJudgesDoneWithoutOutputIndex(t *testing.T) {
	// The call of an output_item.done without output_index is decided; removed, no event
	// of it reaches the client; allowed, it goes out as it came. The held path judges it
	// too, after the terminal response's items.
	for _, remove := range []bool{true, false} {
		script := mappingtest.Script{}
		if remove {
			script[0] = mapping.CallVerdict{Remove: true, Note: "denied"}
		}
		d := &mappingtest.Decider{Script: script}
		out, err := mappingtest.Edit(New(), []byte(looseDoneStream), 7, d)
		if err != nil || len(d.Decided) != 1 || d.Decided[0].Name != "Bash" {
			t.Fatalf("err %v, decided %+v", err, d.Decided)
		}
		if strings.Contains(string(out), "rm -rf") != !remove {
			t.Fatalf("remove=%v, sent:\n%s", remove, out)
		}
		held, err := mappingtest.Held(New(), []byte(looseDoneStream), script)
		if err != nil || strings.Contains(string(held), "rm -rf") != !remove {
			t.Fatalf("held path: %v\n%s", err, held)
		}
	}
}

// TestStreamedCallDecodedOnce: a streamed tool call passes through one decode of the call.
func TestStreamedCallDecodedOnce(t *testing.T) {
	mappingtest.DecodedOnce(t, New(), []byte(toolStream))
}
