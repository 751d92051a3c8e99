package gemini_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/gemini"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		desc, path, alt string
		want            gemini.Endpoint
		ok              bool
	}{
		{"generate v1beta", "/v1beta/models/gemini-2.5-flash:generateContent", "", gemini.Endpoint{"v1beta", "gemini-2.5-flash", gemini.MethodGenerate, false}, true},
		{"stream sse v1", "/v1/models/gemini-2.5-pro:streamGenerateContent", "sse", gemini.Endpoint{"v1", "gemini-2.5-pro", gemini.MethodStreamGenerate, true}, true},
		{"stream array", "/v1beta/models/m:streamGenerateContent", "", gemini.Endpoint{"v1beta", "m", gemini.MethodStreamGenerate, false}, true},
		{"count tokens", "/v1beta/models/m:countTokens", "", gemini.Endpoint{"v1beta", "m", gemini.MethodCountTokens, false}, true},
		{"tuned model", "/v1beta/tunedModels/t1:generateContent", "", gemini.Endpoint{"v1beta", "tunedModels/t1", gemini.MethodGenerate, false}, true},
		{"method case", "/v1beta/models/m:GENERATECONTENT", "", gemini.Endpoint{"v1beta", "m", gemini.MethodGenerate, false}, true},
		{"vertex", "/v1beta1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent", "sse", gemini.Endpoint{"v1beta1", "gemini-2.5-pro", gemini.MethodStreamGenerate, true}, true},
		{"vertex express", "/v1/publishers/google/models/gemini-2.5-flash:generateContent", "", gemini.Endpoint{"v1", "gemini-2.5-flash", gemini.MethodGenerate, false}, true},
		{"vertex other resource", "/v1/projects/p1/locations/l/endpoints/e1:generateContent", "", gemini.Endpoint{}, false},
		{"empty segment", "/v1/projects//locations/l/publishers/google/models/m:generateContent", "", gemini.Endpoint{}, false},
		{"models list", "/v1beta/models", "", gemini.Endpoint{}, false},
		{"model get", "/v1beta/models/m", "", gemini.Endpoint{}, false},
		{"embed", "/v1beta/models/m:embedContent", "", gemini.Endpoint{}, false},
		{"other version", "/v2/models/m:generateContent", "", gemini.Endpoint{}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := gemini.ParseEndpoint(tc.path, tc.alt)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("ParseEndpoint(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDecodeRequest(t *testing.T) {
	req := decode(t, conversation)
	if req.Model != "gemini-2.5-flash" || req.Stream {
		t.Fatalf("model %q stream %v", req.Model, req.Stream)
	}
	var roles []string
	for _, m := range req.Items {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,user" {
		t.Fatalf("roles = %s", got)
	}
	if req.PromptStart != 5 {
		t.Fatalf("PromptStart = %d", req.PromptStart)
	}
	img := req.Items[1].Parts[1]
	if img.Kind != ahp.KindAttachment || img.MediaType != "image/png" || img.Selection != ahp.SelectionMetadata || img.Size == nil || *img.Size != 5 || len(img.SHA256) != 64 {
		t.Fatalf("image part = %+v", img)
	}
	if p := req.Items[2].Parts[0]; p.Category != ahp.CategoryReasoning || p.TextOf() != "plan: ls" {
		t.Fatalf("thought part = %+v", p)
	}
	calls := mapping.ToolCalls(req.Items)
	if len(calls) != 2 || calls[0].Name != "run" || string(calls[0].Input) != `{"cmd":"ls"}` || calls[0].ID == calls[1].ID {
		t.Fatalf("calls = %+v", calls)
	}
	if len(req.ToolResults) != 2 {
		t.Fatalf("tool results = %+v", req.ToolResults)
	}
	for i, r := range req.ToolResults {
		if !r.CallFound || r.CallID != calls[i].ID || r.ToolName != calls[i].Name || string(r.Input) != string(calls[i].Input) {
			t.Fatalf("result %d = %+v, call %+v", i, r, calls[i])
		}
	}
	if got := req.Items[4].Parts[0].TextOf(); got != `{"output":"secret sk-live-1234"}` {
		t.Fatalf("tool result text = %s", got)
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(req.Params, &params); err != nil || params["tools"] == nil || params["generationConfig"] == nil || params["contents"] != nil {
		t.Fatalf("params = %s", req.Params)
	}
	// The ids are stable: the same history decodes to the same ids when it grows.
	longer := strings.Replace(conversation, `"x_part":1}]}]`, `"x_part":1}]},{"role":"model","parts":[{"text":"done"}]}]`, 1)
	again := decode(t, longer)
	for i := range req.Items {
		if again.Items[i].ID != req.Items[i].ID {
			t.Fatalf("item %d id changed: %s -> %s", i, req.Items[i].ID, again.Items[i].ID)
		}
	}
}

func TestDecodeRequestBad(t *testing.T) {
	for _, body := range []string{`[]`, `{"contents":{}}`, `{"contents":[1]}`, `{"contents":[{"parts":[{"text":1}]}]}`, `{"contents":[],"contents":[]}`, `{`} {
		_, err := tr.DecodeRequest([]byte(body))
		var bad *mapping.BadRequest
		if !errors.As(err, &bad) {
			t.Fatalf("%s: err = %v, want a BadRequest", body, err)
		}
	}
	// What the provider would judge is passed on: no contents, unknown parts and roles.
	for _, body := range []string{`{}`, `{"contents":[{"role":"function","parts":[{"executableCode":{"code":"1"}}]}]}`} {
		if _, err := tr.DecodeRequest([]byte(body)); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
}

func TestEncodeRequest(t *testing.T) {
	req := decode(t, conversation)
	out, err := tr.EncodeRequest(req, req.Items)
	if err != nil || !bytes.Equal(out, req.Original) {
		t.Fatalf("unchanged encode differs: %v\n%s", err, out)
	}

	// Redact the second tool result and the prompt; inject a message: only those change.
	items := clone(req.Items)
	items[4].Parts[0].Text = ptr(`{"output":"secret [REDACTED]"}`)
	items[5].Parts[0].Text = ptr("now summarize briefly")
	items = append(items, ahp.Message{ID: "inj", Role: ahp.RoleUser, Parts: []ahp.Part{ahp.TextPart("inj.0", "context")}})
	out, err = tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	root := gjson.ParseBytes(out)
	if n := len(root.Get("contents").Array()); n != 3 {
		t.Fatalf("contents = %d, want the 3 of the original: %s", n, out)
	}
	last := root.Get("contents.2.parts")
	if got := last.Get("1.functionResponse.response.output").String(); got != "secret [REDACTED]" {
		t.Fatalf("rewritten response = %q", got)
	}
	if got := last.Get("2.text").String(); got != "now summarize briefly" || !last.Get("2.x_part").Exists() {
		t.Fatalf("prompt part = %s", last.Get("2").Raw)
	}
	if got := last.Get("3.text").String(); got != "context" {
		t.Fatalf("injected part = %s", last.Raw)
	}
	if root.Get("contents.1").Raw != gjson.Get(conversation, "contents.1").Raw {
		t.Fatal("the unchanged model content was not copied byte for byte (its thoughtSignature must survive)")
	}
	if root.Get("tools").Raw != gjson.Get(conversation, "tools").Raw || root.Get("systemInstruction").Raw != gjson.Get(conversation, "systemInstruction").Raw {
		t.Fatalf("params changed: %s", out)
	}
	again, err := tr.DecodeRequest(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.ToolResults) != 2 || !again.ToolResults[1].CallFound {
		t.Fatalf("the rewritten result lost its call: %+v", again.ToolResults)
	}

	// A non-JSON tool output is carried under "output"; a changed system prompt is rendered.
	items = clone(req.Items)
	items[3].Parts[0].Text = ptr("plain text")
	items[0].Parts[0].Text = ptr("Be careful.")
	out, err = tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "contents.2.parts.0.functionResponse.response").Raw; got != `{"output":"plain text"}` {
		t.Fatalf("response = %s", got)
	}
	if got := gjson.GetBytes(out, "systemInstruction.parts.0.text").String(); got != "Be careful." {
		t.Fatalf("system = %s", out)
	}
}

func TestCountTokensNested(t *testing.T) {
	body := `{"generateContentRequest":{"model":"models/m","contents":[{"role":"user","parts":[{"text":"my key is sk-1"}]}]}}`
	req, err := countsTr.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Items) != 1 || req.Items[0].Parts[0].TextOf() != "my key is sk-1" {
		t.Fatalf("items = %+v", req.Items)
	}
	items := clone(req.Items)
	items[0].Parts[0].Text = ptr("my key is [REDACTED]")
	out, err := countsTr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "generateContentRequest.contents.0.parts.0.text").String(); got != "my key is [REDACTED]" || gjson.GetBytes(out, "generateContentRequest.model").String() != "models/m" {
		t.Fatalf("encoded = %s", out)
	}
	// params name their place in the body
	if got := gjson.GetBytes(req.Params, "generateContentRequest.model").String(); got != "models/m" || gjson.GetBytes(req.Params, "generateContentRequest.contents").Exists() {
		t.Fatalf("params = %s", req.Params)
	}
}

const answer = `{"candidates":[{"content":{"parts":[{"text":"think","thought":true},{"text":"Running two."},` +
	`{"functionCall":{"name":"run","args":{"cmd":"rm -rf /"}},"thoughtSignature":"S1"},{"functionCall":{"id":"c2","name":"read","args":{"path":"a"}}}],"role":"model"},` +
	`"finishReason":"STOP","index":0,"safetyRatings":[]}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":2},"modelVersion":"gemini-2.5-flash","responseId":"resp-1"}`

func TestResponse(t *testing.T) {
	resp, err := tr.DecodeResponse([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != "resp-1" || resp.Model != "gemini-2.5-flash" || resp.FinishReason != "STOP" {
		t.Fatalf("resp = %+v", resp)
	}
	if resp.Usage == nil || *resp.Usage.InputTokens != 10 || *resp.Usage.OutputTokens != 7 {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	calls := mapping.ToolCalls(resp.Items)
	if len(calls) != 2 || calls[1].ID != "c2" || !strings.HasPrefix(calls[0].ID, "gcall_") {
		t.Fatalf("calls = %+v", calls)
	}
	out, err := tr.EncodeResponse(resp, resp.Items, "")
	if err != nil || !bytes.Equal(out, []byte(answer)) {
		t.Fatalf("unchanged encode differs: %v", err)
	}
	// Remove the first call with a note; rewrite the second's arguments.
	items := clone(resp.Items)
	c1 := calls[1]
	items[c1.Item].Parts[c1.Part] = mapping.ToolCallPart(items[c1.Item].Parts[c1.Part].ID, mapping.ToolCall{ID: c1.ID, Name: c1.Name, Input: json.RawMessage(`{"path":"b"}`)})
	items = mapping.RemoveCalls(items, calls, map[int]bool{0: true}, "Tool call run was blocked by policy: no", "note")
	out, err = tr.EncodeResponse(resp, items, "")
	if err != nil {
		t.Fatal(err)
	}
	parts := gjson.GetBytes(out, "candidates.0.content.parts").Array()
	if len(parts) != 4 || parts[2].Get("functionCall.id").String() != "c2" || parts[2].Get("functionCall.args.path").String() != "b" ||
		parts[3].Get("text").String() != "Tool call run was blocked by policy: no" {
		t.Fatalf("encoded = %s", out)
	}
	if strings.Contains(string(out), "rm -rf") || !gjson.GetBytes(out, "candidates.0.safetyRatings").Exists() || !gjson.GetBytes(out, "usageMetadata").Exists() {
		t.Fatalf("encoded = %s", out)
	}
	// An error body is an upstream error.
	_, err = tr.DecodeResponse([]byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`))
	var ue *mapping.UpstreamError
	if !errors.As(err, &ue) || ue.Status != 429 || ue.Type != "RESOURCE_EXHAUSTED" {
		t.Fatalf("err = %v", err)
	}
}

func TestArrayStream(t *testing.T) {
	body := []byte("[" + strings.Join(streamChunks, ",\r\n") + "]")
	resp, err := arrayTr.DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "STOP" || len(mapping.ToolCalls(resp.Items)) != 3 {
		t.Fatalf("resp = %+v", resp.Items)
	}
	if got := resp.Items[0].Parts[1].TextOf(); got != "Let me check." {
		t.Fatalf("joined text = %q", got)
	}
	out, err := arrayTr.EncodeResponse(resp, resp.Items, "")
	if err != nil || !bytes.Equal(out, body) {
		t.Fatalf("unchanged: %v", err)
	}
	calls := mapping.ToolCalls(resp.Items)
	items := mapping.RemoveCalls(clone(resp.Items), calls, map[int]bool{0: true}, "blocked", "n")
	out, err = arrayTr.EncodeResponse(resp, items, "")
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.ValidBytes(out) || !gjson.ParseBytes(out).IsArray() || strings.Contains(string(out), "rm -rf") {
		t.Fatalf("edited array = %s", out)
	}
	// A synthesized answer on the array endpoint is an array too.
	syn, err := arrayTr.SynthesizeResponse(nil, []ahp.Message{{ID: "m", Role: ahp.RoleAssistant, Parts: []ahp.Part{ahp.TextPart("m.0", "hi")}}}, "")
	if err != nil || !gjson.ParseBytes(syn).IsArray() || gjson.GetBytes(syn, "0.candidates.0.content.parts.0.text").String() != "hi" {
		t.Fatalf("synthesized = %s, %v", syn, err)
	}
}

func TestAssembler(t *testing.T) {
	stream := sse(streamChunks...)
	for _, chunk := range []int{1, 7, len(stream)} {
		asm := sseTr.NewAssembler()
		for s := stream; len(s) > 0; {
			n := min(chunk, len(s))
			_, _ = asm.Write(s[:n])
			s = s[n:]
		}
		body, err := asm.Body()
		if err != nil {
			t.Fatal(err)
		}
		got := view(t, body)
		for _, want := range []string{"finish=STOP", `reasoning "thinking..."`, `"Let me check."`, "run {\"cmd\":\"rm -rf /\"}", "list {}"} {
			if !strings.Contains(got, want) {
				t.Fatalf("chunk %d: view lacks %q:\n%s", chunk, want, got)
			}
		}
		if gjson.GetBytes(body, "usageMetadata.totalTokenCount").Int() != 18 || gjson.GetBytes(body, "candidates.0.content.parts.2.thoughtSignature").String() != "S1" {
			t.Fatalf("assembled = %s", body)
		}
	}
	// An error event is the upstream's error.
	asm := sseTr.NewAssembler()
	_, _ = asm.Write(sse(streamChunks[0], `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`))
	_, err := asm.Body()
	var ue *mapping.UpstreamError
	if !errors.As(err, &ue) || ue.Status != 503 {
		t.Fatalf("err = %v", err)
	}
	// WriteStream re-emits a response the assembler reads back.
	var w bytes.Buffer
	if err := sseTr.WriteStream(&w, []byte(answer)); err != nil {
		t.Fatal(err)
	}
	back, err := mappingtest.Assembled(sseTr, w.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, back, []byte(answer))
}

func TestErrorBody(t *testing.T) {
	b := tr.ErrorBody(403, "policy_denied", "hookproxy.denied", `no "secrets" <here>`)
	root := gjson.ParseBytes(b)
	if !root.IsObject() || root.Get("error.code").Int() != 403 || root.Get("error.status").String() != "PERMISSION_DENIED" ||
		root.Get("error.message").String() != `no "secrets" <here>` || root.Get("error.details.0.reason").String() != "hookproxy.denied" {
		t.Fatalf("error body = %s", b)
	}
	if !strings.Contains(string(b), "<here>") {
		t.Fatal("message was HTML-escaped")
	}
}

// TestSnakeCaseFields: protobuf JSON accepts the snake_case names the REST docs use; they
// are read like the camelCase ones and patched under the spelling the client used.
func TestSnakeCaseFields(t *testing.T) {
	body := `{"system_instruction":{"parts":[{"text":"sys"}]},"contents":[` +
		`{"role":"user","parts":[{"inline_data":{"mime_type":"image/png","data":"aGVsbG8="}},{"text":"hi"}]},` +
		`{"role":"model","parts":[{"function_call":{"name":"run","args":{"a":1}}}]},` +
		`{"role":"user","parts":[{"function_response":{"name":"run","response":{"output":"key sk-1"}}}]}]}`
	req := decode(t, body)
	if req.Items[0].Role != ahp.RoleSystem || req.Items[0].Parts[0].TextOf() != "sys" {
		t.Fatalf("system = %+v", req.Items[0])
	}
	if p := req.Items[1].Parts[0]; p.Kind != ahp.KindAttachment || p.MediaType != "image/png" {
		t.Fatalf("inline_data = %+v", p)
	}
	if len(req.ToolResults) != 1 || !req.ToolResults[0].CallFound || req.ToolResults[0].ToolName != "run" {
		t.Fatalf("tool results = %+v", req.ToolResults)
	}
	items := clone(req.Items)
	items[0].Parts[0].Text = ptr("sys!")
	items[3].Parts[0].Text = ptr(`{"output":"key [REDACTED]"}`)
	out, err := tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	root := gjson.ParseBytes(out)
	if root.Get("systemInstruction").Exists() || root.Get("system_instruction.parts.0.text").String() != "sys!" {
		t.Fatalf("system rendered as %s", out)
	}
	if got := root.Get("contents.2.parts.0.function_response.response.output").String(); got != "key [REDACTED]" || root.Get("contents.2.parts.0.functionResponse").Exists() {
		t.Fatalf("function_response rendered as %s", out)
	}
	for _, b := range []string{
		`{"systemInstruction":{},"system_instruction":{}}`,
		`{"contents":[{"parts":[{"functionResponse":{"name":"a"},"function_response":{"name":"b"}}]}]}`,
	} {
		var bad *mapping.BadRequest
		if _, err := tr.DecodeRequest([]byte(b)); !errors.As(err, &bad) {
			t.Fatalf("%s: err = %v, want a BadRequest (ambiguous)", b, err)
		}
	}
	// A cached content is context the request does not carry: a gap, so no whole-list
	// replace is advertised.
	cached := decode(t, `{"cachedContent":"cachedContents/abc","contents":[{"parts":[{"text":"x"}]}]}`)
	if len(cached.Gaps) != 1 || cached.Gaps[0].Path != "items" {
		t.Fatalf("gaps = %+v", cached.Gaps)
	}
}

// TestInlineTextualData: inline data of a textual type other than text/* (JSON, XML,
// YAML) is a text part re-encoded in base64 on edit, keeping its type; binary data stays
// an attachment; a file referenced by URI is carried in the params' contents residue.
func TestInlineTextualData(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	body := `{"contents":[{"role":"user","parts":[` +
		`{"inlineData":{"mimeType":"application/json","data":"` + b64(`{"k":"v"}`) + `"}},` +
		`{"inlineData":{"mimeType":"application/xml","data":"` + b64(`<a>v</a>`) + `"}},` +
		`{"inlineData":{"mimeType":"image/png","data":"aGVsbG8="}},` +
		`{"fileData":{"mimeType":"application/pdf","fileUri":"https://files.example/r.pdf?sig=abc"}}]}]}`
	req := decode(t, body)
	ps := req.Items[0].Parts
	if ps[0].Kind != ahp.KindText || ps[0].TextOf() != `{"k":"v"}` || ps[1].TextOf() != `<a>v</a>` || ps[2].Kind != ahp.KindAttachment {
		t.Fatalf("parts = %+v", ps)
	}
	if got := gjson.GetBytes(req.Params, "contents").Raw; got != `[{"parts":[{},{},{},{"fileData":{"fileUri":"https://files.example/r.pdf?sig=abc"}}]}]` {
		t.Fatalf("contents residue = %s", got)
	}
	items := clone(req.Items)
	items[0].Parts[0].Text = ptr(`{"k":"[REDACTED]"}`)
	out, err := tr.EncodeRequest(req, items)
	if err != nil {
		t.Fatal(err)
	}
	in := gjson.GetBytes(out, "contents.0.parts.0.inlineData")
	if in.Get("mimeType").String() != "application/json" || in.Get("data").String() != b64(`{"k":"[REDACTED]"}`) {
		t.Fatalf("rendered %s", in.Raw)
	}
}
