package backend_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// handWritten is a hooks/intercept request as a developer would write it by hand: a
// model.request.before event whose user message carries an AWS access key id.
const handWritten = `{
  "jsonrpc": "2.0",
  "id": "evt_hand_1",
  "method": "hooks/intercept",
  "params": {
    "protocolVersion": "draft",
    "event": {
      "id": "evt_hand_1",
      "source": "urn:example:my-harness",
      "type": "model.request.before",
      "time": "2026-09-15T12:00:00Z",
      "model": {"id": "gpt-4o", "provider": "openai"},
      "attempt": {"id": "att_1", "number": 1},
      "params": {"temperature": 0.2},
      "items": [
        {"id": "m0", "role": "system", "parts": [
          {"id": "m0p0", "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "You are a deploy bot."}]},
        {"id": "m1", "role": "user", "parts": [
          {"id": "m1p0", "kind": "text", "mediaType": "text/plain", "selection": "body",
           "text": "Use access key ` + awsKeyID + ` for the deploy to eu-west-1."}]}
      ]
    },
    "capabilities": {
      "effects": ["deny", "modify", "message"],
      "modify": {"request": {"replace": true, "merge": true}}
    }
  }
}`

func TestHTTPHandWrittenInterceptRemovesSecret(t *testing.T) {
	srv := httptest.NewServer(newDefaultServer(t).Handler())
	defer srv.Close()

	resp, body := post(t, srv.URL+"/any/path?q=1", "application/json", []byte(handWritten), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	assertValidResult(t, body)
	r := decodeReply(t, body)
	if string(r.ID) != `"evt_hand_1"` || r.Result == nil || len(r.Result.Effects) != 1 {
		t.Fatalf("reply %s", body)
	}
	e := r.Result.Effects[0]
	if e.Type != ahp.EffectModify || e.Target != ahp.TargetRequest || e.Operation != ahp.OpReplace {
		t.Fatalf("effect %+v, want modify(request, replace)", e)
	}
	var items []ahp.Message
	if err := json.Unmarshal(e.Value, &items); err != nil {
		t.Fatal(err)
	}
	got := textsOf(items)
	if strings.Contains(got, awsKeyID) || strings.Contains(string(body), awsKeyID) {
		t.Fatalf("the secret is still in the reply: %s", body)
	}
	for _, want := range []string{"[REDACTED:aws_access_key_id:", "Use access key ", " for the deploy to eu-west-1.", "You are a deploy bot."} {
		if !strings.Contains(got, want) {
			t.Errorf("redacted request lacks %q: %q", want, got)
		}
	}
	if len(items) != 2 || items[1].ID != "m1" || items[1].Parts[0].ID != "m1p0" {
		t.Errorf("message and part ids must be kept: %+v", items)
	}
}

// TestErrorCodes refuses malformed or unsupported messages with the protocol's codes
// (AHP spec, base/errors.md "JSON-RPC errors"), inside an HTTP 200 (AHP-HTTP-001).
func TestErrorCodes(t *testing.T) {
	srv := httptest.NewServer(newDefaultServer(t).Handler())
	defer srv.Close()
	valid := func(mutate func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(handWritten), &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	params := func(m map[string]any) map[string]any { return m["params"].(map[string]any) }
	event := func(m map[string]any) map[string]any { return params(m)["event"].(map[string]any) }

	cases := []struct {
		desc   string
		body   string
		code   int
		id     string // expected reply id (JSON)
		verify func(t *testing.T, data json.RawMessage)
	}{
		{desc: "truncated JSON", body: `{"jsonrpc":"2.0","id":"a",`, code: ahp.CodeParseError, id: "null"},
		{desc: "not UTF-8", body: "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\"}", code: ahp.CodeParseError, id: "null"},
		{desc: "two JSON values", body: `{} {}`, code: ahp.CodeParseError, id: "null"},
		{desc: "batch", body: `[` + handWritten + `]`, code: ahp.CodeInvalidRequest, id: "null"},
		{desc: "not an object", body: `"hooks/intercept"`, code: ahp.CodeInvalidRequest, id: "null"},
		{desc: "jsonrpc 1.0", body: valid(func(m map[string]any) { m["jsonrpc"] = "1.0" }), code: ahp.CodeInvalidRequest, id: `"evt_hand_1"`},
		{desc: "id is an object", body: valid(func(m map[string]any) { m["id"] = map[string]any{} }), code: ahp.CodeInvalidRequest, id: "null"},
		{desc: "id is null", body: valid(func(m map[string]any) { m["id"] = nil }), code: ahp.CodeInvalidRequest, id: "null"},
		{desc: "no method", body: `{"jsonrpc":"2.0","id":7}`, code: ahp.CodeInvalidRequest, id: "7"},
		{desc: "intercept without id", body: valid(func(m map[string]any) { delete(m, "id") }), code: ahp.CodeInvalidRequest, id: "null"},
		{desc: "id differs from event id", body: valid(func(m map[string]any) { m["id"] = "other" }), code: ahp.CodeInvalidRequest, id: `"other"`},
		{desc: "observe with an id", body: `{"jsonrpc":"2.0","id":"o","method":"hooks/observe","params":{}}`, code: ahp.CodeInvalidRequest, id: `"o"`},
		{desc: "unknown method", body: `{"jsonrpc":"2.0","id":"u","method":"hooks/evaluate","params":{}}`, code: ahp.CodeMethodNotFound, id: `"u"`},
		{desc: "capabilities are the harness's; the backend states its own claim", body: `{"jsonrpc":"2.0","id":"c","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`,
			code: ahp.CodeMethodNotFound, id: `"c"`, verify: func(t *testing.T, data json.RawMessage) {
				want := `{"dev.hookproxy.conformance":{"protocolVersion":"draft","role":"backend","bindings":["http","stdio"],` +
					`"profiles":["base","tool-interception","http","stdio"]}}`
				if !jsonEq(data, want) {
					t.Errorf("data %s, want %s", data, want)
				}
			}},
		{desc: "old protocol version", body: valid(func(m map[string]any) { params(m)["protocolVersion"] = "0.1" }),
			code: ahp.CodeUnsupportedProtocolVersion, id: `"evt_hand_1"`, verify: func(t *testing.T, data json.RawMessage) {
				if !jsonEq(data, `{"supported":["draft"]}`) {
					t.Errorf("data %s, want {\"supported\":[\"draft\"]}", data)
				}
			}},
		{desc: "dated protocol version", body: valid(func(m map[string]any) { params(m)["protocolVersion"] = "1900-01-01" }),
			code: ahp.CodeUnsupportedProtocolVersion, id: `"evt_hand_1"`},
		{desc: "observe-only event", body: valid(func(m map[string]any) { event(m)["type"] = "turn.end" }), code: ahp.CodeUnsupportedEvent, id: `"evt_hand_1"`},
		{desc: "event nothing subscribes", body: valid(func(m map[string]any) { event(m)["type"] = "workspace.change.before" }),
			code: ahp.CodeUnsupportedEvent, id: `"evt_hand_1"`, verify: func(t *testing.T, data json.RawMessage) {
				if !strings.Contains(string(data), "model.request.before") {
					t.Errorf("data %s should list the served events", data)
				}
			}},
		{desc: "unknown event name", body: valid(func(m map[string]any) { event(m)["type"] = "tool.error" }), code: ahp.CodeUnsupportedEvent, id: `"evt_hand_1"`},
		{desc: "params not an object", body: `{"jsonrpc":"2.0","id":"p","method":"hooks/intercept","params":[]}`, code: ahp.CodeInvalidParams, id: `"p"`},
		{desc: "capabilities missing", body: valid(func(m map[string]any) { delete(params(m), "capabilities") }), code: ahp.CodeInvalidParams, id: `"evt_hand_1"`},
		{desc: "event time not RFC 3339", body: valid(func(m map[string]any) { event(m)["time"] = "20260915T120000Z" }), code: ahp.CodeInvalidParams, id: `"evt_hand_1"`},
		{desc: "effect outside the event bound advertised", body: valid(func(m map[string]any) {
			params(m)["capabilities"] = map[string]any{"effects": []string{"allow"}}
		}), code: ahp.CodeInvalidParams, id: `"evt_hand_1"`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := post(t, srv.URL, "application/json", []byte(tc.body), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200 with a JSON-RPC error: %s", resp.StatusCode, body)
			}
			r := decodeReply(t, body)
			if r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("reply %s, want error code %d", body, tc.code)
			}
			if string(r.ID) != tc.id {
				t.Errorf("reply id %s, want %s", r.ID, tc.id)
			}
			if r.Error.Message == "" {
				t.Error("error message is empty")
			}
			if err := ahp.ValidateMessage(body); err != nil {
				t.Errorf("error reply is not a valid JSON-RPC response: %v", err)
			}
			if tc.verify != nil {
				tc.verify(t, r.Error.Data)
			}
		})
	}
}

