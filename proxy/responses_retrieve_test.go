package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// bgResponse is a background response as GET /v1/responses/{id} returns it once done: a
// harmless call and a destructive one.
const bgResponse = `{"id":"resp_bg1","object":"response","created_at":1760000000,"status":"completed","background":true,"model":"gpt-5","output":[` +
	`{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_ls","name":"bash","arguments":"{\"command\":\"ls\"}"},` +
	`{"id":"fc_2","type":"function_call","status":"completed","call_id":"call_rm","name":"bash","arguments":"{\"command\":\"rm -rf /\"}"}` +
	`],"usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}}`

// retrieveUpstream serves bgResponse to GET /v1/responses/resp_bg1: JSON, or with
// ?stream=true its events, after starting_after when given (as the API resumes a stream).
func retrieveUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	var buf bytes.Buffer
	if err := responses.New().WriteStream(&buf, []byte(bgResponse)); err != nil {
		t.Fatal(err)
	}
	events := strings.SplitAfter(buf.String(), "\n\n")
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/responses/resp_bg1") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if r.URL.Query().Get("stream") != "true" && !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, bgResponse)
			return
		}
		after := int64(-1)
		if v := r.URL.Query().Get("starting_after"); v != "" {
			after = gjson.Parse(v).Int()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, data, ok := strings.Cut(ev, "data: ")
			if ok && gjson.Get(data, "sequence_number").Int() <= after {
				continue
			}
			_, _ = io.WriteString(w, ev)
		}
	})
}

// get sends a GET as the OpenAI SDKs do for responses.retrieve.
func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer sk-test-retrieve-0001")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// clientResponse is the Response object a client ends up with: the JSON answer, or the
// terminal event's response of a stream.
func clientResponse(t *testing.T, body []byte, streamed bool) gjson.Result {
	t.Helper()
	if !streamed {
		return gjson.ParseBytes(body)
	}
	for _, ev := range strings.Split(string(body), "\n\n") {
		if _, data, ok := strings.Cut(ev, "data: "); ok && gjson.Get(data, "type").String() == "response.completed" {
			return gjson.Get(data, "response")
		}
	}
	t.Fatalf("no response.completed in %s", body)
	return gjson.Result{}
}

// TestResponsesRetrieveJudgesToolCalls: a response read back with GET (JSON, streamed,
// resumed mid-way, and in the Azure path forms) has its calls judged at tool.before like a
// fresh answer: the denied call is removed and never reaches the client, the other is
// kept. The control reads the same response straight from the recording upstream and gets
// the destructive call.
func TestResponsesRetrieveJudgesToolCalls(t *testing.T) {
	up := retrieveUpstream(t)
	for _, tc := range []struct {
		desc, path string
		streamed   bool
	}{
		{"json", "/openai/v1/responses/resp_bg1", false},
		{"json with include", "/openai/v1/responses/resp_bg1?include[]=reasoning.encrypted_content", false},
		{"stream", "/openai/v1/responses/resp_bg1?stream=true", true},
		{"stream resumed before the calls", "/openai/v1/responses/resp_bg1?stream=true&starting_after=1", true},
		{"stream resumed inside the second call", "/openai/v1/responses/resp_bg1?stream=true&starting_after=7", true},
		{"stream resumed after the calls", "/openai/v1/responses/resp_bg1?stream=true&starting_after=9", true},
		{"azure", "/openai/openai/responses/resp_bg1?api-version=preview", false},
		{"azure v1 stream", "/openai/openai/v1/responses/resp_bg1?stream=true", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			direct := strings.TrimPrefix(tc.path, "/openai")
			if strings.HasPrefix(direct, "/openai/") {
				direct = strings.TrimPrefix(direct, "/openai")
				if !strings.HasPrefix(direct, "/v1/") {
					direct = "/v1" + direct
				}
			}
			_, _, raw := get(t, up.URL+direct)
			if !strings.Contains(string(raw), `rm -rf /`) {
				t.Fatalf("control: the upstream's answer holds no destructive call: %s", raw)
			}

			pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type == ahp.EventToolBefore && strings.Contains(string(ev.Tool.Input), "rm -rf") {
					return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "destructive command"}}
				}
				return nil
			}}
			px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolBefore)), Options{})
			n := len(up.requests())
			status, hdr, got := get(t, px.URL+tc.path)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, got)
			}
			if strings.Contains(string(got), "rm -rf") {
				t.Fatalf("the denied call reached the client:\n%s", got)
			}
			if tc.streamed != isEventStream(hdr.Get("Content-Type")) {
				t.Errorf("content type %q", hdr.Get("Content-Type"))
			}
			resp := clientResponse(t, got, tc.streamed)
			var calls []string
			for _, it := range resp.Get("output").Array() {
				if it.Get("type").String() == "function_call" {
					calls = append(calls, it.Get("call_id").String())
				}
			}
			if strings.Join(calls, ",") != "call_ls" || !strings.Contains(resp.Get("output").Raw, "destructive command") {
				t.Errorf("client response output: %s", resp.Get("output").Raw)
			}
			if len(pol.callsOf(ahp.EventToolBefore)) == 0 {
				t.Error("no tool.before was settled")
			}
			assertValidIntercepts(t, pol)
			reqs := up.requests()[n:]
			if len(reqs) != 1 || reqs[0].Method != http.MethodGet || len(reqs[0].Body) != 0 {
				t.Fatalf("upstream received %+v", reqs)
			}
		})
	}
}

