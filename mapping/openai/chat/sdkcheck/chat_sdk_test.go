package sdkcheck

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/chat"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/chat/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newClient returns an SDK client for a test server running handler on loopback.
func newClient(t *testing.T, handler http.HandlerFunc) oai.Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// serving answers every request with status and body.
func serving(status int, contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(body)
	}
}

var hi = oai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}

func TestDecodeRequestFromSDK(t *testing.T) {
	// What the official SDK actually sends decodes into the canonical view.
	var got []byte
	client := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		serving(403, "application/json", chat.NewChat().ErrorBody(403, "policy_denied", "", "stop"))(w, r)
	})
	params := oai.ChatCompletionNewParams{
		Model: "gpt-4o",
		User:  oai.String("u-1"),
		Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage("sys"),
			oai.DeveloperMessage("dev"),
			oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{
				oai.TextContentPart("look"),
				oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/jpeg;base64,/9j/4AAQ"}),
				oai.InputAudioContentPart(oai.ChatCompletionContentPartInputAudioInputAudioParam{Data: "SUQz", Format: "mp3"}),
				oai.FileContentPart(oai.ChatCompletionContentPartFileFileParam{FileData: oai.String("data:application/pdf;base64,JVBERg=="), Filename: oai.String("a.pdf")}),
			}),
			{OfAssistant: &oai.ChatCompletionAssistantMessageParam{
				Content: oai.ChatCompletionAssistantMessageParamContentUnion{OfString: oai.String("calling")},
				ToolCalls: []oai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: "call_1", Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			}},
			oai.ToolMessage(`{"temp":21}`, "call_1"),
			oai.UserMessage("thanks"),
		},
	}
	_, err := client.Chat.Completions.New(context.Background(), params)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v", err)
	}
	req, err := chat.NewChat().DecodeRequest(got)
	if err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	checkSchema(t, req.Items)
	roles := []string{"system", "developer", "user", "assistant", "tool", "user"}
	if len(req.Items) != len(roles) {
		t.Fatalf("%d items from %s", len(req.Items), got)
	}
	for i, r := range roles {
		if req.Items[i].Role != r {
			t.Errorf("item %d role %q, want %q", i, req.Items[i].Role, r)
		}
	}
	kinds := ""
	for _, p := range req.Items[2].Parts {
		kinds += p.Kind + ":" + p.MediaType + " "
	}
	if kinds != "text:text/plain attachment:image/jpeg attachment:audio/mpeg attachment:application/pdf " {
		t.Errorf("user parts %s", kinds)
	}
	if req.PromptStart != 5 || req.SessionHint != "u-1" || len(req.ToolResults) != 1 || !req.ToolResults[0].CallFound ||
		string(req.ToolResults[0].Input) != `{"city":"Paris"}` {
		t.Errorf("promptStart %d session %q results %+v", req.PromptStart, req.SessionHint, req.ToolResults)
	}
	// Unchanged, the SDK's body goes upstream as is.
	out, err := chat.NewChat().EncodeRequest(req, req.Items)
	if err != nil || string(out) != string(got) {
		t.Errorf("EncodeRequest changed an unchanged body: %v", err)
	}
}

func TestSynthesizeResponseWithSDK(t *testing.T) {
	c := chat.NewChat()
	req, err := c.DecodeRequest([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		items   []ahp.Message
		finish  string
		content string
		calls   int
		wantFin string
	}{
		{desc: "text answer", items: []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("s.p0", "Supplied <answer>.")}}},
			content: "Supplied <answer>.", wantFin: "stop"},
		{desc: "flow stop with reason", items: []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("s.p0", "Stopped by policy.")}}},
			finish: "stop", content: "Stopped by policy.", wantFin: "stop"},
		{desc: "supplied tool call", items: []ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{
			mapping.ToolCallPart("s.p0", mapping.ToolCall{ID: "call_s", Name: "lookup", Input: json.RawMessage(`{"q":"x"}`)})}}},
			calls: 1, wantFin: "tool_calls"},
		{desc: "empty", items: nil, content: "", wantFin: "stop"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := c.SynthesizeResponse(req, tc.items, tc.finish)
			if err != nil {
				t.Fatal(err)
			}
			root := gjson.ParseBytes(body)
			if !strings.HasPrefix(root.Get("id").Str, "chatcmpl-hookproxy-") || root.Get("usage").Exists() ||
				root.Get("model").Str != "gpt-4o" || root.Get("created").Int() == 0 {
				t.Errorf("body %s", body)
			}
			client := newClient(t, serving(200, "application/json", body))
			cc, err := client.Chat.Completions.New(context.Background(), hi)
			if err != nil {
				t.Fatal(err)
			}
			ch := cc.Choices[0]
			if ch.Message.Content != tc.content || len(ch.Message.ToolCalls) != tc.calls || ch.FinishReason != tc.wantFin {
				t.Errorf("SDK saw content %q calls %d finish %q", ch.Message.Content, len(ch.Message.ToolCalls), ch.FinishReason)
			}
			if tc.calls > 0 && (ch.Message.ToolCalls[0].ID != "call_s" || ch.Message.ToolCalls[0].Function.Arguments != `{"q":"x"}`) {
				t.Errorf("tool call %+v", ch.Message.ToolCalls[0])
			}
			// It decodes like an upstream answer, so the response-side hooks can run on it.
			if _, err := c.DecodeResponse(body); err != nil {
				t.Errorf("decode: %v", err)
			}
		})
	}
	t.Run("non-assistant", func(t *testing.T) {
		if _, err := c.SynthesizeResponse(req, []ahp.Message{{ID: "u", Role: "user"}}, ""); err == nil {
			t.Error("no error")
		}
	})
}