// TestHTTPBinding checks the backend side of AHP-HTTP-001.
func TestHTTPBinding(t *testing.T) {
	small := httptest.NewServer(newDefaultServer(t, backend.WithMaxFrameBytes(2048)).Handler())
	defer small.Close()
	def := httptest.NewServer(newDefaultServer(t).Handler())
	defer def.Close()

	observe := `{"jsonrpc":"2.0","method":"hooks/observe","params":{"protocolVersion":"draft","event":{"id":"evt_o1","source":"urn:example:h","type":"turn.end","time":"2026-09-15T12:00:00Z","turn":{"id":"t1"},"outcome":"completed","continuationCount":0,"items":[]}}}`

	cases := []struct {
		desc        string
		url         string
		method      string
		contentType string
		header      map[string]string
		body        []byte
		status      int
		emptyBody   bool
	}{
		{desc: "GET is not allowed", url: def.URL, method: http.MethodGet, status: http.StatusMethodNotAllowed},
		{desc: "PUT is not allowed", url: def.URL + "/x", method: http.MethodPut, contentType: "application/json", body: []byte(handWritten), status: http.StatusMethodNotAllowed},
		{desc: "text/plain", url: def.URL, contentType: "text/plain", body: []byte(handWritten), status: http.StatusUnsupportedMediaType},
		{desc: "no content type", url: def.URL, body: []byte(handWritten), status: http.StatusUnsupportedMediaType},
		{desc: "json with another charset", url: def.URL, contentType: "application/json; charset=latin1", body: []byte(handWritten), status: http.StatusUnsupportedMediaType},
		{desc: "gzip encoding", url: def.URL, contentType: "application/json", header: map[string]string{"Content-Encoding": "gzip"}, body: []byte(handWritten), status: http.StatusUnsupportedMediaType},
		{desc: "identity encoding is still an encoding", url: def.URL, contentType: "application/json", header: map[string]string{"Content-Encoding": "identity"}, body: []byte(handWritten), status: http.StatusUnsupportedMediaType},
		{desc: "json with utf-8 charset", url: def.URL, contentType: "application/json; charset=UTF-8", body: []byte(handWritten), status: http.StatusOK},
		{desc: "over the configured limit", url: small.URL, contentType: "application/json", body: []byte(handWritten + strings.Repeat(" ", 2048)), status: http.StatusRequestEntityTooLarge},
		{desc: "over the default 4 MiB limit", url: def.URL, contentType: "application/json", body: bytes.Repeat([]byte(" "), int(backend.DefaultMaxFrameBytes)+1), status: http.StatusRequestEntityTooLarge},
		{desc: "observe is answered with 204 and no body", url: def.URL + "/hooks", contentType: "application/json", body: []byte(observe), status: http.StatusNoContent, emptyBody: true},
		{desc: "an invalid observation gets 400 and no JSON-RPC body", url: def.URL, contentType: "application/json",
			body: []byte(`{"jsonrpc":"2.0","method":"hooks/observe","params":{"protocolVersion":"draft","event":{"type":"turn.end"}}}`), status: http.StatusBadRequest, emptyBody: true},
		{desc: "an unknown notification is not answered", url: def.URL, contentType: "application/json",
			body: []byte(`{"jsonrpc":"2.0","method":"hooks/ping","params":{}}`), status: http.StatusNoContent, emptyBody: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, tc.url, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, buf.Bytes())
			}
			if tc.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", resp.Header.Get("Allow"))
			}
			if tc.emptyBody && buf.Len() != 0 {
				t.Errorf("body %q, want none", buf.Bytes())
			}
		})
	}
}

// TestBearerToken: a protected backend rejects requests without the token before reading
// them, and hookproxy's chain gets through with a bearer tokenEnv registration.
func TestBearerToken(t *testing.T) {
	const token = "test-token-0f3a9c"
	srv := httptest.NewServer(newDefaultServer(t, backend.WithBearerToken(token)).Handler())
	defer srv.Close()
	for _, tc := range []struct {
		desc, auth string
		status     int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"wrong scheme", "Basic " + token, http.StatusUnauthorized},
		{"right token", "Bearer " + token, http.StatusOK},
		{"scheme is case-insensitive", "bearer " + token, http.StatusOK},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := map[string]string{}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			resp, body := post(t, srv.URL, "application/json", []byte(handWritten), h)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}

	t.Setenv("HOOKPROXY_TEST_BACKEND_TOKEN", token)
	ch := harnessChainAuth(t, registration.Transport{Type: registration.TransportHTTP, URL: srv.URL},
		&registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_BACKEND_TOKEN"})
	exerciseChain(t, ch)
}