// TestResponsesRetrieveOtherMethods: only GET of the response itself is read; DELETE of a
// response and GET of its input items go through as before, and with no subscription a
// GET is forwarded untouched.
func TestResponsesRetrieveOtherMethods(t *testing.T) {
	up := retrieveUpstream(t)
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	if _, _, got := get(t, px.URL+"/openai/v1/responses/resp_bg1"); string(got) != bgResponse {
		t.Errorf("without a chain the GET was changed: %s", got)
	}
	pol := &fakePolicy{effects: denyTool("bash")}
	px = startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolBefore)), Options{})
	req, _ := http.NewRequest(http.MethodDelete, px.URL+"/openai/v1/responses/resp_bg1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound { // the fake upstream serves GET only: it was reached
		t.Errorf("DELETE answered %d, want the upstream's 404", resp.StatusCode)
	}
	if status, _, _ := get(t, px.URL+"/openai/v1/responses/resp_bg1/input_items"); status != http.StatusNotFound {
		t.Errorf("input_items answered %d, want the upstream's 404", status)
	}
	if len(pol.intercepted()) != 0 {
		t.Errorf("a hook ran for DELETE or input_items: %d", len(pol.intercepted()))
	}
}

// TestResponsesRetrieveBody: openai-go's Responses.GetStreaming asks for the stream with a
// JSON body {"stream":true} on the GET; that body is forwarded and the stream judged. A
// body holding anything else would reach the upstream unexamined: refused, upstream not
// contacted.
func TestResponsesRetrieveBody(t *testing.T) {
	up := retrieveUpstream(t)
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventToolBefore && strings.Contains(string(ev.Tool.Input), "rm -rf") {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "destructive command"}}
		}
		return nil
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept(ahp.EventToolBefore)), Options{})
	send := func(body string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodGet, px.URL+"/openai/v1/responses/resp_bg1", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	status, hdr, got := send(`{"stream":true}`)
	if status != 200 || !isEventStream(hdr.Get("Content-Type")) || strings.Contains(string(got), "rm -rf") || !strings.Contains(string(got), "call_ls") {
		t.Errorf("stream asked in the body: %d %q\n%s", status, hdr.Get("Content-Type"), got)
	}
	if reqs := up.requests(); len(reqs) != 1 || string(reqs[0].Body) != `{"stream":true}` {
		t.Errorf("upstream received %+v", reqs)
	}
	for _, body := range []string{`{"stream":true,"input":"rm -rf /"}`, `[1]`, `{"stream":true,"stream":false}`, `not json`} {
		if status, _, got := send(body); status != http.StatusBadRequest {
			t.Errorf("body %s: %d %s, want 400", body, status, got)
		}
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("a refused body reached the upstream (%d requests)", n)
	}
}
