package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
)

// askAndRedact asks about every call at tool.before and redacts the secret read_file
// returns at tool.after: the approved call's answer must still pass the response side.
func askAndRedact() *fakePolicy {
	return &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		switch ev.Type {
		case ahp.EventToolBefore:
			return []ahp.Effect{{Type: ahp.EffectAsk}}
		case ahp.EventToolAfter:
			msgs := make([]ahp.Message, len(ev.Items))
			for i, m := range ev.Items {
				msgs[i] = ahp.Message{ID: m.ID, Role: m.Role, Synthesized: m.Synthesized}
				for _, part := range m.Parts {
					if part.Text != nil {
						part = setPartText(part, strings.ReplaceAll(*part.Text, "sk-live-0123456789", "[redacted]"))
					}
					msgs[i].Parts = append(msgs[i].Parts, part)
				}
			}
			b, _ := json.Marshal(msgs)
			return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetOutput, Operation: ahp.OpReplace, Value: b}}
		}
		return nil
	}}
}

// An MCP tools/call held for approval, from the official Go SDK client: with a
// progressToken the client hears notifications/progress while the call waits (the test
// decides only after it has seen them), then the answer on the same stream, checked by
// tool.after as always; without one it hears nothing until the answer; denied, it gets
// the denial. The server runs only the approved calls. Both server answer forms (SSE and
// JSON) are covered.
func TestMCPHeldCallReportsProgress(t *testing.T) {
	saved := approvalKeepAlive
	approvalKeepAlive = 20 * time.Millisecond
	t.Cleanup(func() { approvalKeepAlive = saved })
	for _, jsonResponse := range []bool{false, true} {
		t.Run(map[bool]string{false: "sse-server", true: "json-server"}[jsonResponse], func(t *testing.T) {
			files := newMCPFiles(t, jsonResponse)
			svc := newApprovals(t, time.Minute)
			log := &auditLog{}
			pol := askAndRedact()
			px := startProxy(t, mcpRouteConfig(files.url), newTestChain(t, pol, intercept("tool.before", "tool.after")),
				Options{MCPHandler: NewMCPHandler, Auditor: log.auditor(), Approvals: &Approvals{Service: svc, Generation: "g"}})
			progress := make(chan *mcpsdk.ProgressNotificationParams, 1000)
			cs := mcpConnect(t, px.URL+"/mcp/files", "", &mcpsdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
					progress <- req.Params
				}})
			call := func(tool, path string, token any) <-chan *mcpsdk.CallToolResult {
				done := make(chan *mcpsdk.CallToolResult, 1)
				p := &mcpsdk.CallToolParams{Name: tool, Arguments: map[string]any{"path": path}}
				if token != nil {
					p.SetProgressToken(token)
				}
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					res, err := cs.CallTool(ctx, p)
					if err != nil {
						t.Errorf("CallTool %s: %v", tool, err)
					}
					done <- res
				}()
				return done
			}
			// waitProgress returns the next n notifications of the hold.
			waitProgress := func(n int) []*mcpsdk.ProgressNotificationParams {
				var got []*mcpsdk.ProgressNotificationParams
				timeout := time.After(10 * time.Second)
				for len(got) < n {
					select {
					case p := <-progress:
						if p.Message == approvalProgressMessage {
							got = append(got, p)
						}
					case <-timeout:
						t.Fatalf("%d of %d progress notifications while held", len(got), n)
					}
				}
				return got
			}
			decide := func(decision, reason string) {
				rec := pendingOne(t, svc)
				if _, err := svc.Decide(context.Background(), rec.ID, decision, "alice", reason, ""); err != nil {
					t.Fatal(err)
				}
			}

			// Approved, with a progressToken.
			done := call("read_file", "/a", "tok-1")
			got := waitProgress(3)
			if n := len(files.received()); n != 0 {
				t.Fatalf("the server was called before the decision: %v", files.received())
			}
			for i, p := range got {
				if p.ProgressToken != "tok-1" || (i > 0 && p.Progress <= got[i-1].Progress) {
					t.Fatalf("notification %d: %+v (previous %+v)", i, p, got[max(i-1, 0)])
				}
			}
			decide(approvals.DecisionApprove, "")
			res := <-done
			if res == nil || res.IsError || !strings.Contains(mcpText(res), "[redacted]") || strings.Contains(mcpText(res), "sk-live") {
				t.Fatalf("approved call: %+v", res)
			}
			if r := files.received(); len(r) != 1 || r[0] != (mcpToolCall{"read_file", "/a"}) {
				t.Fatalf("server received %v", r)
			}
			befores, afters := log.of(ahp.EventToolBefore), log.of(ahp.EventToolAfter)
			if len(befores) != 1 || befores[0].Approval == nil || befores[0].Approval.Decision != "approved" ||
				befores[0].Enforcement != enforcement.Forwarded || len(afters) != 1 || afters[0].Enforcement != enforcement.Rewritten {
				t.Fatalf("audit: before %+v after %+v", befores, afters)
			}

			// The control: no progressToken, no notifications, the same answer.
			for len(progress) > 0 {
				<-progress
			}
			done = call("read_file", "/b", nil)
			pendingOne(t, svc)
			time.Sleep(10 * approvalKeepAlive) // ticks would have been sent by now
			decide(approvals.DecisionApprove, "")
			if res := <-done; res == nil || res.IsError || !strings.Contains(mcpText(res), "[redacted]") {
				t.Fatalf("approved call without a token: %+v", res)
			}
			// Only the hold's own notifications count: the server's "reading" of the first
			// call may still be on its way.
			for len(progress) > 0 {
				if p := <-progress; p.Message == approvalProgressMessage {
					t.Fatalf("a progress notification without a progressToken: %+v", p)
				}
			}

			// Denied, with an integer progressToken: the denial comes on the stream.
			done = call("delete_file", "/srv/keep.db", 7)
			if p := waitProgress(1)[0]; p.ProgressToken != 7 && p.ProgressToken != float64(7) && p.ProgressToken != int64(7) {
				t.Fatalf("token %#v", p.ProgressToken)
			}
			decide(approvals.DecisionDeny, "not today")
			res = <-done
			if res == nil || !res.IsError || !strings.Contains(mcpText(res), "denied by alice: not today") {
				t.Fatalf("denied call: %+v", res)
			}
			if r := files.received(); len(r) != 2 {
				t.Fatalf("the denied call reached the server: %v", r)
			}
		})
	}
}

