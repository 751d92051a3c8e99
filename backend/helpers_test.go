package backend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/ahptest"
	"github.com/hookproxy/hookproxy/policies"
)

// awsKeyID is a made-up access key id in the real format (AKIA + 16 of [A-Z0-9]), which
// the secrets policy catches.
const awsKeyID = "AKIAZ7TESTKEY4HOOKPX"

// policyOptions validates registrations the way `hookproxy validate` does.
func policyOptions() registration.Options {
	names := map[string]bool{}
	for _, n := range policies.Names() {
		names[n] = true
	}
	return registration.Options{Policies: names, CheckPolicyConfig: policies.CheckConfig}
}

// defaultDocument is the embedded default registration (tools, then secrets).
func defaultDocument(t testing.TB) *registration.Document {
	t.Helper()
	doc, _, err := registration.Parse(config.DefaultRegistration, policyOptions())
	if err != nil {
		t.Fatalf("default registration: %v", err)
	}
	return doc
}

// newDefaultServer serves the embedded default registration's built-in policies.
func newDefaultServer(t testing.TB, opts ...backend.Option) *backend.Server {
	t.Helper()
	srv, err := backend.New(defaultDocument(t), policies.Factories(), nil, opts...)
	if err != nil {
		t.Fatalf("backend.New: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func text(id, role, s string) ahp.Message {
	return ahp.Message{ID: id, Role: role, Parts: []ahp.Part{ahp.TextPart(id+"p0", s)}}
}

// requestEvent is a model.request.before event with the given user text.
func requestEvent(id, userText string) *ahp.Event {
	return &ahp.Event{
		ID: id, Source: "urn:example:harness", Type: ahp.EventModelRequestBefore, Time: "2026-09-15T12:00:00Z",
		Model:   &ahp.Model{ID: "gpt-4o", Provider: "openai"},
		Attempt: &ahp.Attempt{ID: "att_" + id, Number: 1},
		Params:  json.RawMessage(`{"temperature":0}`),
		Items: []ahp.Message{
			text("m0", ahp.RoleSystem, "You are a coding agent."),
			text("m1", ahp.RoleUser, userText),
		},
	}
}

// toolEvent is a tool.before event.
func toolEvent(id, tool, input string) *ahp.Event {
	return &ahp.Event{
		ID: id, Source: "urn:example:harness", Type: ahp.EventToolBefore, Time: "2026-09-15T12:00:00Z",
		Call: &ahp.Call{ID: "call_" + id},
		Tool: &ahp.Tool{Name: tool, Input: json.RawMessage(input), Origin: ahp.OriginNative},
		Path: "example.tools",
	}
}

// toolAfterEvent is a tool.after event with one tool-result message.
func toolAfterEvent(id, output string) *ahp.Event {
	return &ahp.Event{
		ID: id, Source: "urn:example:harness", Type: ahp.EventToolAfter, Time: "2026-09-15T12:00:00Z",
		Call:      &ahp.Call{ID: "call_" + id},
		Tool:      &ahp.Tool{Name: "Read", Input: json.RawMessage(`{"path":"a"}`), Origin: ahp.OriginNative},
		Path:      "example.tools",
		Outcome:   "ok",
		Execution: &ahp.Execution{Status: ahp.ExecutionExecuted},
		Items:     []ahp.Message{text("r1", ahp.RoleTool, output)},
	}
}

// fullCaps is everything a harness could advertise for the event (its bound).
func fullCaps(eventType string) *ahp.Capabilities {
	b := ahp.EventBounds[eventType]
	c := &ahp.Capabilities{Effects: append([]string(nil), b.Effects...)}
	if b.Target != "" {
		c.Modify = map[string]ahp.ModifyOps{b.Target: {Replace: true, Merge: true}}
	}
	if len(b.FlowOps) > 0 {
		c.Flow = &ahp.FlowCaps{Operations: []string{ahp.OpStop}}
	}
	for _, e := range b.Effects {
		if e == ahp.EffectInject {
			c.Inject = &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true, DeliverAt: []string{ahp.DeliverNow}}}
		}
	}
	return c
}

