package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
)

// secrets that must never appear in an audit line, whatever field a caller put them in.
var secrets = []string{
	"sk-proj-AbCdEfGhIjKlMnOpQrStUv",
	"sk-ant-api03-ZyXwVuTsRqPoNmLkJiHg",
	"tok3nV4lu3abcdefgh",
	"QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
	"AKIAIOSFODNN7EXAMPLE",
	"ghp_0123456789abcdefghijABCDEFGHIJ",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	"hunter2-password",
	"cookie-session-abcdef",
}

func TestSecretsNeverWritten(t *testing.T) {
	g := newGate()
	g.open()
	w := newWriter(mustNormalize(t, config.Audit{IncludeContent: true}), zap.NewNop(), g, true)

	text := "please use Authorization: Bearer tok3nV4lu3abcdefgh and key sk-proj-AbCdEfGhIjKlMnOpQrStUv"
	r := Record{
		EventID:   "evt_1",
		EventType: "tool.before",
		// Misuse: header values pushed into identifier fields.
		Route:     "/openai Authorization: Bearer tok3nV4lu3abcdefgh",
		SessionID: "Bearer tok3nV4lu3abcdefgh",
		TurnID:    "x-api-key: sk-ant-api03-ZyXwVuTsRqPoNmLkJiHg",
		CallID:    "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
		Model:     "AKIAIOSFODNN7EXAMPLE",
		Tool:      "ghp_0123456789abcdefghijABCDEFGHIJ",
		// Misuse: free text in closed vocabularies.
		Permission:  "Bearer tok3nV4lu3abcdefgh",
		Flow:        "sk-proj-AbCdEfGhIjKlMnOpQrStUv",
		Enforcement: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		Interceptors: []Interceptor{{
			BackendID: "password=hunter2-password", Outcome: "Cookie: cookie-session-abcdef",
			Effects: []EffectType{"sk-ant-api03-ZyXwVuTsRqPoNmLkJiHg"}, FailureKind: "Bearer tok3nV4lu3abcdefgh",
			FailurePolicy: "api_key=sk-proj-AbCdEfGhIjKlMnOpQrStUv",
		}},
		Denial: &Denial{Reason: "denied: x-api-key=sk-ant-api03-ZyXwVuTsRqPoNmLkJiHg", Code: "cookie=cookie-session-abcdef"},
		Content: &Content{
			Items: []ahp.Message{{ID: "m1", Role: "user", Parts: []ahp.Part{ahp.TextPart("p1", text)}}},
			ToolInput: json.RawMessage(`{"command":"curl -H 'Authorization: Bearer tok3nV4lu3abcdefgh' https://x",` +
				`"headers":{"Authorization":"whatever-opaque","X-Api-Key":"cookie-session-abcdef"},"password":"hunter2-password","n":1.50}`),
		},
	}
	if err := w.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	g.mu.Lock()
	line := g.buf.String()
	g.mu.Unlock()
	for _, s := range append(secrets, "whatever-opaque") {
		if strings.Contains(line, s) {
			t.Errorf("audit line leaks %q:\n%s", s, line)
		}
	}
	// The caller's record is untouched (the writer scrubs a copy).
	if *r.Content.Items[0].Parts[0].Text != text {
		t.Error("Write modified the caller's content")
	}
	l := parseLines(t, []byte(line))[0]
	for _, k := range []string{"permission", "flow", "enforcement"} {
		if l[k] != Unknown {
			t.Errorf("%s = %v, want %q for a value outside the vocabulary", k, l[k], Unknown)
		}
	}
	content := l["content"].(map[string]any)
	in := content["toolInput"].(map[string]any)
	if in["n"] != 1.5 || !strings.Contains(in["command"].(string), "https://x") {
		t.Errorf("scrubbing damaged the tool input: %v", in)
	}
}

