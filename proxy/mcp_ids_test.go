package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// A server may answer request `id: 7` with an id that is the same JSON value written
// another way (7.0, 7e0) or that the MCP TypeScript SDK pairs with 7 all the same
// (Number("7"), Number("07"), Number(" 7"), Number("0x7")): every such answer is the
// call's result, so it passes tool.after. The control sends the same call straight to
// the recording upstream and gets the secret back, as a client without hookproxy would.
func TestMCPResultIDsPairByValue(t *testing.T) {
	for _, id := range []string{`7`, `7.0`, `7e0`, `70e-1`, `"7"`, `"07"`, `" 7"`, `"0x7"`} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streamed=%v", id, streamed), func(t *testing.T) {
				result := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"hello sk-live-1"}]}}`
				up := newUpstream(t, mcpAnswer(streamed, result))
				policy := redactPolicy()
				endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, policy, intercept(ahp.EventToolAfter)), nil)

				_, _, direct := mcpPost(t, up.URL+"/mcp", mcpReadCall, nil)
				if !strings.Contains(string(direct), "sk-live-1") {
					t.Fatalf("control: the upstream's answer holds no secret: %s", direct)
				}
				status, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
				if status != http.StatusOK || strings.Contains(string(got), "sk-live-1") || !strings.Contains(string(got), "hello [redacted]") {
					t.Fatalf("client got %d %s, want the redacted result", status, got)
				}
				if n := len(policy.callsOf(ahp.EventToolAfter)); n != 1 {
					t.Errorf("tool.after settled %d times, want 1", n)
				}
				assertValidIntercepts(t, policy)
			})
		}
	}
}

// A response whose id pairs with no request of the POST (an id no client sent, a second
// answer to a call already answered) is refused, not relayed; the call whose result did
// not come gets an error instead of the unchecked text.
func TestMCPUnpairedResponseIsRefused(t *testing.T) {
	tests := []struct {
		desc     string
		messages []string
	}{
		{"unknown string id", []string{`{"jsonrpc":"2.0","id":"zz","result":{"content":[{"type":"text","text":"hello sk-live-1"}]}}`}},
		// JSON.parse keeps the last of duplicate keys: a JavaScript client reads id 7.
		{"duplicate id key", []string{`{"jsonrpc":"2.0","id":"zz","id":7,"result":{"content":[{"type":"text","text":"hello sk-live-1"}]}}`}},
		{"unknown number id", []string{`{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"hello sk-live-1"}]}}`}},
		{"second answer", []string{
			`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"fine"}]}}`,
			`{"jsonrpc":"2.0","id":"7","result":{"content":[{"type":"text","text":"hello sk-live-1"}]}}`}},
	}
	for _, tc := range tests {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streamed=%v", tc.desc, streamed), func(t *testing.T) {
				up := newUpstream(t, mcpAnswer(streamed, tc.messages...))
				endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolAfter)), nil)

				_, _, direct := mcpPost(t, up.URL+"/mcp", mcpReadCall, nil)
				if !strings.Contains(string(direct), "sk-live-1") {
					t.Fatalf("control: the upstream's answer holds no secret: %s", direct)
				}
				status, _, got := mcpPost(t, endpoint, mcpReadCall, nil)
				if status != http.StatusOK || strings.Contains(string(got), "sk-live-1") {
					t.Fatalf("client got %d %s: the unpaired response was relayed", status, got)
				}
				if len(tc.messages) == 1 && !strings.Contains(string(got), `"id":7,"error"`) {
					t.Errorf("client got %s, want an error for call 7", got)
				}
				if len(tc.messages) == 2 && !strings.Contains(string(got), `"id":7,"result"`) {
					t.Errorf("client got %s, want the first answer to call 7", got)
				}
			})
		}
	}
}

// A batch keeps the responses to its other requests (tools/list here), paired by value
// too, and refuses only what answers nothing.
func TestMCPBatchPairsEveryRequest(t *testing.T) {
	batch := `[` + mcpReadCall + `,{"jsonrpc":"2.0","id":"l1","method":"tools/list"}]`
	answer := `[{"jsonrpc":"2.0","id":"l1","result":{"tools":[]}},` +
		`{"jsonrpc":"2.0","id":"l2","result":{"tools":[{"name":"sk-live-1"}]}},` +
		`{"jsonrpc":"2.0","id":7.0,"result":{"content":[{"type":"text","text":"hello sk-live-1"}]}}]`
	up := newUpstream(t, jsonResponder(200, answer))
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolAfter)), nil)
	status, _, got := mcpPost(t, endpoint, batch, nil)
	msgs := gjson.ParseBytes(got).Array()
	if status != 200 || len(msgs) != 2 || msgs[0].Get("id").String() != "l1" || msgs[1].Get("result.content.0.text").String() != "hello [redacted]" {
		t.Errorf("client got %d %s", status, got)
	}
}

// mcpAnswer answers a POST with messages: one JSON body (a batch when several), or one SSE
// message event each.
func mcpAnswer(streamed bool, messages ...string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if streamed {
			w.Header().Set("Content-Type", "text/event-stream")
			for i, m := range messages {
				_, _ = fmt.Fprintf(w, "event: message\nid: %d\ndata: %s\n\n", i, m)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if len(messages) == 1 {
			_, _ = io.WriteString(w, messages[0])
			return
		}
		_, _ = io.WriteString(w, "["+strings.Join(messages, ",")+"]")
	}
}

// On the session's GET stream no request is waiting, so a response there (a tools/call
// result sent out of band, say) is refused while tool.after is subscribed; the server's
// requests and notifications still pass. Control: the same GET straight to the upstream.
func TestMCPGetStreamRefusesResponses(t *testing.T) {
	note := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n"
	result := "event: message\nid: 2\ndata: " + mcpReadResult + "\n\n"
	ping := "event: message\nid: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"ping\"}\n\n"
	up := newUpstream(t, sseResponder(note, result, ping))
	get := func(url string) string {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", "sess-secret-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(up.URL + "/mcp"); !strings.Contains(got, "sk-live-1") {
		t.Fatalf("control: the upstream's stream holds no result: %q", got)
	}
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolAfter)), nil)
	if got := get(endpoint); got != note+ping {
		t.Errorf("client got %q, want the notification and the ping only", got)
	}
	// Without a tool.after subscription the stream is relayed untouched.
	plain := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolBefore)), nil)
	if got := get(plain); got != note+result+ping {
		t.Errorf("without tool.after the client got %q", got)
	}
}
