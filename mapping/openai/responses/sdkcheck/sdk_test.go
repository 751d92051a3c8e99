package sdkcheck

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	translator "github.com/hookproxy/hookproxy/mapping/openai/responses"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newClient returns an SDK client for a loopback server running handler.
func newClient(t *testing.T, handler http.HandlerFunc) oai.Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// serving answers every request with status and body.
func serving(status int, contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(body)
	}
}

// validItems checks canonical messages against the protocol's content rules.
func validItems(t *testing.T, items []ahp.Message) {
	t.Helper()
	b, err := ahpJSON(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := ahp.ValidateContentMessages(b, ""); err != nil {
		t.Errorf("canonical items are not valid AHP content: %v\n%s", err, b)
	}
}

func TestDecodeRequestFromSDK(t *testing.T) {
	// What the official SDK actually sends decodes into the canonical view, and goes out
	// unchanged when nothing was edited.
	var got []byte
	client := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		serving(200, "application/json", fixture(t, "responses/tool_response.json"))(w, r)
	})
	params := responses.ResponseNewParams{
		Model:        "gpt-5",
		Instructions: oai.String("Be careful."),
		User:         oai.String("u-1"),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Prefer metric units.", responses.EasyInputMessageRoleDeveloper),
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				{OfInputText: &responses.ResponseInputTextParam{Text: "Look at this."}},
				{OfInputImage: &responses.ResponseInputImageParam{ImageURL: oai.String("data:image/png;base64,iVBORw0KGgo="), Detail: responses.ResponseInputImageDetailAuto}},
			}, responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfReasoning("rs_1", []responses.ResponseReasoningItemSummaryParam{{Text: "Need weather."}}),
			responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{
				{OfOutputText: &responses.ResponseOutputTextParam{Text: "Checking."}},
			}, "msg_1", responses.ResponseOutputMessageStatusCompleted),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_a", "get_weather"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String("call_a"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(`{"temp":21}`)}}},
			responses.ResponseInputItemParamOfMessage("Thanks!", responses.EasyInputMessageRoleUser),
		}},
	}
	if _, err := client.Responses.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	tr := translator.New()
	req, err := tr.DecodeRequest(got)
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", got, err)
	}
	validItems(t, req.Items)
	var shape []string
	for _, m := range req.Items {
		shape = append(shape, m.Role+":"+m.ID)
	}
	if want := "system developer user assistant:rs_1 tool:call_a user"; !sameRoles(shape, want) || req.Items[3].ID != "rs_1" {
		t.Errorf("messages %q, want roles %q", shape, want)
	}
	if len(req.Items[3].Parts) != 3 || len(mapping.ToolCalls(req.Items)) != 1 || req.ToolResults[0].ToolName != "get_weather" ||
		req.PromptStart != 5 || req.SessionHint != "u-1" || req.Items[0].Parts[0].TextOf() != "Be careful." {
		t.Errorf("request %+v", req)
	}
	out, err := tr.EncodeRequest(req, req.Items)
	if err != nil || !bytes.Equal(out, got) {
		t.Errorf("unchanged request must go out byte-identical: %v", err)
	}
}

// sameRoles compares "role:id" entries with a space-separated role list.
func sameRoles(shape []string, roles string) bool {
	want := strings.Fields(roles)
	if len(shape) != len(want) {
		return false
	}
	for i, s := range shape {
		if r, _, _ := strings.Cut(s, ":"); r != strings.SplitN(want[i], ":", 2)[0] {
			return false
		}
	}
	return true
}

