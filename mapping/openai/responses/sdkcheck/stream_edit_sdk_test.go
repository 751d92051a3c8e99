package sdkcheck

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping/mappingtest"
	translator "github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// The official SDK reads an edited stream over HTTP: every event parses, and the
// terminal response is the one the held path would have sent for the same verdicts.
func TestSDKReadsEditedStream(t *testing.T) {
	tr := translator.New()
	upstream := fixture(t, "responses/tool_stream.sse")
	for desc, script := range map[string]mappingtest.Script{
		"first removed":    {0: {Remove: true, Note: "blocked"}},
		"second rewritten": {1: {Input: json.RawMessage(`{"cmd":"ls"}`)}},
		"all removed":      {0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}},
	} {
		t.Run(desc, func(t *testing.T) {
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
		})
	}
}
