package proxy

// End-to-end tests of MCP routes: the official MCP Go SDK on both sides (a real server
// served over Streamable HTTP, a real client), the real hookproxy server between them, and
// real AHP backends (a loopback HTTP backend, and in-process policies).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// mcpFiles is a real MCP server with two tools, read_file and delete_file, that records
// every call its tools receive and the Mcp-Session-Id values it hands out.
type mcpFiles struct {
	url string // the MCP endpoint, with a query that stands in for a secret

	mu       sync.Mutex
	calls    []mcpToolCall
	sessions []string
}

type mcpToolCall struct {
	Tool string
	Path string
}

type mcpPathArgs struct {
	Path string `json:"path" jsonschema:"the file path"`
}

type mcpFileContent struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// mcpSecretContent is what read_file returns: a policy redacts it in the modify(output)
// scenario.
const mcpSecretContent = "api_key=sk-live-0123456789"

func newMCPFiles(t *testing.T, jsonResponse bool) *mcpFiles {
	t.Helper()
	f := &mcpFiles{}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "files", Version: "1.0.0"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "read_file", Description: "Read a file."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, in mcpPathArgs) (*mcpsdk.CallToolResult, mcpFileContent, error) {
			f.record("read_file", in.Path)
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "reading"})
			}
			return nil, mcpFileContent{Path: in.Path, Content: mcpSecretContent}, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "delete_file", Description: "Delete a file."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in mcpPathArgs) (*mcpsdk.CallToolResult, any, error) {
			f.record("delete_file", in.Path)
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{JSONResponse: jsonResponse})
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			f.mu.Lock()
			f.sessions = append(f.sessions, id)
			f.mu.Unlock()
		}
	}))
	ts := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(ts.Close)
	f.url = ts.URL + "/mcp?key=upstream-secret"
	return f
}

func (f *mcpFiles) record(tool, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, mcpToolCall{Tool: tool, Path: path})
}

func (f *mcpFiles) received() []mcpToolCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mcpToolCall(nil), f.calls...)
}

func (f *mcpFiles) sessionIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sessions...)
}

// mcpRouteConfig routes /mcp/files to upstream as an MCP server with id "files".
func mcpRouteConfig(upstream string) *config.Config {
	return &config.Config{Source: "urn:hookproxy:test", Routes: []config.Route{
		{Prefix: "/mcp/files", API: config.APIMCP, Upstream: upstream, ServerID: "files"},
	}}
}

// startMCPProxy runs hookproxy in front of upstream and returns the MCP endpoint a client
// uses (http://LISTEN/mcp/files).
func startMCPProxy(t *testing.T, upstream string, ch *chain.Chain, auditor Auditor) string {
	t.Helper()
	srv := startProxy(t, mcpRouteConfig(upstream), ch, Options{MCPHandler: NewMCPHandler, Auditor: auditor})
	return srv.URL + "/mcp/files"
}

// mcpConnect connects the official client to endpoint. protocol "" is the SDK's default.
func mcpConnect(t *testing.T, endpoint, protocol string, opts *mcpsdk.ClientOptions) *mcpsdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "agent", Version: "1.0.0"}, opts)
	cs, err := c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connect through %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func mcpCall(t *testing.T, cs *mcpsdk.ClientSession, params *mcpsdk.CallToolParams) *mcpsdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("CallTool %s: %v", params.Name, err)
	}
	return res
}

