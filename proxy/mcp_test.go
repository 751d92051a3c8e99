package proxy

// Wire-level tests of MCP routes against a scripted upstream: exact bytes in and out,
// SSE framing, batches, malformed traffic from either side, headers and methods other
// than POST.

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
)

const (
	mcpReadCall   = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"},"_meta":{"progressToken":"p"}}}`
	mcpDeleteCall = `{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/a"}}}`
	mcpReadResult = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello sk-live-1"}],"structuredContent":{"text":"hello sk-live-1"}}}`
)

// mcpPost posts body to the MCP endpoint as a Streamable HTTP client would.
func mcpPost(t *testing.T, url, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	h := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "sess-secret-1", "MCP-Protocol-Version": "2025-06-18"}
	for k, v := range header {
		h[k] = v
	}
	return post(t, url, body, h)
}

// redactPolicy rewrites "sk-live-1" to "[redacted]" in every tool.after and denies
// delete_file at tool.before.
func redactPolicy() *fakePolicy {
	return &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		switch ev.Type {
		case ahp.EventToolBefore:
			if ev.Tool.Name == "delete_file" {
				return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "No deletes."}}
			}
		case ahp.EventToolAfter:
			items := cloneMessages(ev.Items)
			for i := range items {
				for j := range items[i].Parts {
					if p := &items[i].Parts[j]; p.Text != nil {
						t := strings.ReplaceAll(*p.Text, "sk-live-1", "[redacted]")
						p.Text = &t
					}
				}
			}
			b, _ := json.Marshal(items)
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetOutput, Operation: ahp.OpReplace, Value: b}}
		}
		return nil
	}}
}

func TestMCPPassThroughIsByteIdentical(t *testing.T) {
	sse := "event: message\nid: 1_0\ndata: " + mcpReadResult + "\n\n"
	tests := []struct {
		desc    string
		subs    []sub // nil: no chain at all
		ct      string
		respond string
	}{
		{desc: "no chain, SSE", ct: "text/event-stream", respond: sse},
		{desc: "unrelated subscription, JSON", subs: []sub{intercept(ahp.EventModelRequestBefore)}, ct: "application/json", respond: mcpReadResult},
		{desc: "tool events subscribed, no effects, JSON", subs: []sub{intercept(ahp.EventToolBefore, ahp.EventToolAfter)}, ct: "application/json", respond: mcpReadResult},
		{desc: "tool events subscribed, no effects, SSE", subs: []sub{intercept(ahp.EventToolBefore, ahp.EventToolAfter)}, ct: "text/event-stream", respond: sse},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", tc.ct)
				w.Header().Set("Mcp-Session-Id", "sess-secret-1")
				_, _ = io.WriteString(w, tc.respond)
			})
			policy := &fakePolicy{}
			var endpoint string
			if tc.subs == nil {
				endpoint = startMCPProxy(t, up.URL+"/mcp", nil, nil)
			} else {
				endpoint = startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, tc.subs...), nil)
			}
			body := " " + mcpReadCall + "\n" // odd whitespace survives too
			status, hdr, got := mcpPost(t, endpoint, body, nil)
			rec := up.only(t)
			if status != 200 || string(got) != tc.respond || hdr.Get("Mcp-Session-Id") != "sess-secret-1" {
				t.Errorf("client got %d %q (session header %q)", status, got, hdr.Get("Mcp-Session-Id"))
			}
			if string(rec.Body) != body || rec.Path != "/mcp" || rec.Header.Get("Mcp-Session-Id") != "sess-secret-1" ||
				rec.Header.Get("Mcp-Protocol-Version") != "2025-06-18" || rec.Header.Get("Accept") != "application/json, text/event-stream" {
				t.Errorf("upstream got %s %q headers %v", rec.Path, rec.Body, rec.Header)
			}
		})
	}
}