// interceptFrame encodes a hooks/intercept request.
func interceptFrame(t testing.TB, ev *ahp.Event, caps *ahp.Capabilities) []byte {
	t.Helper()
	b, err := json.Marshal(ahp.Request{JSONRPC: "2.0", ID: json.RawMessage(`"` + ev.ID + `"`), Method: ahp.MethodIntercept,
		Params: &ahp.InterceptParams{ProtocolVersion: ahp.ProtocolVersion, Event: ev, Capabilities: caps}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reply is a decoded JSON-RPC response of the backend.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		ProtocolVersion string       `json:"protocolVersion"`
		Effects         []ahp.Effect `json:"effects"`
	} `json:"result"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeReply(t testing.TB, b []byte) reply {
	t.Helper()
	var r reply
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("reply is not a JSON-RPC response: %v\n%s", err, b)
	}
	if r.JSONRPC != "2.0" || (r.Result == nil) == (r.Error == nil) {
		t.Fatalf("reply must carry exactly one of result and error: %s", b)
	}
	return r
}

// assertValidResult checks a success reply against the protocol's schema.
func assertValidResult(t testing.TB, b []byte) {
	t.Helper()
	if err := ahptest.ValidIfAvailable(t, "intercept-response.schema.json", b); err != nil {
		t.Errorf("reply is not a valid AHP intercept response: %v\n%s", err, b)
	}
}

func effectTypes(effs []ahp.Effect) string {
	var s []string
	for _, e := range effs {
		t := e.Type
		if e.Operation != "" {
			t += "(" + e.Target + e.Operation + ")"
		}
		s = append(s, t)
	}
	return strings.Join(s, ",")
}

// post sends body to url as one AHP HTTP request.
func post(t testing.TB, url, contentType string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// scripted is an in-process policy whose reply a test decides per call, recording what it
// was sent.
type scripted struct {
	mu     sync.Mutex
	seen   []*ahp.Event
	caps   []*ahp.Capabilities
	effect func(ev *ahp.Event) []ahp.Effect
	fail   bool
}

func (p *scripted) Intercept(_ context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	p.mu.Lock()
	p.seen = append(p.seen, req.Params.Event)
	p.caps = append(p.caps, req.Params.Capabilities)
	p.mu.Unlock()
	if p.fail {
		return nil, errors.New("policy crashed")
	}
	res := ahp.NoEffects()
	if p.effect != nil {
		if e := p.effect(req.Params.Event); e != nil {
			res.Effects = e
		}
	}
	return res, nil
}

func (p *scripted) calls() []*ahp.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*ahp.Event(nil), p.seen...)
}

// entry is one in_process backend of a test registration.
type entry struct {
	name, failure string
	events        []string
	policy        *scripted
}

// scriptedServer serves the entries, in order, as one backend.
func scriptedServer(t testing.TB, entries ...entry) *backend.Server {
	t.Helper()
	doc := &registration.Document{ProtocolVersion: ahp.ProtocolVersion}
	factories := map[string]transport.PolicyFactory{}
	for _, e := range entries {
		fp := e.failure
		if fp == "" {
			fp = registration.FailOpen
		}
		doc.Hooks = append(doc.Hooks, registration.Backend{
			ID:        "test." + e.name,
			Transport: registration.Transport{Type: registration.TransportInProcess, Policy: e.name},
			Subscriptions: []registration.Subscription{{Events: e.events, Mode: registration.ModeIntercept,
				TimeoutMs: 5000, FailurePolicy: fp, Content: map[string]string{"default": "body"}}},
		})
		p := e.policy
		factories[e.name] = func(json.RawMessage) (ahp.Interceptor, error) { return p, nil }
	}
	srv, err := backend.New(doc, factories, nil)
	if err != nil {
		t.Fatalf("backend.New: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func msgsJSON(t testing.TB, m ...ahp.Message) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func textsOf(items []ahp.Message) string {
	var b strings.Builder
	for _, m := range items {
		for _, p := range m.Parts {
			b.WriteString(p.TextOf())
			b.WriteByte('\n')
		}
	}
	return b.String()
}