func mcpText(res *mcpsdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ahpHTTPBackend is a real AHP backend on loopback HTTP: it answers hooks/intercept with
// scripted effects and records every frame it receives.
type ahpHTTPBackend struct {
	*httptest.Server
	effects func(ev *ahp.Event) []ahp.Effect

	mu         sync.Mutex
	intercepts []json.RawMessage // whole hooks/intercept frames
	observes   []json.RawMessage // whole hooks/observe frames
}

func newAHPHTTPBackend(t *testing.T, effects func(ev *ahp.Event) []ahp.Effect) *ahpHTTPBackend {
	t.Helper()
	b := &ahpHTTPBackend{effects: effects}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		frame, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Event *ahp.Event `json:"event"`
			} `json:"params"`
		}
		if err := json.Unmarshal(frame, &req); err != nil {
			http.Error(w, "bad frame", http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		if req.Method == ahp.MethodObserve {
			b.observes = append(b.observes, frame)
			b.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		b.intercepts = append(b.intercepts, frame)
		b.mu.Unlock()
		res := ahp.NoEffects()
		if b.effects != nil && req.Params.Event != nil {
			if effs := b.effects(req.Params.Event); effs != nil {
				res.Effects = effs
			}
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": res})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *ahpHTTPBackend) frames() (intercepts, observes []json.RawMessage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]json.RawMessage(nil), b.intercepts...), append([]json.RawMessage(nil), b.observes...)
}

// chain registers the backend (intercept tool.before and tool.after, fail closed; observe
// tool.after).
func (b *ahpHTTPBackend) chain(t *testing.T) *chain.Chain {
	t.Helper()
	return newHTTPBackendChain(t, "policy-http", b.URL)
}

func newHTTPBackendChain(t *testing.T, id, url string) *chain.Chain {
	t.Helper()
	doc := &registration.Document{ProtocolVersion: ahp.ProtocolVersion, Hooks: []registration.Backend{{
		ID:        id,
		Transport: registration.Transport{Type: registration.TransportHTTP, URL: url},
		Subscriptions: []registration.Subscription{
			{Events: []string{ahp.EventToolBefore, ahp.EventToolAfter}, Mode: registration.ModeIntercept,
				TimeoutMs: 5000, FailurePolicy: registration.FailClosed, Content: map[string]string{"default": "body"}},
			{Events: []string{ahp.EventToolAfter}, Mode: registration.ModeObserve, Content: map[string]string{"default": "body"}},
		},
	}}}
	ch, err := chain.New(doc, chain.Options{Source: "urn:hookproxy:test", ObserveTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("chain.New: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// frameEvent decodes the event of a hooks/intercept or hooks/observe frame, keeping its
// raw JSON for schema validation.
func frameEvent(t *testing.T, frame json.RawMessage) (json.RawMessage, *ahp.Event) {
	t.Helper()
	var f struct {
		Params struct {
			Event json.RawMessage `json:"event"`
		} `json:"params"`
	}
	if err := json.Unmarshal(frame, &f); err != nil {
		t.Fatalf("frame: %v", err)
	}
	var ev ahp.Event
	if err := json.Unmarshal(f.Params.Event, &ev); err != nil {
		t.Fatalf("event: %v", err)
	}
	return f.Params.Event, &ev
}

// validateToolEvent checks a tool event against its own schema (read from ../shared).
func validateToolEvent(t *testing.T, raw json.RawMessage, typ string) {
	t.Helper()
	schema := map[string]string{ahp.EventToolBefore: "tool-before.schema.json", ahp.EventToolAfter: "tool-after.schema.json"}[typ]
	if schema == "" {
		t.Fatalf("no schema for %s", typ)
	}
	if err := ahptest.ValidIfAvailable(t, schema, raw); err != nil {
		t.Errorf("%s is not valid against %s: %v\n%s", typ, schema, err, raw)
	}
}

// mcpAuditLog records the Auditor's boundary records.
type mcpAuditLog struct {
	mu   sync.Mutex
	recs []BoundaryRecord
}

func (a *mcpAuditLog) OnBoundary(_ context.Context, rec BoundaryRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, rec)
}

func (a *mcpAuditLog) records() []BoundaryRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]BoundaryRecord(nil), a.recs...)
}

// mcpServerModes are the two ways a Streamable HTTP server answers a POST; mcpProtocols
// the protocol versions a client may speak ("" = the SDK's newest).
var (
	mcpServerModes = []struct {
		name string
		json bool
	}{{"sse", false}, {"json", true}}
	mcpProtocols = []string{"", "2025-11-25", "2025-06-18"}
)

// forEachMCPMode runs fn for every server answer mode and client protocol version.
func forEachMCPMode(t *testing.T, fn func(t *testing.T, jsonResponse bool, protocol string)) {
	for _, m := range mcpServerModes {
		for _, p := range mcpProtocols {
			name := m.name + "/" + p
			if p == "" {
				name = m.name + "/default"
			}
			t.Run(name, func(t *testing.T) { fn(t, m.json, p) })
		}
	}
}

func TestMCPEndToEndPassThrough(t *testing.T) {
	forEachMCPMode(t, func(t *testing.T, jsonResponse bool, protocol string) {
		files := newMCPFiles(t, jsonResponse)
		endpoint := startMCPProxy(t, files.url, nil, nil) // nothing registered: plain proxy
		cs := mcpConnect(t, endpoint, protocol, nil)
		direct := mcpConnect(t, files.url, protocol, nil)

		ctx := context.Background()
		viaProxy, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("ListTools through the proxy: %v", err)
		}
		want, err := direct.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(viaProxy.Tools)
		exp, _ := json.Marshal(want.Tools)
		if string(got) != string(exp) {
			t.Errorf("tools/list differs through the proxy:\n got %s\nwant %s", got, exp)
		}
		res := mcpCall(t, cs, &mcpsdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/a"}})
		if res.IsError || !strings.Contains(mcpText(res), mcpSecretContent) {
			t.Errorf("read_file through the proxy = %+v", res)
		}
	})
}

// TestMCPEndToEndPolicies: every tool.before/tool.after event the proxy builds from MCP
// traffic is valid against its own schema (AHP-TB-001).
func TestMCPEndToEndPolicies(t *testing.T) {
	type scenario struct {
		desc    string
		tool    string
		path    string
		effects func(ev *ahp.Event) []ahp.Effect
		// check runs after the call; reached is what the server received.
		check func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, policy *fakePolicy)
	}
	scenarios := []scenario{
		{desc: "allowed call returns the server's result", tool: "read_file", path: "/a",
			check: func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, p *fakePolicy) {
				if res.IsError || !strings.Contains(mcpText(res), mcpSecretContent) || res.StructuredContent == nil {
					t.Errorf("result = %s / %v", mcpText(res), res.StructuredContent)
				}
				if len(reached) != 1 || reached[0] != (mcpToolCall{"read_file", "/a"}) {
					t.Errorf("server received %v", reached)
				}
				afters := p.callsOf(ahp.EventToolAfter)
				if len(afters) != 1 || afters[0].Event.Outcome != "ok" || afters[0].Event.Execution.Status != ahp.ExecutionExecuted ||
					!strings.Contains(textOf(afters[0].Event.Items), mcpSecretContent) {
					t.Errorf("tool.after = %+v", afters)
				}
			}},
		{desc: "modify(input): the server receives the rewritten arguments", tool: "delete_file", path: "/etc/passwd",
			effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventToolBefore {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetInput, Operation: ahp.OpMerge, Value: json.RawMessage(`{"path":"/tmp/scratch"}`)}}
			},
			check: func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, p *fakePolicy) {
				if len(reached) != 1 || reached[0] != (mcpToolCall{"delete_file", "/tmp/scratch"}) {
					t.Errorf("server received %v, want delete_file /tmp/scratch", reached)
				}
				if mcpText(res) != "deleted /tmp/scratch" {
					t.Errorf("result = %q", mcpText(res))
				}
				afters := p.callsOf(ahp.EventToolAfter)
				if len(afters) != 1 || string(afters[0].Event.Tool.Input) != `{"path":"/tmp/scratch"}` {
					t.Errorf("tool.after must carry the effective input: %+v", afters)
				}
			}},
		{desc: "modify(output): the caller sees the rewritten result", tool: "read_file", path: "/a",
			effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventToolAfter {
					return nil
				}
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
			},
			check: func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, _ *fakePolicy) {
				if strings.Contains(mcpText(res), "sk-live") || !strings.Contains(mcpText(res), "[redacted]") {
					t.Errorf("caller saw %q", mcpText(res))
				}
				// The structured copy was redacted consistently, so it is kept, redacted.
				sc, _ := json.Marshal(res.StructuredContent)
				if strings.Contains(string(sc), "sk-live") || !strings.Contains(string(sc), "[redacted]") {
					t.Errorf("structuredContent = %s", sc)
				}
				if len(reached) != 1 {
					t.Errorf("server received %v", reached)
				}
			}},
		{desc: "return: answered without calling the server", tool: "read_file", path: "/a",
			effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventToolBefore {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectReturn, Value: json.RawMessage(`{"content":[{"type":"text","text":"cached copy"}]}`)}}
			},
			check: func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, p *fakePolicy) {
				if res.IsError || mcpText(res) != "cached copy" {
					t.Errorf("result = %+v", res)
				}
				if len(reached) != 0 {
					t.Errorf("the server was called: %v", reached)
				}
				afters := p.callsOf(ahp.EventToolAfter)
				if len(afters) != 1 || afters[0].Event.Execution.Reason != ahp.SkipSuppliedResult || textOf(afters[0].Event.Items) != "cached copy\n" {
					t.Errorf("tool.after = %+v", afters)
				}
			}},
		{desc: "a supplied result that is not a CallToolResult is refused", tool: "delete_file", path: "/a",
			effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventToolBefore {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectReturn, Value: json.RawMessage(`"done"`)}}
			},
			check: func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, _ *fakePolicy) {
				if !res.IsError || !strings.Contains(mcpText(res), "not an MCP CallToolResult") || len(reached) != 0 {
					t.Errorf("result = %q (isError %v), server received %v", mcpText(res), res.IsError, reached)
				}
			}},
		{desc: "flow stop refuses with the stop reason", tool: "delete_file", path: "/a",
			effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventToolBefore {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: "Session budget exhausted."}}
			},
			check: func(t *testing.T, res *mcpsdk.CallToolResult, reached []mcpToolCall, p *fakePolicy) {
				if !res.IsError || mcpText(res) != "Session budget exhausted." || len(reached) != 0 {
					t.Errorf("result = %q (isError %v), server received %v", mcpText(res), res.IsError, reached)
				}
				obs := waitObserved(t, p, ahp.EventToolAfter, 1)
				if len(obs) != 1 || obs[0].Outcome != "cancelled" {
					t.Errorf("tool.after observations = %+v", obs)
				}
			}},
		{desc: "the tool's own error is outcome error", tool: "read_file", path: "/a",
			effects: func(ev *ahp.Event) []ahp.Effect {
				if ev.Type != ahp.EventToolBefore {
					return nil
				}
				return []ahp.Effect{{Type: ahp.EffectReturn, Value: json.RawMessage(`{"content":[{"type":"text","text":"no such file"}],"isError":true}`)}}
			},
			check: func(t *testing.T, res *mcpsdk.CallToolResult, _ []mcpToolCall, p *fakePolicy) {
				afters := p.callsOf(ahp.EventToolAfter)
				if !res.IsError || len(afters) != 1 || afters[0].Event.Outcome != "error" || afters[0].Event.Error == nil {
					t.Errorf("result %+v, tool.after %+v", res, afters)
				}
			}},
	}
	forEachMCPMode(t, func(t *testing.T, jsonResponse bool, protocol string) {
		for _, sc := range scenarios {
			t.Run(sc.desc, func(t *testing.T) {
				files := newMCPFiles(t, jsonResponse)
				policy := &fakePolicy{effects: sc.effects}
				ch := newTestChain(t, policy, intercept(ahp.EventToolBefore, ahp.EventToolAfter), observe(ahp.EventToolAfter))
				cs := mcpConnect(t, startMCPProxy(t, files.url, ch, nil), protocol, nil)
				res := mcpCall(t, cs, &mcpsdk.CallToolParams{Name: sc.tool, Arguments: map[string]any{"path": sc.path}})
				sc.check(t, res, files.received(), policy)
				assertValidIntercepts(t, policy)
				assertValidObservations(t, policy)
				for _, p := range policy.intercepted() {
					raw, _ := json.Marshal(p.Event)
					validateToolEvent(t, raw, p.Event.Type)
				}
			})
		}
	})
}

