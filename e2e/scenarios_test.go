package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// cell is one row of a scenario table: a provider, a mode and how the backend is reached.
type cell struct {
	desc    string
	p       provider
	stream  bool
	backend backendKind
}

// matrix is every provider in both modes, times the given backend kinds (default: HTTP).
func matrix(kinds ...backendKind) []cell {
	if len(kinds) == 0 {
		kinds = []backendKind{viaHTTP}
	}
	var out []cell
	for _, p := range providers {
		for _, stream := range []bool{false, true} {
			for _, k := range kinds {
				out = append(out, cell{desc: fmt.Sprintf("%s/%s/%s", p.name, modeName(stream), k), p: p, stream: stream, backend: k})
			}
		}
	}
	return out
}

// Scenario 1: with no subscription matching, the upstream receives exactly the bytes the SDK
// sent, and the SDK reads exactly the bytes the upstream answered.
func TestPassThroughIsByteIdentical(t *testing.T) {
	for _, tc := range matrix() {
		for _, hooked := range []bool{false, true} {
			desc := tc.desc + "/no-registration"
			if hooked {
				desc = tc.desc + "/subscribed-elsewhere"
			}
			t.Run(desc, func(t *testing.T) {
				t.Parallel()
				p := tc.p

				// The same call straight to an upstream: what the SDK sends without the proxy.
				direct := newUpstream(t, p.text)
				if _, err := p.send(withTimeout(t), direct.URL, newRecorder(t), convPrompt, tc.stream); err != nil {
					t.Fatalf("direct call: %v", err)
				}
				want := direct.only(t).Body

				up := newUpstream(t, p.text)
				var hooks []map[string]any
				var b ahpBackend
				if hooked {
					// tool.after only: this request carries no tool result, so nothing matches.
					var entry map[string]any
					entry, b = newBackend(t, viaHTTP, "deny-request", "tool.after")
					hooks = append(hooks, entry)
				}
				px := startProxy(t, up, hooks...)
				rec := newRecorder(t)
				res, err := p.send(withTimeout(t), px+p.prefix, rec, convPrompt, tc.stream)
				if err != nil {
					t.Fatalf("through the proxy: %v", err)
				}
				got := up.only(t)
				assertBytesEqual(t, "upstream request body vs the SDK's direct request", got.Body, want)
				assertBytesEqual(t, "upstream request body vs what the SDK sent the proxy", got.Body, rec.only(t))
				if got.Path != p.upstreamPath {
					t.Errorf("upstream path %q, want %q", got.Path, p.upstreamPath)
				}
				if h := got.Header.Get("Authorization") + got.Header.Get("X-Api-Key"); !strings.Contains(h, p.key) {
					t.Errorf("client credential did not reach the upstream (headers %v)", got.Header)
				}
				assertBytesEqual(t, "response bytes the SDK read vs what the upstream wrote", rec.received(), up.sent())
				if res.Text != "Hello from upstream." || len(res.Calls) != 0 {
					t.Errorf("SDK result %+v", res)
				}
				if b != nil {
					if frames := b.Frames(t); len(frames) != 0 {
						t.Errorf("backend called %d times without a matching subscription", len(frames))
					}
				}
			})
		}
	}
}

// Scenario 2: deny at model.request.before is the SDK's own 403 permission error carrying the
// reason (and, on OpenAI, the code); the upstream is never called.
func TestDenyAtModelRequestBefore(t *testing.T) {
	for _, tc := range matrix(viaHTTP, viaStdio) {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := newBackend(t, tc.backend, "deny-request", "model.request.before")
			px := startProxy(t, up, entry)

			_, err := p.send(withTimeout(t), px+p.prefix, newRecorder(t), convPrompt, tc.stream)
			e, ok := p.asAPIError(err)
			if !ok {
				t.Fatalf("want the SDK's API error, got %T %v", err, err)
			}
			assertDenied(t, p, e, denyReason, denyCode)
			if n := len(up.requests()); n != 0 {
				t.Errorf("upstream called %d times after a deny", n)
			}
			frames := assertFrames(t, b, p.key)
			if ev := eventsOf(frames); len(ev) != 1 || ev[0] != "model.request.before" {
				t.Errorf("backend events %v, want [model.request.before]", ev)
			}
		})
	}
}

