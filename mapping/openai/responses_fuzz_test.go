package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

func FuzzResponsesDecodeRequest(f *testing.F) {
	for _, s := range []string{
		respRequestFixture,
		`{"model":"m","input":"hi","instructions":"sys"}`,
		`{"previous_response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://x/y.png"}]}]}`,
		`{"input":[{"type":"reasoning","id":"rs","summary":[],"content":[{"type":"reasoning_text","text":"t"}],"encrypted_content":"e"},{"type":"custom_tool_call","call_id":"c","name":"n","input":"i"}]}`,
	} {
		f.Add([]byte(s))
	}
	r := NewResponses()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := r.DecodeRequest(body)
		if err != nil {
			var br *mapping.BadRequest
			if !errors.As(err, &br) || br.Reason == "" {
				t.Fatalf("error is not a *mapping.BadRequest with a reason: %v", err)
			}
			return
		}
		checkSchema(t, req.Items)
		out, err := r.EncodeRequest(req, cloneItems(req.Items))
		if err != nil || string(out) != string(body) {
			t.Fatalf("unchanged items: err %v", err)
		}
		// Every editable text part and every function call's input can be edited, and the
		// edit is what the model sees at that position.
		st := req.Native.(*responsesRequest)
		const edit = "fuzz <&> edit"
		for i := range req.Items {
			for j := range req.Items[i].Parts {
				items := cloneItems(req.Items)
				p := &items[i].Parts[j]
				want := edit
				switch {
				case p.Kind != ahp.KindText || p.Text == nil:
					continue
				case p.Category == ahp.CategoryToolCall:
					nc := st.calls[p.ID]
					if nc == nil || nc.kind == callCustom {
						continue
					}
					call, _ := mapping.ParseToolCall(p)
					call.Input = json.RawMessage(`{"fuzz":"<&>"}`)
					*p = mapping.ToolCallPart(p.ID, call)
					want = `"input":{"fuzz":"<&>"}`
				default:
					s := edit
					p.Text = &s
				}
				out, err := r.EncodeRequest(req, items)
				if err != nil {
					t.Fatalf("edit of %s: %v", p.ID, err)
				}
				again, err := r.DecodeRequest(out)
				if err != nil {
					t.Fatalf("edited body does not decode: %v\n%s", err, out)
				}
				found := false
				for _, m := range again.Items {
					for _, q := range m.Parts {
						found = found || strings.Contains(normalizeJSON(q.TextOf()), want)
					}
				}
				if !found {
					t.Fatalf("edit of %s lost: %s", p.ID, out)
				}
			}
		}
	})
}

func FuzzResponsesDecodeResponse(f *testing.F) {
	for _, s := range []string{
		respResponseFixture,
		`{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"refusal","refusal":"no"}]}]}`,
		`{"output":[{"type":"custom_tool_call","name":"c","input":"x"},{"type":"reasoning","encrypted_content":"e","summary":[]}]}`,
	} {
		f.Add([]byte(s))
	}
	r := NewResponses()
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := r.DecodeResponse(body)
		if err != nil {
			var ue *mapping.UpstreamError
			if !errors.Is(err, mapping.ErrMalformed) && !errors.As(err, &ue) {
				t.Fatalf("error is neither ErrMalformed nor *mapping.UpstreamError: %v", err)
			}
			return
		}
		checkSchema(t, resp.Items)
		out, err := r.EncodeResponse(resp, cloneItems(resp.Items), resp.FinishReason)
		if err != nil || string(out) != string(body) {
			t.Fatalf("unchanged items: err %v", err)
		}
		items := cloneItems(resp.Items)
		var kept []ahp.Part
		for _, p := range items[0].Parts {
			if p.Category != ahp.CategoryToolCall {
				kept = append(kept, p)
			}
		}
		items[0].Parts = kept
		out, err = r.EncodeResponse(resp, items, r.TerminalFinishReason())
		if err != nil {
			t.Fatalf("flow stop: %v", err)
		}
		stopped, err := r.DecodeResponse(out)
		if err != nil {
			t.Fatalf("stopped body does not decode: %v\n%s", err, out)
		}
		if n := len(mapping.ToolCalls(stopped.Items)); n != 0 {
			t.Fatalf("%d tool calls left", n)
		}
		checkResponsesStreamRoundTrip(t, body, resp)
	})
}

// checkResponsesStreamRoundTrip re-emits body as events, assembles them, and checks that
// what the agent acts on is unchanged.
func checkResponsesStreamRoundTrip(t *testing.T, body []byte, resp *mapping.Response) {
	t.Helper()
	r := NewResponses()
	var sb strings.Builder
	if err := r.WriteStream(&sb, body); err != nil {
		t.Fatalf("WriteStream: %v", err)
	}
	a := r.NewAssembler()
	a.Write([]byte(sb.String()))
	again, err := a.Body()
	if err != nil {
		t.Fatalf("re-assemble: %v\n%s", err, sb.String())
	}
	back, err := r.DecodeResponse(again)
	if err != nil {
		t.Fatalf("re-assembled body does not decode: %v", err)
	}
	if x, y := agentView(resp.Items[0].Parts), agentView(back.Items[0].Parts); x != y {
		t.Fatalf("differs after the round trip:\n%s\n%s", x, y)
	}
}

func FuzzResponsesAssembler(f *testing.F) {
	var sb strings.Builder
	if err := NewResponses().WriteStream(&sb, []byte(respResponseFixture)); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(sb.String()), uint16(11))
	f.Add([]byte("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}}\n\n"+
		"data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{}\"}\n\n"+
		"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[]}}\n\n"), uint16(5))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"code\":\"c\",\"message\":\"m\"}\n\n"), uint16(0))
	r := NewResponses()
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		a := r.NewAssembler()
		k := int(cut) % (len(stream) + 1)
		a.Write(stream[:k])
		a.Write(stream[k:])
		body, err := a.Body()
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("assembled body is not JSON: %s", body)
		}
		resp, err := r.DecodeResponse(body)
		if err != nil {
			return
		}
		checkResponsesStreamRoundTrip(t, body, resp)
	})
}