func TestMCPStreamRewrite(t *testing.T) {
	progress := "event: message\nid: 1_0\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n"
	result := "event: message\nid: 1_1\ndata: " + mcpReadResult + "\n\n"
	up := newUpstream(t, sseResponder(": keep-alive comment\n\n", progress, result))
	policy := redactPolicy()
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolBefore, ahp.EventToolAfter)), nil)
	status, hdr, got := mcpPost(t, endpoint, mcpReadCall, nil)
	if status != 200 || !isEventStream(hdr.Get("Content-Type")) {
		t.Fatalf("status %d content type %q", status, hdr.Get("Content-Type"))
	}
	want := ": keep-alive comment\n\n" + progress +
		"event: message\nid: 1_1\ndata: " +
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello [redacted]"}],"structuredContent":{"text":"hello [redacted]"}}}` + "\n\n"
	if string(got) != want {
		t.Errorf("stream:\n got %q\nwant %q", got, want)
	}
	assertValidIntercepts(t, policy)
}

func TestMCPStreamIsRelayedAsItArrives(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "event: message\ndata: "+mcpReadResult+"\n\n")
	})
	defer close(release)
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolAfter)), nil)
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(mcpReadCall))
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "event: message\n" {
			t.Errorf("first line = %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the progress notification was held back until the result arrived")
	}
}

func TestMCPStreamEndsWithoutResult(t *testing.T) {
	up := newUpstream(t, sseResponder("event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n"))
	policy := redactPolicy()
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolAfter), observe(ahp.EventToolAfter)), nil)
	_, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
	events := strings.Split(strings.TrimSpace(string(got)), "\n\n")
	if len(events) != 2 {
		t.Fatalf("events = %q", got)
	}
	data := strings.TrimPrefix(strings.Split(events[1], "\n")[1], "data: ")
	if gjson.Get(data, "id").Raw != "7" || gjson.Get(data, "error.code").Int() != -32603 ||
		!strings.Contains(gjson.Get(data, "error.message").Str, "ended before the tools/call result") {
		t.Errorf("closing event = %q", events[1])
	}
	if obs := waitObserved(t, policy, ahp.EventToolAfter, 1); len(obs) != 1 || obs[0].Outcome != "error" {
		t.Errorf("tool.after observations = %+v", obs)
	}
	assertValidObservations(t, policy)
}