// assertDenied checks a refusal in the provider's own error format.
func assertDenied(t *testing.T, p provider, e apiError, reason, code string) {
	t.Helper()
	if e.Status != http.StatusForbidden {
		t.Errorf("status %d, want 403", e.Status)
	}
	if !strings.Contains(e.Message, reason) {
		t.Errorf("error message %q does not carry %q", e.Message, reason)
	}
	switch p.name {
	case "openai":
		if e.Type != "policy_denied" || e.Code != code {
			t.Errorf("openai error type %q code %q, want policy_denied %q", e.Type, e.Code, code)
		}
	case "anthropic":
		if e.Type != "permission_error" {
			t.Errorf("anthropic error type %q, want permission_error", e.Type)
		}
	}
}

// Scenario 3: modify(request) replaces the message list; the upstream never sees the secret
// and everything else — other messages, parameters, unknown members — is what the SDK sent.
func TestModifyRequestRemovesSecret(t *testing.T) {
	for _, tc := range matrix(viaHTTP, viaStdio) {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := newBackend(t, tc.backend, "redact", "model.request.before")
			px := startProxy(t, up, entry)
			rec := newRecorder(t)

			res, err := p.send(withTimeout(t), px+p.prefix, rec, convPrompt, tc.stream)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			got := string(up.only(t).Body)
			mustNotContain(t, "upstream body", got, secret)
			mustContain(t, "upstream body", got, "Deploy with key "+redacted+" please.",
				systemText, earlierText, answerText, unknownFieldJSON)
			want := strings.ReplaceAll(string(rec.only(t)), secret, redacted)
			assertJSONEqual(t, "upstream body vs the SDK's body with the secret replaced", []byte(got), []byte(want))
			if res.Text != "Hello from upstream." {
				t.Errorf("SDK result %+v", res)
			}
			frames := assertFrames(t, b, p.key)
			if ev := eventsOf(frames); len(ev) != 1 || ev[0] != "model.request.before" {
				t.Errorf("backend events %v", ev)
			}
		})
	}
}

// Scenario 4: inject now — the upstream sees the added message after the conversation.
func TestInjectNowReachesUpstream(t *testing.T) {
	for _, tc := range matrix() {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := newBackend(t, tc.backend, "inject-now", "model.request.before")
			px := startProxy(t, up, entry)

			res, err := p.send(withTimeout(t), px+p.prefix, newRecorder(t), convPrompt, tc.stream)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			got := string(up.only(t).Body)
			mustContain(t, "upstream body", got, injectedText, systemText, earlierText, answerText, promptText, unknownFieldJSON)
			if i, j := strings.Index(got, promptText), strings.Index(got, injectedText); i < 0 || j < i {
				t.Errorf("injected message is not after the prompt:\n%s", got)
			}
			if res.Text != "Hello from upstream." {
				t.Errorf("SDK result %+v", res)
			}
			assertFrames(t, b, p.key)
		})
	}
}

// Scenario 5: return — the upstream is not called and the SDK gets the supplied answer, as
// JSON or as a synthesized stream in the provider's format.
func TestReturnSuppliesAnswer(t *testing.T) {
	for _, tc := range matrix() {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := newBackend(t, tc.backend, "return", "model.request.before")
			px := startProxy(t, up, entry)

			res, err := p.send(withTimeout(t), px+p.prefix, newRecorder(t), convPrompt, tc.stream)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			if res.Text != suppliedText || len(res.Calls) != 0 {
				t.Errorf("SDK result %+v, want the supplied text %q", res, suppliedText)
			}
			if n := len(up.requests()); n != 0 {
				t.Errorf("upstream called %d times despite a supplied result", n)
			}
			assertFrames(t, b, p.key)
		})
	}
}

