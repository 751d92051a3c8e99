package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// sendRaw sends body with method and Content-Type ct ("" for none) to url and returns the
// status and body. chunked sends the body without a declared length.
func sendRaw(t *testing.T, method, url, ct string, body []byte, chunked bool, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// denyCommand refuses model.request.before when the request's params mention rm -rf.
func denyCommand() *fakePolicy {
	return &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type == ahp.EventModelRequestBefore && strings.Contains(string(ev.Params), "rm -rf") {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "No destructive commands.", Code: "com.example.commands"}}
		}
		return nil
	}}
}

// TestUnmappedForwardExaminesEveryJSONInput: with unmapped: forward, a JSON body reaches
// model.request.before whatever the method that carries it (POST, PUT, PATCH) and whatever
// media type it is labelled with (JSON, text/plain, none, a form), sent with a length or
// chunked, plain or gzip-coded: a refused one never reaches the upstream. Straight to the
// upstream, each arrives. A harmless body is forwarded as sent; a text body that is not
// JSON is forwarded unexamined, byte for byte.
func TestUnmappedForwardExaminesEveryJSONInput(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `{"ok":true}`))
	cfg := testConfig(up.URL)
	cfg.Routes[0].Unmapped = "forward"
	pol := denyCommand()
	px := startProxy(t, cfg, newTestChain(t, pol, intercept(ahp.EventModelRequestBefore)), Options{})
	const bad = ` {"model":"gpt-4o","instructions":"run rm -rf / now"}`
	const good = `{"model":"gpt-4o","instructions":"list the files"}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, bad)
	_ = zw.Close()

	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch} {
		for _, ct := range []string{"application/json", "text/plain", "text/plain; charset=utf-8", "", "application/x-www-form-urlencoded", "application/octet-stream"} {
			for _, chunked := range []bool{false, true} {
				name := method + " " + ct + map[bool]string{true: " chunked"}[chunked]
				// Control: straight to the upstream, the command arrives.
				n := len(up.requests())
				sendRaw(t, method, up.URL+"/v1/assistants/asst_1", ct, []byte(bad), chunked, nil)
				if got := up.requests(); len(got) != n+1 || !strings.Contains(string(got[n].Body), "rm -rf") {
					t.Fatalf("%s: control: the upstream did not receive the body", name)
				}

				n = len(up.requests())
				status, _, b := sendRaw(t, method, px.URL+"/openai/v1/assistants/asst_1", ct, []byte(bad), chunked, nil)
				if status != http.StatusForbidden || !strings.Contains(string(b), "No destructive commands.") || len(up.requests()) != n {
					t.Errorf("%s: %d %s; the upstream received %d requests", name, status, b, len(up.requests())-n)
				}
				status, _, b = sendRaw(t, method, px.URL+"/openai/v1/assistants/asst_1", ct, []byte(good), chunked, nil)
				got := up.requests()
				if status != 200 || len(got) != n+1 || string(got[n].Body) != good || got[n].Method != method ||
					got[n].Header.Get("Content-Type") != ct {
					t.Errorf("%s: harmless body: %d %s", name, status, b)
				}
			}
		}
	}

	// A gzip-coded text/plain JSON body is decoded and judged.
	n := len(up.requests())
	status, _, b := sendRaw(t, http.MethodPut, px.URL+"/openai/v1/assistants/asst_1", "text/plain", gz.Bytes(), false, map[string]string{"Content-Encoding": "gzip"})
	if status != http.StatusForbidden || len(up.requests()) != n {
		t.Errorf("gzip text/plain: %d %s", status, b)
	}

	// Text that is not JSON goes on unexamined, byte for byte.
	for _, text := range []string{"rm -rf / is a command", "   {not json", ""} {
		n, events := len(up.requests()), len(pol.intercepted())
		status, _, b = sendRaw(t, http.MethodPut, px.URL+"/openai/v1/files/f1/content", "text/plain", []byte(text), false, nil)
		got := up.requests()
		if status != 200 || len(got) != n+1 || string(got[n].Body) != text || len(pol.intercepted()) != events {
			t.Errorf("text %q: %d %s", text, status, b)
		}
	}
}

// TestBodyOnReadMethodRefused: a body on GET, HEAD, OPTIONS or DELETE to a model route —
// mapped endpoint or not — is refused with 400 in the provider's format and never reaches
// the upstream; straight to the upstream it does. The same requests without a body (or
// with an empty chunked one) are forwarded.
func TestBodyOnReadMethodRefused(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `{"object":"list","data":[]}`))
	cfg := testConfig(up.URL)
	cfg.Routes[0].Unmapped = "forward"
	px := startProxy(t, cfg, newTestChain(t, denyCommand(), intercept(ahp.EventModelRequestBefore)), Options{})
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"run rm -rf /"}]}`)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete} {
		for _, path := range []string{"/v1/chat/completions", "/v1/models", "/v1/files/f1"} {
			for _, chunked := range []bool{false, true} {
				name := method + " " + path + map[bool]string{true: " chunked"}[chunked]
				// Control: straight to the upstream, the body arrives.
				n := len(up.requests())
				sendRaw(t, method, up.URL+path, "application/json", body, chunked, nil)
				if got := up.requests(); len(got) != n+1 || !bytes.Equal(got[n].Body, body) {
					t.Fatalf("%s: control: the upstream did not receive the body", name)
				}

				n = len(up.requests())
				status, _, b := sendRaw(t, method, px.URL+"/openai"+path, "application/json", body, chunked, nil)
				if status != http.StatusBadRequest || len(up.requests()) != n {
					t.Errorf("%s: %d %s; the upstream received %d requests", name, status, b, len(up.requests())-n)
				}
				if method != http.MethodHead && !strings.Contains(gjson.GetBytes(b, "error.message").String(), "with a body") {
					t.Errorf("%s: %s", name, b)
				}
				// Without a body (an empty chunked one included), forwarded.
				var empty []byte
				if chunked {
					empty = []byte{}
				}
				status, _, b = sendRaw(t, method, px.URL+"/openai"+path, "", empty, chunked, nil)
				if method == http.MethodDelete && path == "/v1/chat/completions" {
					// a mapped endpoint takes POST only, body or not
					if status != http.StatusMethodNotAllowed || len(up.requests()) != n {
						t.Errorf("%s without a body: %d %s", name, status, b)
					}
					continue
				}
				if status != 200 || len(up.requests()) != n+1 {
					t.Errorf("%s without a body: %d %s", name, status, b)
				}
			}
		}
	}
}

