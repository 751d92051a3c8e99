package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
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

func TestModifyInputRewritesCustomToolFreeformInput(t *testing.T) {
	// Codex's apply_patch is a custom (freeform) tool: modify(input) on {"input": ...}
	// rewrites the patch text the client runs, JSON and streamed.
	resp := `{"id":"resp_c","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[` +
		`{"id":"ctc_1","type":"custom_tool_call","status":"completed","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** Delete File: go.mod\n*** End Patch\n"}]}`
	var stream bytes.Buffer
	if err := responses.New().WriteStream(&stream, []byte(resp)); err != nil {
		t.Fatal(err)
	}
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "apply_patch" {
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetInput, Operation: ahp.OpMerge,
				Value: json.RawMessage(`{"input":"*** Begin Patch\n*** End Patch\n"}`)}}
		}
		return nil
	}}
	for _, streamed := range []bool{false, true} {
		up := newUpstream(t, jsonResponder(200, resp))
		req := `{"model":"gpt-5","input":"x"}`
		if streamed {
			up.respond = sseResponder(stream.String())
			req = `{"model":"gpt-5","input":"x","stream":true}`
		}
		px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{})
		_, _, got := post(t, px.URL+"/openai/v1/responses", req, nil)
		body := got
		if streamed {
			b, err := mappingtest.Assembled(responses.New(), got)
			if err != nil {
				t.Fatal(err)
			}
			body = b
		}
		in := gjson.GetBytes(body, `output.#(type=="custom_tool_call").input`).String()
		if in != "*** Begin Patch\n*** End Patch\n" {
			t.Errorf("streamed=%v: the client's patch is %q", streamed, in)
		}
	}
}
