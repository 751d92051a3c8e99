package proxy

// onChange ask: a call of a changed tool waits for a person's decision on the approval
// path; approved it runs, denied it does not. On MCP routes with and without a tool.before
// subscription (the call is then held by the pinning step itself), and on a model route.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/pinning"
)

func TestMCPPinningAsk(t *testing.T) {
	for _, subscribed := range []bool{false, true} {
		for _, decision := range []string{approvals.DecisionApprove, approvals.DecisionDeny} {
			name := decision
			if subscribed {
				name += "/tool.before-subscribed"
			}
			t.Run(name, func(t *testing.T) {
				up := newRugServer(t)
				svc := newApprovals(t, 10*time.Second)
				pinner, _ := pinning.New(pinning.Options{OnChange: pinning.ActionAsk})
				opts := Options{MCPHandler: NewMCPHandler, Pins: pinner, Approvals: &Approvals{Service: svc, Generation: "g"}}
				if !subscribed {
					runAsk(t, up, svc, startProxy(t, mcpRouteConfig(up.url), nil, opts).URL, decision)
					return
				}
				policy := &fakePolicy{}
				srv := startProxy(t, mcpRouteConfig(up.url), newTestChain(t, policy, intercept(ahp.EventToolBefore)), opts)
				runAsk(t, up, svc, srv.URL, decision)
				if len(policy.callsOf(ahp.EventToolBefore)) == 0 {
					t.Fatal("the chain was not consulted before the hold")
				}
			})
		}
	}
}

func runAsk(t *testing.T, up *rugServer, svc *approvals.Service, base, decision string) {
	t.Helper()
	cs, changed := pinClient(t, base+"/mcp/files")
	_ = listTools(t, cs)
	rugPulls["description"](up)
	waitChanged(t, changed)
	if _, ok := listTools(t, cs)["add"]; !ok {
		t.Fatal("ask strips the changed tool from the list")
	}
	done := make(chan *mcpsdk.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
		if err != nil {
			res = &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	rec := pendingOne(t, svc)
	if rec.Tool.Name != "add" || !slices.ContainsFunc(rec.Reasons, func(r string) bool { return strings.Contains(r, "changed since it was pinned") }) {
		t.Fatalf("the held call: %+v", rec)
	}
	if slices.Contains(up.called(), "add") {
		t.Fatal("the call reached the server before the decision")
	}
	if _, err := svc.Decide(context.Background(), rec.ID, decision, "alice", "", ""); err != nil {
		t.Fatal(err)
	}
	res := <-done
	reached := slices.Contains(up.called(), "add")
	if decision == approvals.DecisionApprove && (res.IsError || !reached) {
		t.Fatalf("approved: isError=%v reached=%v %q", res.IsError, reached, mcpText(res))
	}
	if decision == approvals.DecisionDeny && (!res.IsError || reached) {
		t.Fatalf("denied: isError=%v reached=%v %q", res.IsError, reached, mcpText(res))
	}
}

func TestModelPinningAsk(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatAddSub))
	svc := newApprovals(t, 10*time.Second)
	policy := &fakePolicy{}
	pinner, _ := pinning.New(pinning.Options{OnChange: pinning.ActionAsk})
	srv := startProxy(t, testConfig(up.URL), newTestChain(t, policy, intercept(ahp.EventToolBefore)),
		Options{Pins: pinner, Approvals: &Approvals{Service: svc, Generation: "g"}})
	h := map[string]string{AgentHeader: "calc"}
	post(t, srv.URL+chatPath, chatWithTools(pinAddOrig, pinSub), h)
	done := make(chan []byte, 1)
	go func() {
		_, _, body := post(t, srv.URL+chatPath, chatWithTools(pinAddChanged, pinSub), h)
		done <- body
	}()
	rec := pendingOne(t, svc)
	if rec.Tool.Name != "add" {
		t.Fatalf("held %q", rec.Tool.Name)
	}
	if _, err := svc.Decide(context.Background(), rec.ID, approvals.DecisionDeny, "alice", "", ""); err != nil {
		t.Fatal(err)
	}
	if calls := calledTools(<-done); !slices.Equal(calls, []string{"sub"}) {
		t.Fatalf("denied: the agent got calls %v", calls)
	}
}