func TestMCPBatch(t *testing.T) {
	notification := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`
	body := "[" + mcpReadCall + "," + mcpDeleteCall + "," + notification + "]"
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if mode == "json" {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, "["+mcpReadResult+"]")
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: "+mcpReadResult+"\n\n")
			})
			policy := redactPolicy()
			endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolBefore, ahp.EventToolAfter)), nil)
			status, _, got := mcpPost(t, endpoint, body, nil)
			if rec := up.only(t); string(rec.Body) != "["+mcpReadCall+","+notification+"]" {
				t.Errorf("upstream got %s", rec.Body)
			}
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			var answers []string
			if mode == "json" {
				for _, a := range gjson.ParseBytes(got).Array() {
					answers = append(answers, a.Raw)
				}
			} else {
				for _, ev := range strings.Split(strings.TrimSpace(string(got)), "\n\n") {
					for _, l := range strings.Split(ev, "\n") {
						if d, ok := strings.CutPrefix(l, "data: "); ok {
							answers = append(answers, d)
						}
					}
				}
			}
			byID := map[string]gjson.Result{}
			for _, a := range answers {
				byID[gjson.Get(a, "id").Raw] = gjson.Parse(a)
			}
			if len(answers) != 2 || byID["7"].Get("result.content.0.text").Str != "hello [redacted]" ||
				byID[`"d1"`].Get("result.content.0.text").Str != "No deletes." || !byID[`"d1"`].Get("result.isError").Bool() {
				t.Errorf("answers = %q", answers)
			}
			// Sibling calls of one batch carry the same batch identity.
			befores := policy.callsOf(ahp.EventToolBefore)
			if len(befores) != 2 || befores[0].Event.Batch == nil || befores[1].Event.Batch == nil ||
				befores[0].Event.Batch.ID != befores[1].Event.Batch.ID || len(befores[0].Event.Batch.CallIDs) != 2 {
				t.Errorf("batch = %+v", befores)
			}
			assertValidIntercepts(t, policy)
		})
	}
}

func TestMCPDeniedSingleCallIsAnsweredLocally(t *testing.T) {
	up := newUpstream(t, nil)
	policy := redactPolicy()
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolBefore), observe(ahp.EventToolAfter)), nil)
	status, hdr, got := mcpPost(t, endpoint, mcpDeleteCall, nil)
	want := `{"jsonrpc":"2.0","id":"d1","result":{"content":[{"type":"text","text":"No deletes."}],"isError":true}}`
	if status != 200 || hdr.Get("Content-Type") != "application/json" || string(got) != want {
		t.Errorf("got %d %s", status, got)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream was called %d times", n)
	}
	obs := waitObserved(t, policy, ahp.EventToolAfter, 1)
	if len(obs) != 1 || obs[0].Outcome != "denied" {
		t.Errorf("observations = %+v", obs)
	}
	assertValidObservations(t, policy)
}

func TestMCPMalformedTraffic(t *testing.T) {
	tests := []struct {
		desc     string
		body     string
		respond  func(http.ResponseWriter, *http.Request, []byte)
		status   int
		code     int64
		id       string // raw id of the answer
		upstream int    // requests the upstream must receive
	}{
		{desc: "not JSON", body: `{"jsonrpc":"2.0",`, status: 400, code: -32700, id: "null"},
		{desc: "not a message", body: `{"hello":1}`, status: 400, code: -32600, id: "null"},
		{desc: "empty batch", body: `[]`, status: 400, code: -32600, id: "null"},
		{desc: "duplicate arguments", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"arguments":{"path":"/"}}}`,
			status: 400, code: -32600, id: "null"},
		{desc: "tools/call as a notification", body: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, status: 400, code: -32600, id: "null"},
		{desc: "tools/call without a name", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}`, status: 200, code: -32602, id: "4"},
		{desc: "server result is not a CallToolResult", body: mcpReadCall, upstream: 1, status: 200, code: -32603, id: "7",
			respond: jsonResponder(200, `{"jsonrpc":"2.0","id":7,"result":{"content":"oops"}}`)},
		{desc: "server answer is not JSON", body: mcpReadCall, upstream: 1, status: 200, code: -32603, id: "7",
			respond: jsonResponder(200, `<html>`)},
		{desc: "server answer with a duplicated result", body: mcpReadCall, upstream: 1, status: 200, code: -32603, id: "7",
			respond: jsonResponder(200, `{"jsonrpc":"2.0","id":7,"result":{"content":[]},"result":{"content":[{"type":"text","text":"x"}]}}`)},
		{desc: "server answers a call with 202", body: mcpReadCall, upstream: 1, status: 200, code: -32603, id: "7",
			respond: func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusAccepted) }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, tc.respond)
			endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, &fakePolicy{}, intercept(ahp.EventToolBefore, ahp.EventToolAfter)), nil)
			status, hdr, got := mcpPost(t, endpoint, tc.body, nil)
			if n := len(up.requests()); n != tc.upstream {
				t.Errorf("upstream received %d requests, want %d", n, tc.upstream)
			}
			v := gjson.ParseBytes(got)
			if status != tc.status || hdr.Get("Content-Type") != "application/json" || v.Get("jsonrpc").Str != "2.0" ||
				v.Get("error.code").Int() != tc.code || v.Get("id").Raw != tc.id || v.Get("error.message").Str == "" {
				t.Errorf("got %d %s", status, got)
			}
		})
	}
}

func TestMCPUpstreamRefusalPassesThrough(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		http.Error(w, "session not found", http.StatusNotFound)
	})
	policy := &fakePolicy{}
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolBefore), observe(ahp.EventToolAfter)), nil)
	status, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
	if status != 404 || string(got) != "session not found\n" {
		t.Errorf("got %d %q", status, got)
	}
	if obs := waitObserved(t, policy, ahp.EventToolAfter, 1); len(obs) != 1 || obs[0].Outcome != "error" || obs[0].Error.Class != "mcp_http" {
		t.Errorf("observations = %+v", obs)
	}
	assertValidObservations(t, policy)
}

func TestMCPUnreachableUpstream(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	endpoint := startMCPProxy(t, url+"/mcp", newTestChain(t, &fakePolicy{}, intercept(ahp.EventToolBefore)), nil)
	status, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
	if v := gjson.ParseBytes(got); status != 502 || v.Get("error.code").Int() != -32603 || v.Get("id").Raw != "7" {
		t.Errorf("got %d %s", status, got)
	}
}

func TestMCPSessionIdentity(t *testing.T) {
	tests := []struct {
		desc        string
		header      map[string]string
		want        string // "" = derived from Mcp-Session-Id
		synthesized bool
	}{
		{desc: "Mcp-Session-Id is hashed", synthesized: true},
		{desc: "X-Hookproxy-Session wins", header: map[string]string{SessionHeader: "agent-42"}, want: "agent-42"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, jsonResponder(200, mcpReadResult))
			policy := &fakePolicy{}
			endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolBefore)), nil)
			mcpPost(t, endpoint, mcpReadCall, tc.header)
			mcpPost(t, endpoint, mcpReadCall, tc.header) // a retry of the same request
			calls := policy.callsOf(ahp.EventToolBefore)
			if len(calls) != 2 {
				t.Fatalf("%d tool.before", len(calls))
			}
			s := calls[0].Event.Session
			if s == nil || s.Synthesized != tc.synthesized || (tc.want != "" && s.ID != tc.want) || strings.Contains(s.ID, "sess-secret-1") {
				t.Errorf("session = %+v", s)
			}
			if calls[0].Event.Call.ID != calls[1].Event.Call.ID || calls[0].Event.ID == calls[1].Event.ID {
				t.Errorf("call ids must be stable per (session, JSON-RPC id) and event ids fresh: %s %s", calls[0].Event.Call.ID, calls[1].Event.Call.ID)
			}
			for _, r := range up.requests() {
				if r.Header.Get(SessionHeader) != "" {
					t.Error("X-Hookproxy-Session was forwarded upstream")
				}
			}
		})
	}
}

func TestMCPParamHeadersNarrowModify(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, mcpReadResult))
	policy := &fakePolicy{}
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolBefore)), nil)
	mcpPost(t, endpoint, mcpReadCall, map[string]string{"Mcp-Param-Path": "/a"})
	calls := policy.callsOf(ahp.EventToolBefore)
	if len(calls) != 1 || calls[0].Capabilities.Has(ahp.EffectModify) || !calls[0].Capabilities.Has(ahp.EffectDeny) {
		t.Errorf("capabilities = %+v", calls[0].Capabilities)
	}
}

func TestMCPOtherMethodsPassThrough(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
			_, _ = io.WriteString(w, "id: 9\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n\n")
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, &fakePolicy{}, intercept(ahp.EventToolBefore, ahp.EventToolAfter)), nil)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, endpoint+"/", nil)
		req.Header.Set("Mcp-Session-Id", "s-1")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Last-Event-ID", "8")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch method {
		case http.MethodGet:
			if resp.StatusCode != 200 || string(b) != "id: 9\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n\n" || resp.Header.Get("Mcp-Session-Id") != "s-1" {
				t.Errorf("GET: %d %q", resp.StatusCode, b)
			}
		case http.MethodDelete:
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("DELETE: %d", resp.StatusCode)
			}
		}
	}
	for _, r := range up.requests() {
		if r.Path != "/mcp" || r.Header.Get("Mcp-Session-Id") != "s-1" || r.Header.Get("Mcp-Protocol-Version") != "2025-11-25" ||
			r.Header.Get("Last-Event-Id") != "8" || r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("%s reached the upstream as %s with %v", r.Method, r.Path, r.Header)
		}
	}
	if len(up.requests()) != 2 {
		t.Errorf("upstream received %d requests", len(up.requests()))
	}
}

func TestMCPRequestTooLarge(t *testing.T) {
	up := newUpstream(t, nil)
	cfg := mcpRouteConfig(up.URL + "/mcp")
	cfg.Limits = config.Limits{MaxRequestBytes: 64}
	for _, ch := range []bool{false, true} {
		var srv *httptest.Server
		if ch {
			srv = startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept(ahp.EventToolBefore)), Options{MCPHandler: NewMCPHandler})
		} else {
			srv = startProxy(t, cfg, nil, Options{MCPHandler: NewMCPHandler})
		}
		status, _, got := mcpPost(t, srv.URL+"/mcp/files", mcpReadCall, nil)
		if status != http.StatusRequestEntityTooLarge || gjson.GetBytes(got, "error.code").Int() != -32600 {
			t.Errorf("chain=%v: got %d %s", ch, status, got)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("upstream received %d requests", n)
	}
}

func TestMCPConnectionURL(t *testing.T) {
	cfg := mcpRouteConfig("http://127.0.0.1:1/mcp?api_key=secret#frag")
	h, err := NewMCPHandler(MCPRoute{Route: cfg.Routes[0], Upstream: "http://127.0.0.1:1/mcp?api_key=secret", Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.(*mcpHandler).connURL; got != "http://127.0.0.1:1/mcp" {
		t.Errorf("connection url = %q", got)
	}
	// Without serverId the prefix names the server.
	h, _ = NewMCPHandler(MCPRoute{Route: config.Route{Prefix: "/mcp/x/", API: config.APIMCP}, Upstream: "http://127.0.0.1:1", Transport: http.DefaultTransport})
	if got := h.(*mcpHandler).serverID; got != "/mcp/x" {
		t.Errorf("server id = %q", got)
	}
}

func TestMCPServerErrorIsObserved(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"unknown tool in session sess-secret-1"}}`
	up := newUpstream(t, jsonResponder(200, answer))
	policy := &fakePolicy{}
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolAfter), observe(ahp.EventToolAfter)), nil)
	status, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
	if status != 200 || string(got) != answer {
		t.Errorf("got %d %s", status, got)
	}
	obs := waitObserved(t, policy, ahp.EventToolAfter, 1)
	if len(obs) != 1 || obs[0].Outcome != "error" || obs[0].Error.Code != "-32602" || obs[0].Error.Class != "mcp_error" ||
		strings.Contains(obs[0].Error.Message, "sess-secret-1") {
		t.Errorf("observations = %+v", obs)
	}
	if len(policy.callsOf(ahp.EventToolAfter)) != 0 {
		t.Error("a JSON-RPC error has no result to intercept")
	}
	assertValidObservations(t, policy)
}