// Scenario 6: tool.before deny — the client never sees the denied call, the other is kept.
func TestToolBeforeDenyRemovesCall(t *testing.T) {
	for _, tc := range matrix(viaHTTP, viaStdio) {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.calls)
			entry, b := newBackend(t, tc.backend, "deny-bash", "tool.before")
			px := startProxy(t, up, entry)
			rec := newRecorder(t)

			res, err := p.send(withTimeout(t), px+p.prefix, rec, convPrompt, tc.stream)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			if len(res.Calls) != 1 || res.Calls[0].Name != "Read" || !sameJSON(res.Calls[0].Args, `{"path":"README.md"}`) {
				t.Errorf("SDK tool calls %+v, want only Read(README.md)", res.Calls)
			}
			// Not in the result, and not anywhere in the bytes the client read either: a
			// streamed delta of the denied call (its id or arguments) would be a leak. The
			// proxy may name the blocked tool in a notice text; that is not the call.
			mustNotContain(t, "bytes the SDK read", string(rec.received()), "rm -rf", "call_bash", "toolu_bash")
			if p.name == "anthropic" && !strings.HasPrefix(res.Text, "Cleaning up.") {
				t.Errorf("assistant text %q lost", res.Text)
			}
			frames := assertFrames(t, b, p.key)
			var tools []string
			for _, f := range frames {
				tools = append(tools, gjson.GetBytes(f, "params.event.type").String()+":"+gjson.GetBytes(f, "params.event.tool.name").String())
			}
			if strings.Join(tools, ",") != "tool.before:Bash,tool.before:Read" {
				t.Errorf("backend events %v, want one tool.before per call, in order", tools)
			}
		})
	}
}

// Scenario 7: modify(input) — the SDK sees the rewritten arguments of the call.
func TestToolBeforeModifyInput(t *testing.T) {
	for _, tc := range matrix() {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.calls)
			entry, b := newBackend(t, tc.backend, "rewrite-bash", "tool.before")
			px := startProxy(t, up, entry)
			rec := newRecorder(t)

			res, err := p.send(withTimeout(t), px+p.prefix, rec, convPrompt, tc.stream)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			if len(res.Calls) != 2 {
				t.Fatalf("SDK tool calls %+v, want both", res.Calls)
			}
			if c := res.Calls[0]; c.Name != "Bash" || !sameJSON(c.Args, `{"command":"`+rewrittenCmd+`"}`) {
				t.Errorf("Bash call %+v, want arguments rewritten to %q", c, rewrittenCmd)
			}
			if c := res.Calls[1]; c.Name != "Read" || !sameJSON(c.Args, `{"path":"README.md"}`) {
				t.Errorf("Read call %+v changed", c)
			}
			mustNotContain(t, "bytes the SDK read", string(rec.received()), "rm -rf")
			assertFrames(t, b, p.key)
		})
	}
}

// Scenario 8: tool.after modify(output) — the upstream sees the rewritten tool result.
func TestToolAfterModifyOutput(t *testing.T) {
	for _, tc := range matrix(viaHTTP, viaStdio) {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := newBackend(t, tc.backend, "redact", "tool.after")
			px := startProxy(t, up, entry)
			rec := newRecorder(t)

			res, err := p.send(withTimeout(t), px+p.prefix, rec, convToolResult, tc.stream)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			got := string(up.only(t).Body)
			mustNotContain(t, "upstream body", got, secret)
			mustContain(t, "upstream body", got, "secrets.txt holds "+redacted, toolAskText, unknownFieldJSON)
			want := strings.ReplaceAll(string(rec.only(t)), secret, redacted)
			assertJSONEqual(t, "upstream body vs the SDK's body with the tool result rewritten", []byte(got), []byte(want))
			if res.Text != "Hello from upstream." {
				t.Errorf("SDK result %+v", res)
			}
			frames := assertFrames(t, b, p.key)
			if ev := eventsOf(frames); len(ev) != 1 || ev[0] != "tool.after" {
				t.Errorf("backend events %v, want [tool.after]", ev)
			}
		})
	}
}

// hangTimeout is the deadline of the hanging backend's subscription; a refusal or a
// forward must come within hangTimeout plus a generous allowance for a loaded machine.
const (
	hangingID   = "com.example.e2e.hanging"
	hangTimeout = 300 * time.Millisecond
	hangSlack   = 2 * time.Second
)

func hangingHook(t testing.TB, policy string) (map[string]any, *hangingBackend) {
	t.Helper()
	b := newHangingBackend(t)
	return hookEntry(hangingID, map[string]any{"type": "http", "url": b.endpoint()},
		subscription{events: []string{"model.request.before"}, timeoutMs: int(hangTimeout / time.Millisecond), failurePolicy: policy}), b
}

