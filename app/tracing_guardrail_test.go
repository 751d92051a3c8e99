package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/fakemodel"
	"github.com/hookproxy/hookproxy/tracing"
)

// TestGuardrailSpans: with tracing on, every interceptor call of a request is a span in
// the OpenTelemetry GenAI guardrail vocabulary under its boundary's span, itself under the
// request's span: the remote secrets backend (AHP over HTTP, the built-in policies served
// by `hookproxy backend`) as gen_ai.run_guardrail.client with a modify verdict and the
// content modified, the in-process tools policy as gen_ai.run_guardrail.internal with a
// deny verdict, the block it caused and the rule; each with a gen_ai.security.finding
// event. Control: a boundary whose hook found nothing has a span with an allow verdict and
// no finding.
func TestGuardrailSpans(t *testing.T) {
	// The built-in policies as a standalone HTTP backend.
	bsrv, _, err := NewBackend("", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	remote := httptest.NewServer(bsrv.Handler())
	t.Cleanup(remote.Close)
	model := httptest.NewServer(fakemodel.New().Handler())
	t.Cleanup(model.Close)

	dir := t.TempDir()
	reg := fmt.Sprintf(`{"protocolVersion": "draft", "hooks": [
  {"id": "com.example.remote-secrets", "transport": {"type": "http", "url": %q},
   "subscriptions": [{"events": ["model.request.before"], "mode": "intercept", "timeoutMs": 5000,
     "failurePolicy": "fail-closed", "content": {"default": "body"}}]},
  {"id": "hookproxy.builtin.tools", "transport": {"type": "in_process", "policy": "tools", "config": {"destructive": true}},
   "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 2000,
     "failurePolicy": "fail-closed", "content": {"default": "body"}}]}]}`, remote.URL+"/")
	if err := os.WriteFile(filepath.Join(dir, "hooks.json"), []byte(reg), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
registration: hooks.json
routes:
  - prefix: /openai
    api: openai
    upstream: %s
`, model.URL)), dir)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	rt := newRuntime(runtimeOptions{Tracer: tp.Tracer(tracing.InstrumentationName)})
	if err := rt.start(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(t.Context()) })
	proxySrv := httptest.NewServer(rt)
	t.Cleanup(proxySrv.Close)

	// A prompt with a credential that also makes the model ask for `rm -rf /`.
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"Please clean up; the deploy token is glpat-Qm7xK2pL9vR4tY8wZ3nB"}]}`
	resp, err := http.Post(proxySrv.URL+"/openai/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(answer), `"name":"Bash"`) {
		t.Fatalf("answer %d: %s", resp.StatusCode, answer)
	}

	var spans tracetest.SpanStubs
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		spans = exp.GetSpans()
		if hasSpan(spans, "POST /openai") || time.Now().After(deadline) {
			break
		}
	}
	request := only(t, spans, func(s tracetest.SpanStub) bool { return s.Name == "POST /openai" })
	boundary := func(event string) tracetest.SpanStub {
		return only(t, spans, func(s tracetest.SpanStub) bool {
			return s.Name == "ahp "+event && s.Parent.SpanID() == request.SpanContext.SpanID()
		})
	}
	reqBoundary, toolBoundaries := boundary("model.request.before"), []tracetest.SpanStub{}
	for _, s := range spans {
		if s.Name == "ahp tool.before" && s.Parent.SpanID() == request.SpanContext.SpanID() {
			toolBoundaries = append(toolBoundaries, s)
		}
	}
	if len(toolBoundaries) != 2 { // Bash and Read
		t.Fatalf("%d tool.before boundary spans, want 2: %v", len(toolBoundaries), spanNames(spans))
	}

	client := only(t, spans, func(s tracetest.SpanStub) bool {
		return s.Name == tracing.SpanGuardrailClient && s.Parent.SpanID() == reqBoundary.SpanContext.SpanID()
	})
	wantAttrs(t, client, map[string]any{
		tracing.AttrOperationName:   tracing.OperationRunGuardrail,
		tracing.AttrGuardrailID:     "com.example.remote-secrets",
		tracing.AttrTargetType:      "llm_input",
		tracing.AttrVerdictType:     "modify",
		tracing.AttrActionType:      "modify",
		tracing.AttrContentModified: true,
	})
	wantFindings(t, client, "modify")
	if client.SpanKind.String() != "client" || client.SpanContext.TraceID() != request.SpanContext.TraceID() {
		t.Errorf("client guardrail span: kind %s, trace %s (request's %s)", client.SpanKind, client.SpanContext.TraceID(), request.SpanContext.TraceID())
	}

	var denied, allowed int
	for _, tb := range toolBoundaries {
		g := only(t, spans, func(s tracetest.SpanStub) bool {
			return s.Name == tracing.SpanGuardrailInternal && s.Parent.SpanID() == tb.SpanContext.SpanID()
		})
		if g.SpanKind.String() != "internal" {
			t.Errorf("in-process guardrail span kind %s", g.SpanKind)
		}
		switch attrOf(g, tracing.AttrVerdictType) {
		case "deny":
			denied++
			wantAttrs(t, g, map[string]any{
				tracing.AttrGuardrailID:     "hookproxy.builtin.tools",
				tracing.AttrGuardrailName:   "tools",
				tracing.AttrPolicyID:        "tools",
				tracing.AttrTargetType:      "tool_call",
				tracing.AttrActionType:      "block",
				tracing.AttrPolicyRuleID:    "hookproxy.tools.destructive",
				tracing.AttrContentModified: false,
			})
			wantFindings(t, g, "deny")
		case "allow": // control: the Read call
			allowed++
			wantAttrs(t, g, map[string]any{tracing.AttrActionType: "allow"})
			wantFindings(t, g)
			if attrOf(g, tracing.AttrPolicyRuleID) != nil {
				t.Errorf("an allowed call's span names a rule: %v", g.Attributes)
			}
		}
	}
	if denied != 1 || allowed != 1 {
		t.Errorf("tools spans: %d denied, %d allowed; want 1 and 1", denied, allowed)
	}
}

func hasSpan(spans tracetest.SpanStubs, name string) bool {
	for _, s := range spans {
		if s.Name == name {
			return true
		}
	}
	return false
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func only(t *testing.T, spans tracetest.SpanStubs, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d matching spans, want 1; spans: %v", len(found), spanNames(spans))
	}
	return found[0]
}

func attrOf(s tracetest.SpanStub, key string) any {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.AsInterface()
		}
	}
	return nil
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got := attrOf(s, k); got != v {
			t.Errorf("span %s: %s = %v, want %v", s.Name, k, got, v)
		}
	}
}

// wantFindings checks the span's gen_ai.security.finding events, by verdict.
func wantFindings(t *testing.T, s tracetest.SpanStub, verdicts ...string) {
	t.Helper()
	var got []string
	for _, e := range s.Events {
		if e.Name != tracing.EventFinding {
			continue
		}
		for _, a := range e.Attributes {
			if a.Key == attribute.Key(tracing.AttrVerdictType) {
				got = append(got, a.Value.AsString())
			}
		}
	}
	if strings.Join(got, ",") != strings.Join(verdicts, ",") {
		t.Errorf("span %s: findings %v, want %v", s.Name, got, verdicts)
	}
}
