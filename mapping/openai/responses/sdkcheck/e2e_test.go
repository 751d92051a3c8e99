package sdkcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/ahptest"
	translator "github.com/hookproxy/hookproxy/mapping/openai/responses"
	"github.com/hookproxy/hookproxy/proxy"
)

// End to end: the official SDK's Responses calls, changed only in their base URL, go through
// the real proxy (proxy.New on loopback) to a loopback upstream that records every byte, with
// an AHP backend on loopback HTTP answering hooks/intercept with scripted effects.

// The made-up credential of the scenarios (AWS access key id shape; not a real key).
const (
	secret    = "AKIAE2EFAKESECRET042"
	redacted  = "[REDACTED]"
	apiKey    = "sk-e2e-responses-key-0000"
	denyCode  = "com.example.e2e.credentials"
	denyWhy   = "prompts must not carry cloud credentials"
	toolWhy   = "destructive shell commands are not allowed"
	instructs = "You are a careful assistant."
)

// upstream is a loopback Responses API: it records each request body and answers with a
// JSON body, or with SSE when the request asks to stream.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	written []byte
	json    []byte
	sse     []byte
}

func newUpstream(t *testing.T, jsonBody, sse []byte) *upstream {
	t.Helper()
	u := &upstream{json: jsonBody, sse: sse}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		defer u.mu.Unlock()
		if r.URL.Path != "/v1/responses" {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		u.bodies = append(u.bodies, body)
		out, ct := u.json, "application/json"
		if gjson.GetBytes(body, "stream").Bool() {
			out, ct = u.sse, "text/event-stream"
		}
		u.written = out
		w.Header().Set("Content-Type", ct)
		w.Write(out)
	}))
	t.Cleanup(u.Close)
	return u
}

// only returns the single request the upstream received.
func (u *upstream) only(t *testing.T) []byte {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) != 1 {
		t.Fatalf("the upstream received %d requests, want 1", len(u.bodies))
	}
	return u.bodies[0]
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

// effect is one effect of an intercept reply, written as plain JSON: the backend speaks the
// protocol on its own rather than borrowing the product's types.
type effect map[string]any

// backend is a loopback AHP backend over the HTTP binding.
type backend struct {
	*httptest.Server
	mu     sync.Mutex
	frames [][]byte
}

func newBackend(t *testing.T, script func(ev gjson.Result) []effect) *backend {
	t.Helper()
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		frame, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.frames = append(b.frames, frame)
		b.mu.Unlock()
		req := gjson.ParseBytes(frame)
		if !req.Get("id").Exists() {
			w.WriteHeader(http.StatusNoContent) // hooks/observe: never answered
			return
		}
		effects := script(req.Get("params.event"))
		if effects == nil {
			effects = []effect{}
		}
		reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(req.Get("id").Raw),
			"result": map[string]any{"protocolVersion": "draft", "effects": effects}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
	}))
	t.Cleanup(b.Close)
	return b
}

// intercepts returns the events of the hooks/intercept frames received, after checking every
// frame against the protocol's schemas and for the client's credential.
func (b *backend) intercepts(t *testing.T) []gjson.Result {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []gjson.Result
	for i, f := range b.frames {
		if bytes.Contains(f, []byte(apiKey)) {
			t.Errorf("frame %d carries the client credential", i)
		}
		schema := "observe-notification.schema.json"
		if gjson.GetBytes(f, "method").String() == "hooks/intercept" {
			schema = "intercept-request.schema.json"
			out = append(out, gjson.GetBytes(f, "params"))
		}
		if err := ahptest.Validate(t, schema, f); err != nil {
			t.Errorf("frame %d is not valid AHP: %v\n%s", i, err, f)
		}
	}
	return out
}

// allEvents are the interceptable boundary events of a model route.
var allEvents = []string{"tool.after", "turn.start", "model.request.before", "model.response.after", "tool.before", "turn.finish.before"}