// Scenario 9: fail-closed with the backend hanging — a 403 refusal with code
// hookproxy.fail_closed naming the backend, within the deadline; the upstream is not called.
func TestFailClosedWhenBackendHangs(t *testing.T) {
	for _, tc := range matrix() {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := hangingHook(t, "fail-closed")
			px := startProxy(t, up, entry)

			start := time.Now()
			_, err := p.send(withTimeout(t), px+p.prefix, newRecorder(t), convPrompt, tc.stream)
			elapsed := time.Since(start)
			e, ok := p.asAPIError(err)
			if !ok {
				t.Fatalf("want the SDK's API error, got %T %v", err, err)
			}
			assertDenied(t, p, e, hangingID, "hookproxy.fail_closed")
			if elapsed > hangTimeout+hangSlack {
				t.Errorf("refusal took %v, deadline %v", elapsed, hangTimeout)
			}
			if n := len(up.requests()); n != 0 {
				t.Errorf("upstream called %d times after a fail-closed failure", n)
			}
			if frames := assertFrames(t, b, p.key); len(frames) == 0 {
				t.Error("the hanging backend was never called")
			}
		})
	}
}

// Scenario 10: fail-open with the backend hanging — the request is forwarded untouched.
func TestFailOpenWhenBackendHangs(t *testing.T) {
	for _, tc := range matrix() {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			up := newUpstream(t, p.text)
			entry, b := hangingHook(t, "fail-open")
			px := startProxy(t, up, entry)
			rec := newRecorder(t)

			start := time.Now()
			res, err := p.send(withTimeout(t), px+p.prefix, rec, convPrompt, tc.stream)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("SDK call: %v", err)
			}
			if res.Text != "Hello from upstream." {
				t.Errorf("SDK result %+v", res)
			}
			assertBytesEqual(t, "upstream body vs what the SDK sent", up.only(t).Body, rec.only(t))
			if elapsed > hangTimeout+hangSlack {
				t.Errorf("forward took %v, deadline %v", elapsed, hangTimeout)
			}
			if frames := assertFrames(t, b, p.key); len(frames) == 0 {
				t.Error("the hanging backend was never called")
			}
		})
	}
}

// Scenario 11: pass-through streaming delivers the first event while the upstream still
// holds the rest. The upstream writes its first event and blocks on a gate that only the
// client opens, after the SDK has produced that event: had the proxy buffered the stream,
// the SDK could never see it (the call would run into its bound instead). No timing is
// measured.
func TestPassThroughStreamDeliversFirstEventEarly(t *testing.T) {
	for _, p := range providers {
		for _, hooked := range []bool{false, true} {
			desc := p.name + "/no-registration"
			if hooked {
				desc = p.name + "/request-side-interceptor"
			}
			t.Run(desc, func(t *testing.T) {
				t.Parallel()
				gate := make(chan struct{})
				var once sync.Once
				open := func() { once.Do(func() { close(gate) }) }
				t.Cleanup(open) // never leave the upstream handler blocked

				up := newUpstream(t, answer{sse: p.text.sse, gate: gate})
				var hooks []map[string]any
				var b ahpBackend
				if hooked {
					// A request-side interceptor with no effect must not hold the response.
					var entry map[string]any
					entry, b = newBackend(t, viaHTTP, "none", "model.request.before")
					hooks = append(hooks, entry)
				}
				px := startProxy(t, up, hooks...)
				rec := newRecorder(t)

				var sentAtFirst []byte
				first, res, err := p.streamFirst(withTimeout(t), px+p.prefix, rec, func() {
					sentAtFirst = up.sent() // the upstream is still blocked on the gate here
					open()
				})
				if err != nil {
					t.Fatalf("stream: %v (the first event did not arrive while the upstream held the rest?)", err)
				}
				if string(sentAtFirst) != p.text.sse[0] {
					t.Fatalf("when the SDK had its first event the upstream had sent %q, want only its first event", sentAtFirst)
				}
				if !strings.Contains(p.text.sse[0], strings.TrimSpace(first)) {
					t.Errorf("first SDK event %s is not the upstream's first event %q", first, p.text.sse[0])
				}
				if res.Text != "Hello from upstream." {
					t.Errorf("accumulated text %q", res.Text)
				}
				assertBytesEqual(t, "stream bytes the SDK read vs what the upstream wrote", rec.received(), up.sent())
				if b != nil {
					frames := assertFrames(t, b, p.key)
					if ev := eventsOf(frames); len(ev) != 1 || ev[0] != "model.request.before" {
						t.Errorf("backend events %v", ev)
					}
				}
			})
		}
	}
}