func TestOrdinaryValuesSurviveScrubbing(t *testing.T) {
	for _, v := range []string{
		"toolu_01A2B3C4", "call_456", "evt_7f3c1a9e0b2d4c55", "claude-sonnet-4-5", "gpt-4.1-mini",
		"task-1234567890abcdefgh", "/mcp/files", "com.example.policy", "sess_9b1e",
		"Required policy backend unavailable.", "force push to main is not allowed",
		"the secret detector found a key",
	} {
		if got := scrubText(v); got != v {
			t.Errorf("scrubText(%q) = %q", v, got)
		}
	}
}

func TestTextIsBounded(t *testing.T) {
	got := scrubText(strings.Repeat("é", maxTextBytes))
	if len(got) > maxTextBytes+len("…[truncated]") || !strings.HasSuffix(got, "…[truncated]") {
		t.Fatalf("length %d", len(got))
	}
	if !json.Valid([]byte(`"` + got + `"`)) {
		t.Fatal("truncation split a rune")
	}
}

func TestFromSettlement(t *testing.T) {
	lat := 3 * time.Millisecond
	s := &chain.Settlement{
		Event: &ahp.Event{
			ID: "evt_tb", Type: ahp.EventToolBefore,
			Session: &ahp.Session{ID: "sess_1"}, Turn: &ahp.Turn{ID: "turn_1"}, Call: &ahp.Call{ID: "call_1"},
			Model: &ahp.Model{ID: "gpt-4.1", Provider: "openai"},
			Tool:  &ahp.Tool{Name: "shell", Input: json.RawMessage(`{"cmd":"rm -rf /"}`), Origin: ahp.OriginNative},
		},
		Permission: ahp.PermissionDeny,
		Flow:       ahp.FlowNone,
		Denial:     &chain.Denial{Reason: "Required policy backend unavailable.", Code: "hookproxy.fail_closed", BackendID: "dlp", Synthetic: true},
		Records: []chain.Record{
			{BackendID: "guard", Subscription: 1, Mode: "intercept", Outcome: chain.OutcomeNoEffect, Latency: lat, Policy: "fail-open"},
			{BackendID: "dlp", Subscription: 0, Mode: "intercept", Outcome: chain.OutcomeFailed, FailureKind: "timeout",
				Policy: "fail-closed", Latency: time.Second, Detail: "backend said: secret stack trace"},
		},
	}
	r := FromSettlement(s)
	r.Route = "/openai"
	r.Enforcement = enforcement.Refused

	g := newGate()
	g.open()
	w := newWriter(mustNormalize(t, config.Audit{IncludeContent: true}), zap.NewNop(), g, true)
	if err := w.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	l := g.lines(t)[0]
	for k, want := range map[string]any{
		"eventId": "evt_tb", "eventType": "tool.before", "sessionId": "sess_1", "turnId": "turn_1", "callId": "call_1",
		"model": "gpt-4.1", "tool": "shell", "permission": "deny", "flow": "none", "route": "/openai", "enforcement": "refused",
	} {
		if l[k] != want {
			t.Errorf("%s = %v, want %v", k, l[k], want)
		}
	}
	ics := l["interceptors"].([]any)
	if len(ics) != 2 {
		t.Fatalf("interceptors %v", ics)
	}
	if a := ics[0].(map[string]any); a["latencyMs"] != 3.0 || a["outcome"] != "no_effect" || a["subscription"] != 1.0 {
		t.Errorf("interceptors[0] %v", a)
	}
	if b := ics[1].(map[string]any); b["failureKind"] != "timeout" || b["failurePolicy"] != "fail-closed" || b["latencyMs"] != 1000.0 {
		t.Errorf("interceptors[1] %v", b)
	}
	if d := l["denial"].(map[string]any); d["synthetic"] != true || d["backendId"] != "dlp" {
		t.Errorf("denial %v", d)
	}
	raw, _ := json.Marshal(l)
	if strings.Contains(string(raw), "stack trace") {
		t.Error("chain diagnostic detail leaked into the audit record")
	}
	if c := l["content"].(map[string]any); c["toolInput"].(map[string]any)["cmd"] != "rm -rf /" {
		t.Errorf("content %v", c)
	}

	if empty := FromSettlement(nil); empty.Interceptors == nil {
		t.Error("nil settlement must still give an interceptors array")
	}
}