// denied is tool_response with call_b removed the way the proxy removes a denied call.
func denied(t *testing.T) []byte {
	t.Helper()
	tr := translator.New()
	resp, err := tr.DecodeResponse(fixture(t, "responses/tool_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	items := append([]ahp.Message(nil), resp.Items...)
	var parts []ahp.Part
	for _, p := range items[0].Parts {
		if c, ok := mapping.ParseToolCall(&p); ok && c.Name == "run" {
			continue
		}
		parts = append(parts, p)
	}
	parts = append(parts, ahp.TextPart(items[0].ID+".hookproxy.9", "Tool call run was blocked by policy: no"))
	items[0].Parts = parts
	body, err := tr.EncodeResponse(resp, items, "")
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestEncodedResponseParsedBySDK(t *testing.T) {
	client := newClient(t, serving(200, "application/json", denied(t)))
	res, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-5"})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, it := range res.Output {
		if it.Type == "function_call" {
			calls = append(calls, it.Name)
		}
	}
	if len(calls) != 1 || calls[0] != "get_weather" || res.ID != "resp_abc123" || res.Usage.InputTokens != 82 ||
		res.OutputText() != "Let me check both.Tool call run was blocked by policy: no" {
		t.Errorf("calls %q, output text %q", calls, res.OutputText())
	}
}

// streamEvents runs a streaming call against a server answering body as SSE, and returns
// the event types, the text deltas joined and the completed response.
func streamEvents(t *testing.T, sse []byte) (types []string, text string, done *responses.Response) {
	t.Helper()
	client := newClient(t, serving(200, "text/event-stream", sse))
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-5"})
	defer stream.Close()
	var b strings.Builder
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			b.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			r := ev.Response
			done = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return types, b.String(), done
}

func TestWriteStreamParsedBySDK(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		body  []byte
		calls int
		text  string
	}{
		{"upstream response", fixture(t, "responses/tool_response.json"), 2, "Let me check both."},
		{"denied call removed", denied(t), 1, "Let me check both.Tool call run was blocked by policy: no"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var buf bytes.Buffer
			if err := translator.New().WriteStream(&buf, tc.body); err != nil {
				t.Fatal(err)
			}
			types, text, done := streamEvents(t, buf.Bytes())
			if done == nil || done.ID != "resp_abc123" || done.Status != "completed" || text != tc.text || done.OutputText() != tc.text {
				t.Fatalf("types %q text %q done %+v", types, text, done)
			}
			calls := 0
			for _, it := range done.Output {
				if it.Type == "function_call" {
					calls++
					if it.Name == "run" && tc.calls == 1 {
						t.Errorf("the denied call reached the client")
					}
				}
			}
			if calls != tc.calls || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
				t.Errorf("%d calls, events %q", calls, types)
			}
		})
	}
}

func TestSynthesizeResponseWithSDK(t *testing.T) {
	tr := translator.New()
	req, err := tr.DecodeRequest([]byte(`{"model":"gpt-5","instructions":"sys","input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	items := []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("s.0", "Supplied by policy.")}}}
	body, err := tr.SynthesizeResponse(req, items, "")
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, serving(200, "application/json", body))
	res, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-5"})
	if err != nil || res.OutputText() != "Supplied by policy." || res.Status != "completed" || res.Instructions.OfString != "sys" {
		t.Errorf("res %+v err %v", res, err)
	}
	var buf bytes.Buffer
	if err := tr.WriteStream(&buf, body); err != nil {
		t.Fatal(err)
	}
	_, text, done := streamEvents(t, buf.Bytes())
	if text != "Supplied by policy." || done == nil || done.OutputText() != text {
		t.Errorf("streamed text %q", text)
	}
}

func TestErrorBodyWithSDK(t *testing.T) {
	body := translator.New().ErrorBody(403, "policy_denied", "com.example.deny", "prompts must not carry credentials")
	client := newClient(t, serving(403, "application/json", body))
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-5"})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Type != "policy_denied" ||
		apiErr.Code != "com.example.deny" || apiErr.Message != "prompts must not carry credentials" {
		t.Errorf("err = %v", err)
	}
	if gjson.GetBytes(body, "error.param").Type != gjson.Null {
		t.Errorf("param must be null: %s", body)
	}
}