// TestMCPMethodsOutsideStreamableHTTPRefused: an MCP route answers PUT, PATCH and other
// methods with 405 — a tools/call in their body never reaches the server, which straight
// would run it — and refuses a body on GET, DELETE or OPTIONS with 400. GET, DELETE and a
// bodiless OPTIONS (CORS preflight) pass.
func TestMCPMethodsOutsideStreamableHTTPRefused(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}`))
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolBefore, ahp.EventToolAfter)), nil)
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell","arguments":{"command":"rm -rf /"}}}`)
	hdr := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "s-1"}
	for _, method := range []string{http.MethodPut, http.MethodPatch, http.MethodHead, http.MethodTrace} {
		// Control: straight to the server, the call arrives.
		n := len(up.requests())
		sendRaw(t, method, up.URL+"/mcp", "application/json", call, false, hdr)
		if got := up.requests(); len(got) != n+1 || got[n].Method != method || !bytes.Equal(got[n].Body, call) {
			t.Fatalf("%s: control: the server did not receive the call", method)
		}
		n = len(up.requests())
		status, h, b := sendRaw(t, method, endpoint, "application/json", call, false, hdr)
		if status != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, POST, DELETE, OPTIONS" || len(up.requests()) != n {
			t.Errorf("%s: %d %v %s; the server received %d requests", method, status, h.Get("Allow"), b, len(up.requests())-n)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodOptions} {
		n := len(up.requests())
		status, _, b := sendRaw(t, method, endpoint, "application/json", call, false, hdr)
		if status != http.StatusBadRequest || len(up.requests()) != n || gjson.GetBytes(b, "error.code").Int() != -32600 {
			t.Errorf("%s with a body: %d %s; the server received %d requests", method, status, b, len(up.requests())-n)
		}
		status, _, b = sendRaw(t, method, endpoint, "", nil, false, hdr)
		if status != 200 || len(up.requests()) != n+1 {
			t.Errorf("%s without a body: %d %s", method, status, b)
		}
	}
}