// The wire form of a held call, from a plain HTTP client: the stream starts with a
// progress notification carrying the client's token, and the server's answer follows as
// one message event, whatever form it had (a JSON result, or an HTTP error without a
// JSON-RPC answer, which becomes an error for the call's id). A client that does not
// accept SSE gets JSON as before.
func TestMCPHeldCallWire(t *testing.T) {
	const callBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/x"},"_meta":{"progressToken":"t-9"}}}`
	const result = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"deleted /x"}]}}`
	for _, tc := range []struct {
		name, accept string
		status       int
		upstream     string
		wantCT       string
		want         string
	}{
		{"sse", "application/json, text/event-stream", 200, result, "text/event-stream", "event: message\ndata: " + result + "\n\n"},
		{"sse-upstream-error", "application/json, text/event-stream", 404, "session not found", "text/event-stream",
			`"id":1,"error":{"code":-32603,"message":"hookproxy: the MCP server answered HTTP 404"`},
		{"json-only-client", "application/json", 200, result, "application/json", result},
		{"sse-refused-q0", "application/json, text/event-stream;q=0", 200, result, "application/json", result},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if tc.status != 200 {
					http.Error(w, tc.upstream, tc.status)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.upstream)
			})
			svc := newApprovals(t, time.Minute)
			pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect { return []ahp.Effect{{Type: ahp.EffectAsk}} }}
			px := startProxy(t, mcpRouteConfig(up.URL), newTestChain(t, pol, intercept("tool.before")),
				Options{MCPHandler: NewMCPHandler, Approvals: &Approvals{Service: svc, Generation: "g"}})
			type answer struct {
				resp *http.Response
				err  error
			}
			done := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, px.URL+"/mcp/files", strings.NewReader(callBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", tc.accept)
				resp, err := http.DefaultClient.Do(req)
				done <- answer{resp, err}
			}()
			rec := pendingOne(t, svc)
			var r *bufio.Reader
			var a answer
			if strings.Contains(tc.wantCT, "event-stream") {
				// The headers and the first notification arrive while the call is held.
				a = <-done
				if a.err != nil {
					t.Fatal(a.err)
				}
				defer a.resp.Body.Close()
				r = bufio.NewReader(a.resp.Body)
				head := streamUntil(t, r, "\n\n")
				if want := "event: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-9","progress":1,"message":"waiting for approval"}}` + "\n\n"; head != want {
					t.Fatalf("first event %q, want %q", head, want)
				}
			}
			if _, err := svc.Decide(context.Background(), rec.ID, approvals.DecisionApprove, "alice", "", ""); err != nil {
				t.Fatal(err)
			}
			if r == nil {
				a = <-done
				if a.err != nil {
					t.Fatal(a.err)
				}
				defer a.resp.Body.Close()
				r = bufio.NewReader(a.resp.Body)
			}
			rest, _ := io.ReadAll(r)
			if ct := a.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantCT) || a.resp.StatusCode != 200 {
				t.Fatalf("status %d Content-Type %q, want %q", a.resp.StatusCode, ct, tc.wantCT)
			}
			if !strings.Contains(string(rest), tc.want) || strings.Contains(string(rest), "session not found") {
				t.Fatalf("answer %q, want %q", rest, tc.want)
			}
			if n := len(up.requests()); n != 1 {
				t.Fatalf("upstream saw %d requests", n)
			}
		})
	}
}