// startProxy runs the real proxy with one openai route to up and b registered for events.
func startProxy(t *testing.T, up *upstream, b *backend, events ...string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nsource: urn:hookproxy:e2e-responses\nroutes:\n"+
		"  - prefix: /openai\n    api: openai\n    upstream: %s\n", up.URL)), "")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	doc, err := json.Marshal(map[string]any{"protocolVersion": "draft", "hooks": []any{map[string]any{
		"id": "com.example.e2e.responses", "transport": map[string]any{"type": "http", "url": b.URL + "/ahp"},
		"subscriptions": []any{map[string]any{"events": events, "mode": "intercept", "timeoutMs": 5000,
			"failurePolicy": "fail-closed", "content": map[string]string{"default": "body"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	reg, problems, err := registration.Parse(doc, registration.Options{})
	if err != nil {
		t.Fatalf("registration: %v %v", err, problems)
	}
	ch, err := chain.New(reg, chain.Options{Source: cfg.Source, ObserveTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("chain: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	s, err := proxy.New(cfg, ch, proxy.Options{})
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); _ = s.Close() })
	return srv.URL
}

// recorder is the SDK's transport: it keeps the request body the SDK sent and the response
// body it received.
type recorder struct {
	mu   sync.Mutex
	sent []byte
	got  bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sent = b
	r.mu.Unlock()
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(b))
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	resp.Body = &tee{ReadCloser: resp.Body, r: r}
	return resp, nil
}

type tee struct {
	io.ReadCloser
	r *recorder
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.r.mu.Lock()
	t.r.got.Write(p[:n])
	t.r.mu.Unlock()
	return n, err
}

// outcome is what the SDK call gave the agent.
type outcome struct {
	resp   *responses.Response
	events []string
	err    error
}

// call runs one Responses call through the proxy, streamed or not.
func call(t *testing.T, proxyURL string, rec *recorder, params responses.ResponseNewParams, stream bool) outcome {
	t.Helper()
	client := oai.NewClient(option.WithBaseURL(proxyURL+"/openai/v1"), option.WithAPIKey(apiKey),
		option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: rec}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !stream {
		res, err := client.Responses.New(ctx, params)
		return outcome{resp: res, err: err}
	}
	s := client.Responses.NewStreaming(ctx, params)
	defer s.Close()
	var o outcome
	for s.Next() {
		ev := s.Current()
		o.events = append(o.events, ev.Type)
		if ev.Type == "response.completed" {
			r := ev.Response
			o.resp = &r
		}
		if strings.Contains(ev.RawJSON(), `"call_b"`) {
			o.events = append(o.events, "LEAK:"+ev.Type)
		}
	}
	o.err = s.Err()
	return o
}

// text builds a params value from instructions and input items.
func params(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-5", Instructions: oai.String(instructs), Store: oai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}}
}

func userText(s string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(s, responses.EasyInputMessageRoleUser)
}

// textAnswer is a plain completed response, and its stream.
func textAnswer(t *testing.T) ([]byte, []byte) {
	t.Helper()
	body := []byte(`{"id":"resp_text1","object":"response","created_at":1741476542,"status":"completed","error":null,` +
		`"incomplete_details":null,"instructions":"` + instructs + `","model":"gpt-5-2025-08-07","output":[{"id":"msg_t1",` +
		`"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[],"logprobs":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},` +
		`"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}`)
	var sse bytes.Buffer
	if err := translator.New().WriteStream(&sse, body); err != nil {
		t.Fatal(err)
	}
	return body, sse.Bytes()
}

func modes(t *testing.T, f func(t *testing.T, stream bool)) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) { f(t, stream) })
	}
}

func TestE2EPassThrough(t *testing.T) {
	modes(t, func(t *testing.T, stream bool) {
		body, sse := textAnswer(t)
		up := newUpstream(t, body, sse)
		b := newBackend(t, func(gjson.Result) []effect { return nil })
		url := startProxy(t, up, b, allEvents...)
		rec := &recorder{}
		o := call(t, url, rec, params(userText("What is 2+2?")), stream)
		if o.err != nil {
			t.Fatal(o.err)
		}
		if got := up.only(t); !bytes.Equal(got, rec.sent) {
			t.Errorf("the upstream did not get the SDK's bytes:\n got %s\nsent %s", got, rec.sent)
		}
		if !bytes.Equal(rec.got.Bytes(), up.written) {
			t.Errorf("the SDK did not get the upstream's bytes")
		}
		if o.resp == nil || o.resp.OutputText() != "Done." {
			t.Errorf("response %+v", o.resp)
		}
		var types []string
		for _, ev := range b.intercepts(t) {
			types = append(types, ev.Get("event.type").String())
		}
		if want := "turn.start model.request.before model.response.after turn.finish.before"; strings.Join(types, " ") != want {
			t.Errorf("events %q, want %q", types, want)
		}
	})
}

func TestE2EDeny(t *testing.T) {
	modes(t, func(t *testing.T, stream bool) {
		body, sse := textAnswer(t)
		up := newUpstream(t, body, sse)
		b := newBackend(t, func(ev gjson.Result) []effect {
			if ev.Get("type").String() != "model.request.before" || !strings.Contains(ev.Get("items").Raw, secret) {
				return nil
			}
			return []effect{{"type": "deny", "reason": denyWhy, "code": denyCode}}
		})
		url := startProxy(t, up, b, "model.request.before")
		o := call(t, url, &recorder{}, params(userText("deploy with key "+secret)), stream)
		var apiErr *oai.Error
		if !errors.As(o.err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Message != denyWhy || apiErr.Code != denyCode || apiErr.Type != "policy_denied" {
			t.Fatalf("err = %v, want a 403 API error with the reason", o.err)
		}
		if up.count() != 0 {
			t.Errorf("a denied request reached the upstream")
		}
		b.intercepts(t)
	})
}

// redact replaces the whole list (or the tool output) by the same list without the secret,
// edited as JSON text so that every id, role and part survives as the proxy sent it.
func redact(ev gjson.Result) []effect {
	target := map[string]string{"model.request.before": "request", "tool.after": "output"}[ev.Get("type").String()]
	if target == "" || !strings.Contains(ev.Get("items").Raw, secret) {
		return nil
	}
	return []effect{{"type": "modify", "target": target, "operation": "replace",
		"value": json.RawMessage(strings.ReplaceAll(ev.Get("items").Raw, secret, redacted))}}
}

func TestE2EModifyRequestKeepsInstructions(t *testing.T) {
	modes(t, func(t *testing.T, stream bool) {
		body, sse := textAnswer(t)
		up := newUpstream(t, body, sse)
		b := newBackend(t, redact)
		url := startProxy(t, up, b, "model.request.before")
		rec := &recorder{}
		o := call(t, url, rec, params(userText("Summarize."), userText("my key is "+secret)), stream)
		if o.err != nil || o.resp == nil || o.resp.OutputText() != "Done." {
			t.Fatalf("call: %v %+v", o.err, o.resp)
		}
		got := gjson.ParseBytes(up.only(t))
		if strings.Contains(got.Raw, secret) {
			t.Errorf("the upstream saw the secret: %s", got.Raw)
		}
		sent := gjson.ParseBytes(rec.sent)
		if got.Get("instructions").Raw != sent.Get("instructions").Raw || got.Get("input.1.content").String() != "my key is "+redacted ||
			got.Get("input.0").Raw != sent.Get("input.0").Raw || got.Get("model").Raw != sent.Get("model").Raw ||
			len(got.Get("input").Array()) != 2 {
			t.Errorf("upstream body: %s", got.Raw)
		}
		evs := b.intercepts(t)
		if len(evs) != 1 || evs[0].Get("event.items.0.role").String() != "system" ||
			!evs[0].Get("capabilities.modify.request.replace").Bool() {
			t.Errorf("model.request.before: %s", evs)
		}
	})
}

func TestE2EPreviousResponseIDOffersNoReplace(t *testing.T) {
	body, sse := textAnswer(t)
	up := newUpstream(t, body, sse)
	b := newBackend(t, redact)
	url := startProxy(t, up, b, "model.request.before")
	p := params(userText("my key is " + secret))
	p.PreviousResponseID = oai.String("resp_earlier")
	o := call(t, url, &recorder{}, p, false)
	// The history held upstream is a gap, so a whole-list replace is not authority the
	// proxy grants: the backend's replace is refused and the fail-closed policy denies,
	// naming the reply (not an outage) as the cause.
	var apiErr *oai.Error
	if !errors.As(o.err, &apiErr) || apiErr.StatusCode != 403 || apiErr.Code != "hookproxy.backend_invalid_reply" || up.count() != 0 {
		t.Fatalf("err = %v, upstream requests %d", o.err, up.count())
	}
	evs := b.intercepts(t)
	if len(evs) != 1 || evs[0].Get("capabilities.modify.request.replace").Bool() ||
		!strings.Contains(evs[0].Get("event.gaps").Raw, "earlier context held by provider") {
		t.Errorf("model.request.before: %s", evs)
	}
}

func TestE2EDeniedFunctionCallRemoved(t *testing.T) {
	modes(t, func(t *testing.T, stream bool) {
		up := newUpstream(t, fixture(t, "responses/tool_response.json"), fixture(t, "responses/tool_stream.sse"))
		b := newBackend(t, func(ev gjson.Result) []effect {
			if ev.Get("type").String() != "tool.before" || ev.Get("tool.name").String() != "run" {
				return nil
			}
			return []effect{{"type": "deny", "reason": toolWhy}}
		})
		url := startProxy(t, up, b, "tool.before")
		o := call(t, url, &recorder{}, params(userText("Check Paris and clean up.")), stream)
		if o.err != nil || o.resp == nil {
			t.Fatalf("call: %v", o.err)
		}
		var calls []string
		for _, it := range o.resp.Output {
			if it.Type == "function_call" {
				calls = append(calls, it.Name+":"+it.Arguments.OfString)
			}
		}
		if len(calls) != 1 || calls[0] != `get_weather:{"city":"Paris"}` {
			t.Errorf("calls %q: the denied call must be gone, the allowed one kept", calls)
		}
		if !strings.Contains(o.resp.OutputText(), toolWhy) || o.resp.Status != "completed" {
			t.Errorf("the agent must be told why: %q", o.resp.OutputText())
		}
		for _, ev := range o.events {
			if strings.HasPrefix(ev, "LEAK:") {
				t.Errorf("a stream event carried the denied call: %s", ev)
			}
		}
		evs := b.intercepts(t)
		if len(evs) != 2 || evs[0].Get("event.tool.name").String() != "get_weather" || evs[1].Get("event.call.id").String() != "call_b" ||
			evs[1].Get("event.path").String() != "hookproxy.openai.responses" || evs[1].Get("event.tool.input.cmd").String() != "rm -rf /" {
			t.Errorf("tool.before events: %s", evs)
		}
	})
}

func TestE2EFunctionCallOutputRewritten(t *testing.T) {
	modes(t, func(t *testing.T, stream bool) {
		body, sse := textAnswer(t)
		up := newUpstream(t, body, sse)
		b := newBackend(t, redact)
		url := startProxy(t, up, b, "tool.after")
		rec := &recorder{}
		o := call(t, url, rec, params(
			userText("What is in the config?"),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"/etc/app.conf"}`, "call_cfg", "read_file"),
			responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: oai.String("call_cfg"), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String("aws_key=" + secret)}}},
		), stream)
		if o.err != nil || o.resp == nil {
			t.Fatalf("call: %v", o.err)
		}
		got, sent := gjson.ParseBytes(up.only(t)), gjson.ParseBytes(rec.sent)
		if strings.Contains(got.Raw, secret) || got.Get("input.2.output").String() != "aws_key="+redacted || got.Get("input.2.call_id").String() != "call_cfg" {
			t.Errorf("upstream body: %s", got.Raw)
		}
		for _, k := range []string{"instructions", "input.0", "input.1", "model", "store"} {
			if got.Get(k).Raw != sent.Get(k).Raw {
				t.Errorf("%s changed: %s", k, got.Get(k).Raw)
			}
		}
		evs := b.intercepts(t)
		if len(evs) != 1 || evs[0].Get("event.tool.name").String() != "read_file" || evs[0].Get("event.tool.input.path").String() != "/etc/app.conf" ||
			evs[0].Get("event.call.id").String() != "call_cfg" || evs[0].Get("event.items.0.id").String() != "call_cfg" {
			t.Errorf("tool.after: %s", evs)
		}
	})
}

func TestE2EReturnAnswersWithoutUpstream(t *testing.T) {
	const supplied = "Supplied by policy: the deploy is paused."
	modes(t, func(t *testing.T, stream bool) {
		body, sse := textAnswer(t)
		up := newUpstream(t, body, sse)
		b := newBackend(t, func(ev gjson.Result) []effect {
			if ev.Get("type").String() != "model.request.before" {
				return nil
			}
			return []effect{{"type": "return", "value": []any{map[string]any{"id": "ret-1", "role": "assistant",
				"parts": []any{map[string]any{"id": "ret-1.0", "kind": "text", "mediaType": "text/plain", "selection": "body", "text": supplied}}}}}}
		})
		url := startProxy(t, up, b, "model.request.before", "model.response.after")
		o := call(t, url, &recorder{}, params(userText("Deploy now.")), stream)
		if o.err != nil || o.resp == nil || o.resp.OutputText() != supplied || o.resp.Status != "completed" || o.resp.Instructions.OfString != instructs {
			t.Fatalf("call: %v %+v", o.err, o.resp)
		}
		if up.count() != 0 {
			t.Errorf("a supplied result must not call the upstream")
		}
		evs := b.intercepts(t)
		if len(evs) != 2 || evs[1].Get("event.execution.reason").String() != "supplied_result" || evs[1].Get("event.usage").Exists() {
			t.Errorf("model.response.after of a supplied result: %s", evs)
		}
	})
}

func TestE2EInterleavedOutputsRewritten(t *testing.T) {
	// Clients commonly append each call followed by its output. Both outputs are new to the
	// model, so both pass tool.after and both are rewritten.
	output := func(id, s string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: oai.String(id), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(s)}}}
	}
	modes(t, func(t *testing.T, stream bool) {
		body, sse := textAnswer(t)
		up := newUpstream(t, body, sse)
		b := newBackend(t, redact)
		url := startProxy(t, up, b, "tool.after")
		o := call(t, url, &recorder{}, params(
			userText("Read both files."),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"a"}`, "call_1", "read_file"),
			output("call_1", "a="+secret),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"b"}`, "call_2", "read_file"),
			output("call_2", "b="+secret),
		), stream)
		if o.err != nil {
			t.Fatal(o.err)
		}
		got := gjson.ParseBytes(up.only(t))
		if strings.Contains(got.Raw, secret) || got.Get("input.2.output").String() != "a="+redacted ||
			got.Get("input.4.output").String() != "b="+redacted || got.Get("input.3.call_id").String() != "call_2" {
			t.Errorf("upstream body: %s", got.Raw)
		}
		if evs := b.intercepts(t); len(evs) != 2 {
			t.Errorf("%d tool.after events, want 2", len(evs))
		}
	})
}