func TestEncodeResponseWithSDK(t *testing.T) {
	// A denied tool call is gone for the agent; the other one is intact.
	c := chat.NewChat()
	resp, err := c.DecodeResponse(fixture(t, "tool_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	items := []ahp.Message{resp.Items[0]}
	items[0].Parts = append([]ahp.Part(nil), items[0].Parts[:3]...) // drop call_b
	body, err := c.EncodeResponse(resp, items, "tool_calls")
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, serving(200, "application/json", body))
	cc, err := client.Chat.Completions.New(context.Background(), hi)
	if err != nil {
		t.Fatal(err)
	}
	m := cc.Choices[0].Message
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_a" || m.Content != "Let me check both." || cc.Usage.PromptTokens != 82 {
		t.Errorf("SDK saw %+v", m)
	}
}

func TestErrorBodyWithSDK(t *testing.T) {
	c := chat.NewChat()
	tests := []struct {
		desc, errType, code, message string
	}{
		{desc: "policy denial", errType: "policy_denied", code: "hookproxy.denied", message: "Blocked: <secret> found"},
		{desc: "fail closed", errType: "policy_denied", code: "hookproxy.fail_closed", message: "Required policy backend unavailable."},
		{desc: "no code", errType: "invalid_request_error", message: "bad body"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body := c.ErrorBody(403, tc.errType, tc.code, tc.message)
			e := gjson.GetBytes(body, "error")
			if e.Get("param").Type != gjson.Null || (tc.code == "") != (e.Get("code").Type == gjson.Null) {
				t.Errorf("body %s", body)
			}
			client := newClient(t, serving(403, "application/json", body))
			_, err := client.Chat.Completions.New(context.Background(), hi)
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *openai.Error", err)
			}
			if apiErr.StatusCode != 403 || apiErr.Type != tc.errType || apiErr.Code != tc.code || apiErr.Message != tc.message {
				t.Errorf("SDK error: status %d type %q code %q message %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
			}
		})
	}
}

func TestWriteStreamParsedBySDK(t *testing.T) {
	long, _ := json.Marshal(strings.Repeat("héllo wörld ", 1000))
	synth, err := chat.NewChat().SynthesizeResponse(&mapping.Request{Model: "gpt-4o"},
		[]ahp.Message{{ID: "s", Role: "assistant", Parts: []ahp.Part{ahp.TextPart("s.p0", "Supplied.")}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		body []byte
	}{
		{desc: "text, reasoning, two tool calls, usage", body: fixture(t, "tool_response.json")},
		{desc: "long content", body: []byte(`{"id":"c2","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + string(long) + `,"refusal":null},"logprobs":null,"finish_reason":"length"}]}`)},
		{desc: "refusal", body: []byte(`{"id":"c3","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"No."},"logprobs":null,"finish_reason":"stop"}]}`)},
		{desc: "synthesized answer", body: synth},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			client := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if err := chat.NewChat().WriteStream(w, tc.body); err != nil {
					t.Error(err)
				}
			})
			s := client.Chat.Completions.NewStreaming(context.Background(), hi)
			var acc oai.ChatCompletionAccumulator
			chunks := 0
			for s.Next() {
				if !acc.AddChunk(s.Current()) {
					t.Fatalf("accumulator rejected chunk %d", chunks)
				}
				chunks++
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			var want oai.ChatCompletion
			if err := want.UnmarshalJSON(tc.body); err != nil {
				t.Fatal(err)
			}
			got := acc.ChatCompletion
			if got.ID != want.ID || got.Model != want.Model || got.Created != want.Created || len(got.Choices) != len(want.Choices) {
				t.Fatalf("identity: got %s/%s/%d/%d", got.ID, got.Model, got.Created, len(got.Choices))
			}
			gm, wm := got.Choices[0].Message, want.Choices[0].Message
			if gm.Content != wm.Content || gm.Refusal != wm.Refusal || got.Choices[0].FinishReason != want.Choices[0].FinishReason {
				t.Errorf("message: content %d bytes (want %d), refusal %q, finish %q", len(gm.Content), len(wm.Content), gm.Refusal, got.Choices[0].FinishReason)
			}
			if len(gm.ToolCalls) != len(wm.ToolCalls) {
				t.Fatalf("%d tool calls, want %d", len(gm.ToolCalls), len(wm.ToolCalls))
			}
			for i := range gm.ToolCalls {
				g, w := gm.ToolCalls[i], wm.ToolCalls[i]
				if g.ID != w.ID || g.Function.Name != w.Function.Name || g.Function.Arguments != w.Function.Arguments {
					t.Errorf("tool call %d: %s %s %s", i, g.ID, g.Function.Name, g.Function.Arguments)
				}
			}
			if got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.CompletionTokens != want.Usage.CompletionTokens ||
				got.Usage.PromptTokensDetails.CachedTokens != want.Usage.PromptTokensDetails.CachedTokens {
				t.Errorf("usage %+v", got.Usage)
			}
		})
	}
}