func setPartText(p ahp.Part, text string) ahp.Part { p.Text = &text; return p }

// TestMCPEndToEndDenyHTTPBackend: a real HTTP AHP backend denies delete_file. The server
// never sees the call, the caller's CallToolResult names the reason, and the events the
// backend received are valid AHP with origin "mcp" and a credential-free descriptor.
func TestMCPEndToEndDenyHTTPBackend(t *testing.T) {
	forEachMCPMode(t, func(t *testing.T, jsonResponse bool, protocol string) {
		files := newMCPFiles(t, jsonResponse)
		backend := newAHPHTTPBackend(t, func(ev *ahp.Event) []ahp.Effect {
			if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "delete_file" {
				return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "Deleting files is not allowed.", Code: "com.example.no_delete"}}
			}
			return nil
		})
		audit := &mcpAuditLog{}
		cs := mcpConnect(t, startMCPProxy(t, files.url, backend.chain(t), audit), protocol, nil)

		res := mcpCall(t, cs, &mcpsdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/important"}})
		if !res.IsError || mcpText(res) != "Deleting files is not allowed." {
			t.Errorf("denied call answered %+v (%q)", res, mcpText(res))
		}
		if got := files.received(); len(got) != 0 {
			t.Fatalf("the server ran a denied call: %v", got)
		}
		// The session keeps working: an allowed call afterwards reaches the server.
		if res := mcpCall(t, cs, &mcpsdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/ok"}}); res.IsError {
			t.Errorf("allowed call after a denial = %+v", res)
		}
		if got := files.received(); len(got) != 1 || got[0].Tool != "read_file" {
			t.Errorf("server received %v", got)
		}

		intercepts, _ := backend.frames()
		var before *ahp.Event
		for _, f := range intercepts {
			if err := ahptest.ValidIfAvailable(t, "intercept-request.schema.json", f); err != nil {
				t.Errorf("intercept frame is not valid AHP: %v\n%s", err, f)
			}
			raw, ev := frameEvent(t, f)
			validateToolEvent(t, raw, ev.Type)
			if ev.Type == ahp.EventToolBefore && ev.Tool.Name == "delete_file" {
				before = ev
				if strings.Contains(string(f), "upstream-secret") {
					t.Errorf("the upstream query leaked into an event: %s", f)
				}
				for _, sid := range files.sessionIDs() {
					if strings.Contains(string(f), sid) {
						t.Errorf("the raw Mcp-Session-Id leaked into an event: %s", f)
					}
				}
				var caps struct {
					Params struct {
						Capabilities ahp.Capabilities `json:"capabilities"`
					} `json:"params"`
				}
				_ = json.Unmarshal(f, &caps)
				for _, e := range []string{ahp.EffectDeny, ahp.EffectModify, ahp.EffectReturn, ahp.EffectFlow} {
					if !caps.Params.Capabilities.Has(e) {
						t.Errorf("tool.before does not advertise %s: %+v", e, caps.Params.Capabilities)
					}
				}
				for _, e := range []string{ahp.EffectAllow, ahp.EffectAsk, ahp.EffectMessage, ahp.EffectInject} {
					if caps.Params.Capabilities.Has(e) {
						t.Errorf("tool.before advertises %s, which an MCP route cannot enforce", e)
					}
				}
			}
		}
		if before == nil {
			t.Fatal("the backend never saw tool.before for delete_file")
		}
		m := before.Tool.MCP
		if before.Tool.Origin != ahp.OriginMCP || m == nil || m.Server.ID != "files" || m.ToolName != "delete_file" ||
			m.Provenance != "runtime" || m.Connection.Transport != "http" ||
			m.Connection.URL != strings.TrimSuffix(files.url, "?key=upstream-secret") {
			t.Errorf("tool = %+v, mcp = %+v", before.Tool, m)
		}
		if before.Path != "hookproxy.mcp" || before.Call == nil || !before.Call.Synthesized || string(before.Tool.Input) != `{"path":"/important"}` {
			t.Errorf("tool.before = %+v", before)
		}
		if before.Session == nil || !before.Session.Synthesized || len(files.sessionIDs()) == 0 {
			// The session is the hash of the server's Mcp-Session-Id (never its value, checked above).
			t.Errorf("session = %+v (server sessions %v)", before.Session, files.sessionIDs())
		}

		// The denied call is observed as tool.after outcome denied.
		var denied *ahp.Event
		deadline := time.Now().Add(5 * time.Second)
		for denied == nil && time.Now().Before(deadline) {
			_, observes := backend.frames()
			for _, f := range observes {
				if err := ahptest.ValidIfAvailable(t, "observe-notification.schema.json", f); err != nil {
					t.Errorf("observation is not valid AHP: %v\n%s", err, f)
				}
				raw, ev := frameEvent(t, f)
				validateToolEvent(t, raw, ev.Type)
				if ev.Outcome == "denied" {
					denied = ev
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		if denied == nil || denied.Execution.Status != ahp.ExecutionSkipped || denied.Execution.Reason != ahp.SkipPolicy ||
			len(denied.Items) != 0 || denied.ParentEventID != before.ID || denied.Call.ID != before.Call.ID {
			t.Errorf("denied tool.after = %+v", denied)
		}

		var refused bool
		for _, rec := range audit.records() {
			if rec.API != config.APIMCP || rec.Route != "/mcp/files" {
				t.Errorf("audit record route = %s %s", rec.API, rec.Route)
			}
			if rec.EventType == ahp.EventToolBefore && rec.ToolName == "delete_file" {
				refused = rec.Enforcement == enforcement.Refused && rec.Denial != nil && rec.Denial.Code == "com.example.no_delete"
			}
		}
		if !refused {
			t.Errorf("no refused tool.before audit record: %+v", audit.records())
		}
	})
}

// TestMCPEndToEndFailClosed: an unreachable fail-closed backend refuses the call.
func TestMCPEndToEndFailClosed(t *testing.T) {
	files := newMCPFiles(t, false)
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	cs := mcpConnect(t, startMCPProxy(t, files.url, newHTTPBackendChain(t, "guard", url), nil), "", nil)
	res := mcpCall(t, cs, &mcpsdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/a"}})
	if !res.IsError || mcpText(res) != "Required policy backend guard unavailable." {
		t.Errorf("result = %q (isError %v)", mcpText(res), res.IsError)
	}
	if got := files.received(); len(got) != 0 {
		t.Errorf("the server ran a call its fail-closed guard could not check: %v", got)
	}
}

// TestMCPEndToEndStreamKeepsNotifications: on an SSE answer, progress notifications pass
// through while the result is rewritten.
func TestMCPEndToEndStreamKeepsNotifications(t *testing.T) {
	files := newMCPFiles(t, false)
	policy := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Type != ahp.EventToolAfter {
			return nil
		}
		b, _ := json.Marshal([]ahp.Message{textMessage("note", ahp.RoleTool, "reviewed by policy")})
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetOutput, Operation: ahp.OpMerge, Value: b}}
	}}
	ch := newTestChain(t, policy, intercept(ahp.EventToolAfter))
	var mu sync.Mutex
	var progress []float64
	cs := mcpConnect(t, startMCPProxy(t, files.url, ch, nil), "2025-06-18", &mcpsdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		}})
	params := &mcpsdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/a"}}
	params.SetProgressToken("tok-1")
	res := mcpCall(t, cs, params)
	if !strings.HasSuffix(mcpText(res), "reviewed by policy") || !strings.Contains(mcpText(res), mcpSecretContent) {
		t.Errorf("result = %q", mcpText(res))
	}
	// Only additions: the structured result still agrees with the text and is kept.
	if res.StructuredContent == nil {
		t.Error("structuredContent was dropped by an append-only edit")
	}
	// The client delivers notifications asynchronously: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := append([]float64(nil), progress...)
		mu.Unlock()
		if len(got) > 0 || time.Now().After(deadline) {
			if len(got) != 1 || got[0] != 1 {
				t.Errorf("progress notifications = %v, want [1]", got)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
