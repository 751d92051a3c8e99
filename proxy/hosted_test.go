package proxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/mapping/openai/responses"
)

const responsesHosted = `{"id":"resp_h","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[` +
	`{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"hookproxy releases"}},` +
	`{"id":"mcp_1","type":"mcp_call","server_label":"deepwiki","name":"ask_question","arguments":"{\"q\":\"x\"}","output":"an answer","error":null},` +
	`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"done","annotations":[]}]}]}`

const anthropicHosted = `{"id":"msg_h","type":"message","role":"assistant","model":"claude","content":[` +
	`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"weather"}},` +
	`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.com","title":"w"}]},` +
	`{"type":"text","text":"sunny"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`

func TestHostedToolsAreObserved(t *testing.T) {
	for _, tc := range []struct {
		path, req, resp string
		names           []string
	}{
		{"/openai/v1/responses", `{"model":"gpt-5","input":"search"}`, responsesHosted, []string{"web_search", "ask_question"}},
		{"/anthropic/v1/messages", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"weather?"}]}`, anthropicHosted, []string{"web_search"}},
	} {
		for _, intercepting := range []bool{false, true} {
			up := newUpstream(t, jsonResponder(200, tc.resp))
			pol := &fakePolicy{}
			subs := []sub{observe("tool.after")}
			if intercepting {
				subs = append(subs, intercept("tool.before"))
			}
			px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, subs...), Options{})
			status, _, got := post(t, px.URL+tc.path, tc.req, nil)
			if status != 200 || string(got) != tc.resp {
				t.Fatalf("%s: the response changed: %d %s", tc.path, status, got)
			}
			obs := waitObserved(t, pol, "tool.after", len(tc.names))
			byName := map[string]string{} // observations are delivered concurrently: any order
			for _, o := range obs {
				if o.Tool.Kind != "hosted" || o.Outcome != "ok" || len(o.Items) != 1 {
					t.Errorf("%s: observation %+v", tc.path, o.Tool)
				}
				byName[o.Tool.Name] = string(o.Tool.Input)
			}
			for _, name := range tc.names {
				if _, ok := byName[name]; !ok {
					t.Errorf("%s: no tool.after for %s (got %v)", tc.path, name, byName)
				}
			}
			if !strings.Contains(byName["web_search"], "query") {
				t.Errorf("web_search input %s", byName["web_search"])
			}
			assertValidObservations(t, pol)
		}
	}
}

func TestHostedToolsObservedInEditedStream(t *testing.T) {
	var stream bytes.Buffer
	if err := responses.New().WriteStream(&stream, []byte(responsesHosted)); err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, sseResponder(stream.String()))
	pol := &fakePolicy{}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, observe("tool.after"), intercept("tool.before")), Options{})
	status, _, _ := post(t, px.URL+"/openai/v1/responses", `{"model":"gpt-5","input":"search","stream":true}`, nil)
	if status != 200 {
		t.Fatal(status)
	}
	if obs := waitObserved(t, pol, "tool.after", 2); len(obs) != 2 {
		t.Fatalf("%d observations", len(obs))
	}
}