func TestMCPStreamFraming(t *testing.T) {
	// CRLF line endings, a result split over two data lines, an event of another type and
	// a last event without its blank line.
	tests := []struct {
		desc, stream, want string
	}{
		{desc: "CRLF and split data",
			stream: "id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"sk-live-1\"}]}}\r\n\r\n",
			want:   "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"[redacted]\"}]}}\n\n"},
		{desc: "other event types pass",
			stream: "event: ping\ndata: {}\n\ndata: " + mcpReadResult,
			want: "event: ping\ndata: {}\n\ndata: " +
				`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello [redacted]"}],"structuredContent":{"text":"hello [redacted]"}}}` + "\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := newUpstream(t, sseResponder(tc.stream))
			endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolAfter)), nil)
			_, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
			if string(got) != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestMCPStreamByteOrderMarkResultRedacted(t *testing.T) {
	// A byte-order mark before the first event: the MCP TypeScript SDK (TextDecoderStream)
	// drops it and reads the result. Control: straight to the server the secret is there.
	stream := "\ufeffdata: " + mcpReadResult + "\n\n"
	up := newUpstream(t, sseResponder(stream))
	if _, _, raw := mcpPost(t, up.URL+"/mcp", mcpReadCall, nil); !strings.Contains(string(raw), "sk-live-1") {
		t.Fatalf("control: %q", raw)
	}
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolAfter)), nil)
	status, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
	if status != 200 || strings.Contains(string(got), "sk-live-1") || !strings.Contains(string(got), "hello [redacted]") {
		t.Fatalf("%d %q", status, got)
	}
}
