package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping/mappingtest"
	translator "github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// splitArguments rewrites a stream so that each arguments delta arrives in n pieces, and
// renumbers sequence_number.
func splitArguments(t *testing.T, stream []byte, n int) []byte {
	var out []string
	for _, b := range strings.SplitAfter(string(stream), "\n\n") {
		i := strings.Index(b, "data: ")
		if i < 0 {
			continue
		}
		data := strings.TrimSpace(b[i+6:])
		if gjson.Get(data, "type").String() != "response.function_call_arguments.delta" {
			out = append(out, data)
			continue
		}
		args := gjson.Get(data, "delta").String()
		step := max(1, len(args)/n)
		for len(args) > 0 {
			k := min(step, len(args))
			d, err := sjson.Set(data, "delta", args[:k])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
			args = args[k:]
		}
	}
	var b strings.Builder
	for seq, d := range out {
		d, _ = sjson.Set(d, "sequence_number", seq)
		b.WriteString("event: " + gjson.Get(d, "type").String() + "\ndata: " + d + "\n\n")
	}
	return []byte(b.String())
}

// The official SDK reads an edited stream over HTTP: every event parses, and the
// terminal response is the one the held path would have sent for the same verdicts.
func TestSDKReadsEditedStream(t *testing.T) {
	tr := translator.New()
	var textAfter bytes.Buffer
	body := `{"id":"resp_t","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"first","annotations":[]}]},` +
		`{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"command\":\"echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}","call_id":"call_1","name":"Bash"},` +
		`{"id":"msg_2","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"then more","annotations":[]}]},` +
		`{"id":"fc_2","type":"function_call","status":"completed","arguments":"{\"path\":\"x\"}","call_id":"call_2","name":"Read"}]}`
	if err := tr.WriteStream(&textAfter, []byte(body)); err != nil {
		t.Fatal(err)
	}
	streams := map[string][]byte{
		"reasoning, text, two calls, a web search": fixture(t, "responses/tool_stream.sse"),
		"text after a tool call":                   textAfter.Bytes(),
		"arguments in 50 deltas":                   splitArguments(t, textAfter.Bytes(), 50),
	}
	scripts := map[string]mappingtest.Script{
		"allowed":          nil,
		"first removed":    {0: {Remove: true, Note: "blocked"}},
		"second rewritten": {1: {Input: json.RawMessage(`{"cmd":"ls"}`)}},
		"all removed":      {0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}},
		"flow stop":        {0: {Remove: true, Stop: true, Note: "stopped"}},
		"fail-closed backend": {0: {Remove: true, Note: "Tool call was blocked by policy: Required policy backend b unavailable."},
			1: {Remove: true, Note: "Tool call was blocked by policy: Required policy backend b unavailable."}},
	}
	for sdesc, upstream := range streams {
		for desc, script := range scripts {
			t.Run(sdesc+"/"+desc, func(t *testing.T) { checkSDKReads(t, tr, upstream, script) })
		}
	}
}

func checkSDKReads(t *testing.T, tr *translator.Translator, upstream []byte, script mappingtest.Script) {
	edited, err := mappingtest.Edit(tr, upstream, 0, &mappingtest.Decider{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	held, err := mappingtest.Held(tr, upstream, script)
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, serving(200, "text/event-stream", edited))
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-5"})
	defer stream.Close()
	var final string
	var calls []string
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.done":
			if ev.Item.Type == "function_call" {
				calls = append(calls, ev.Item.Name+" "+gjson.Get(ev.Item.RawJSON(), "arguments").String())
			}
		case "response.completed":
			final = ev.Response.RawJSON()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, it := range gjson.GetBytes(held, "output").Array() {
		if it.Get("type").String() == "function_call" {
			want = append(want, it.Get("name").String()+" "+it.Get("arguments").String())
		}
	}
	if len(calls) != len(want) {
		t.Fatalf("SDK saw calls %q, held path %q", calls, want)
	}
	for i := range calls {
		if calls[i] != want[i] {
			t.Errorf("call %d: %q, want %q", i, calls[i], want[i])
		}
	}
	gv, err := mappingtest.View(tr, []byte(final))
	if err != nil {
		t.Fatal(err)
	}
	wv, _ := mappingtest.View(tr, held)
	if gv != wv {
		t.Errorf("terminal response:\n%s\nheld path:\n%s", gv, wv)
	}
}
