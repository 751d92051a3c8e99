package sdkcheck

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai"
)

func responsesFixture(t testing.TB, name string) []byte {
	t.Helper()
	return fixture(t, "../responses/"+name)
}

var hiResponses = responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}}

func TestResponsesDecodeRequestFromSDK(t *testing.T) {
	var got []byte
	client := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		serving(403, "application/json", openai.NewResponses().ErrorBody(403, "policy_denied", "", "stop"))(w, r)
	})
	out := responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String("call_1")}
	out.Output.OfString = oai.String(`{"temp":21}`)
	params := responses.ResponseNewParams{
		Model:        "gpt-5",
		Instructions: oai.String("Be terse."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "get_weather"),
			{OfFunctionCallOutput: &out},
			responses.ResponseInputItemParamOfMessage("thanks", responses.EasyInputMessageRoleUser),
		}},
	}
	_, err := client.Responses.New(context.Background(), params)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Type != "policy_denied" || apiErr.Message != "stop" {
		t.Fatalf("err = %v", err)
	}
	req, err := openai.NewResponses().DecodeRequest(got)
	if err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	checkSchema(t, req.Items)
	roles := []string{"system", "user", "assistant", "tool", "user"}
	if len(req.Items) != len(roles) {
		t.Fatalf("%d items from %s", len(req.Items), got)
	}
	for i, r := range roles {
		if req.Items[i].Role != r {
			t.Errorf("item %d role %q, want %q", i, req.Items[i].Role, r)
		}
	}
	if req.PromptStart != 4 || len(req.ToolResults) != 1 || !req.ToolResults[0].CallFound || req.ToolResults[0].ToolName != "get_weather" {
		t.Errorf("promptStart %d results %+v", req.PromptStart, req.ToolResults)
	}
	if out, err := openai.NewResponses().EncodeRequest(req, req.Items); err != nil || string(out) != string(got) {
		t.Errorf("EncodeRequest changed an unchanged body: %v", err)
	}
}

func TestResponsesSynthesizeWithSDK(t *testing.T) {
	r := openai.NewResponses()
	body, err := r.SynthesizeResponse(&mapping.Request{Model: "gpt-5"}, []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{
		ahp.TextPart("s.p0", "Supplied <answer>."),
		mapping.ToolCallPart("s.p1", mapping.ToolCall{ID: "call_s", Name: "lookup", Input: json.RawMessage(`{"q":"x"}`)}),
	}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, serving(200, "application/json", body))
	resp, err := client.Responses.New(context.Background(), hiResponses)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Supplied <answer>." || resp.Status != "completed" || resp.Model != "gpt-5" || len(resp.Output) != 2 {
		t.Fatalf("SDK saw %s", resp.RawJSON())
	}
	fc := resp.Output[1].AsFunctionCall()
	if fc.CallID != "call_s" || fc.Name != "lookup" || fc.Arguments != `{"q":"x"}` {
		t.Errorf("function call %+v", fc)
	}
}

func TestResponsesEncodeResponseWithSDK(t *testing.T) {
	r := openai.NewResponses()
	resp, err := r.DecodeResponse(responsesFixture(t, "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	items := []ahp.Message{resp.Items[0]}
	items[0].Parts = append([]ahp.Part(nil), items[0].Parts[:3]...) // deny call_b
	body, err := r.EncodeResponse(resp, items, "")
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, serving(200, "application/json", body))
	got, err := client.Responses.New(context.Background(), hiResponses)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, it := range got.Output {
		if it.Type == "function_call" {
			calls = append(calls, it.AsFunctionCall().CallID)
		}
	}
	if strings.Join(calls, ",") != "call_a" || got.OutputText() != "Checking." || got.Usage.InputTokens != 36 {
		t.Errorf("SDK saw calls %v text %q", calls, got.OutputText())
	}
}

func TestResponsesWriteStreamParsedBySDK(t *testing.T) {
	body := responsesFixture(t, "response.json")
	client := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if err := openai.NewResponses().WriteStream(w, body); err != nil {
			t.Error(err)
		}
	})
	s := client.Responses.NewStreaming(context.Background(), hiResponses)
	var text strings.Builder
	var args []string
	var completed *responses.Response
	types := map[string]int{}
	for s.Next() {
		ev := s.Current()
		types[ev.Type]++
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.function_call_arguments.done":
			args = append(args, ev.Arguments)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			completed = &r
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if completed == nil {
		t.Fatalf("no response.completed; events %v", types)
	}
	if text.String() != "Checking." || completed.OutputText() != "Checking." || completed.ID != "resp_1" || completed.Usage.OutputTokens != 87 {
		t.Errorf("text %q, completed %s", text.String(), completed.RawJSON())
	}
	if strings.Join(args, "|") != `{"city":"Paris"}|{"cmd":"rm -rf /"}` {
		t.Errorf("arguments %v", args)
	}
	if types["response.output_item.added"] != 5 || types["response.output_item.done"] != 5 || types["response.created"] != 1 {
		t.Errorf("events %v", types)
	}
}

func TestResponsesSchema(t *testing.T) {
	r := openai.NewResponses()
	req, err := r.DecodeRequest(responsesFixture(t, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, req.Items)
	resp, err := r.DecodeResponse(responsesFixture(t, "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, resp.Items)
}
