package proxy

import (
	"strings"
	"testing"
)

// TestOnlyToolBeforeSkipsCallFreeResponses: with tool.before the only response-side
// subscription, a response without a tool call is forwarded byte for byte without being
// decoded (no event reaches the interceptor), while every response that holds a call —
// also one whose key is spelled with a JSON escape — is still judged, and a body that is
// not JSON is still refused as undecodable.
func TestOnlyToolBeforeSkipsCallFreeResponses(t *testing.T) {
	const ask = `{"model":"gpt-4o","messages":[{"role":"user","content":"clean up"}]}`
	// The same two calls with the key escaped and no other "tool_calls" in the body.
	escaped := strings.NewReplacer(`"tool_calls":`, `"tool\u005fcalls":`, `"finish_reason":"tool_calls"`, `"finish_reason":"stop"`).Replace(chatTwoCalls)
	for _, tc := range []struct {
		name, upstream string
		status, judged int
		forwardedAsIs  bool
	}{
		{name: "text answer", upstream: chatText, status: 200, forwardedAsIs: true},
		// A call-free body of an unexpected shape passes as it would with no subscription.
		{name: "choice without message", upstream: `{"id":"x","choices":[{"finish_reason":"stop"}]}`, status: 200, forwardedAsIs: true},
		// Controls: a call is judged (Bash denied, so the body changes), however it is spelled.
		{name: "two calls", upstream: chatTwoCalls, status: 200, judged: 2},
		{name: "escaped key", upstream: escaped, status: 200, judged: 2},
		{name: "not JSON", upstream: `{"choices":[`, status: 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, jsonResponder(200, tc.upstream))
			pol := &fakePolicy{effects: denyTool("Bash")}
			px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("tool.before")), Options{})
			status, _, got := post(t, px.URL+chatPath, ask, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, got)
			}
			if n := len(pol.callsOf("tool.before")); n != tc.judged {
				t.Fatalf("%d tool.before events, want %d", n, tc.judged)
			}
			if (string(got) == tc.upstream) != tc.forwardedAsIs {
				t.Fatalf("forwarded unchanged: %v, want %v\n%s", string(got) == tc.upstream, tc.forwardedAsIs, got)
			}
		})
	}
}
