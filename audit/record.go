package audit

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/enforcement"
)

// Record is one settled boundary. Field order is the order of the JSON line.
type Record struct {
	Time         time.Time     `json:"time"`
	EventID      Text          `json:"eventId"`
	EventType    EventType     `json:"eventType"`
	Route        Text          `json:"route,omitempty"`
	SessionID    Text          `json:"sessionId,omitempty"`
	TurnID       Text          `json:"turnId,omitempty"`
	CallID       Text          `json:"callId,omitempty"`
	Model        Text          `json:"model,omitempty"`
	Tool         Text          `json:"tool,omitempty"`
	Interceptors []Interceptor `json:"interceptors"`
	Permission   Permission    `json:"permission,omitempty"`
	Flow         Flow          `json:"flow,omitempty"`
	Denial       *Denial       `json:"denial,omitempty"`
	// Enforcement is what the proxy did. A shadow record (Shadow set) has none: it repeats
	// the live settlement beside the shadow chain's, and the proxy's enforcement of that
	// boundary is on the boundary's own record.
	Enforcement enforcement.Action `json:"enforcement,omitempty"`
	// Reapplied counts the rewrites settled on earlier requests of the conversation that
	// were put back into this request (model.request.before records only).
	Reapplied int `json:"reapplied,omitempty"`
	// Resettled marks a tool.after or turn.start record of earlier content that the state
	// store did not know (another replica, a restart, an eviction, an outage): the boundary
	// was settled again rather than trusted to have been (at-least-once delivery).
	Resettled bool `json:"resettled,omitempty"`
	// Held says, on a response-side record, how much of the response the proxy held from
	// the client while the chain settled: "whole", "tool_calls" (a stream whose text
	// flowed while each tool call was held until decided) or "none".
	Held enforcement.Held `json:"held,omitempty"`
	// Shadow is the shadow chain's settlement of the same event (shadow records only).
	Shadow *Shadow `json:"shadow,omitempty"`
	// Approval is set when the call was held for a person's decision.
	Approval *Approval `json:"approval,omitempty"`
	// ToolDefinitions is set on the records of tool-definition pinning (eventType
	// hookproxy.tool_definitions, the extension event): what differs from the pins. It
	// holds names, kinds and digests, never a description.
	ToolDefinitions []ahp.ToolDefinitionChange `json:"toolDefinitions,omitempty"`
	// Content is written only when config.Audit.IncludeContent is set; the Writer clears it
	// otherwise, so a caller cannot turn content logging on by filling it in.
	Content *Content `json:"content,omitempty"`
}

// Shadow is what the shadow chain settled for the event of a record, and whether that
// differs from the live settlement: Diff says in a few words what would have changed
// (a call removed, text rewritten, a request refused).
type Shadow struct {
	Effects      []EffectType       `json:"effects"`
	Permission   Permission         `json:"permission"`
	Flow         Flow               `json:"flow"`
	Outcome      enforcement.Action `json:"outcome"`
	Differs      bool               `json:"differs"`
	Diff         Text               `json:"diff,omitempty"`
	Denial       *Denial            `json:"denial,omitempty"`
	Interceptors []Interceptor      `json:"interceptors"`
}

// Interceptor is what happened to one matching subscription at the boundary.
type Interceptor struct {
	BackendID    Text           `json:"backendId"`
	Subscription int            `json:"subscription"` // index in the backend's subscriptions
	LatencyMs    float64        `json:"latencyMs"`
	Outcome      chain.Outcome  `json:"outcome"`
	Effects      []EffectType   `json:"effects"` // accepted effect types, in order; [] when none
	FailureKind  transport.Kind `json:"failureKind,omitempty"`
	// Violation and OffendingEffect say why a reply the backend did send was refused:
	// the protocol rule broken and the type of the effect to blame ("unknown" for a type
	// outside the draft: backend-supplied text is never written).
	Violation       transport.Violation `json:"violation,omitempty"`
	OffendingEffect EffectType          `json:"offendingEffect,omitempty"`
	FailurePolicy   FailurePolicy       `json:"failurePolicy,omitempty"`
}

// Denial says why the operation was refused. Synthetic is true for a fail-closed
// operational failure and false for an explicit deny effect; AHP-FAIL-001 requires local
// audit records to tell the two apart.
type Denial struct {
	Reason    Text `json:"reason"`
	Code      Text `json:"code,omitempty"`
	BackendID Text `json:"backendId,omitempty"`
	Synthetic bool `json:"synthetic"`
}

// Content is the canonical, effective content of the boundary (opt-in).
type Content struct {
	Items []ahp.Message `json:"items,omitempty"`
	// ToolInput is tool.input of tool.* events: what the agent asked to run.
	ToolInput json.RawMessage `json:"toolInput,omitempty"`
}

// MarshalJSON writes a scrubbed copy: text parts and every string of the tool input go
// through the credential scrubber, and tool-input members whose name marks a credential
// are replaced whole. A tool input that is not valid JSON is left out rather than written
// verbatim.
func (c Content) MarshalJSON() ([]byte, error) {
	type plain Content // no MarshalJSON: avoids recursion
	out := plain{Items: scrubMessages(c.Items)}
	if len(c.ToolInput) > 0 {
		if in, ok := scrubJSON(c.ToolInput); ok {
			out.ToolInput = in
		}
	}
	return json.Marshal(out)
}

// Text is a free-text field of a record (identifiers, names, reasons). Its encoding is
// scrubbed and bounded; see the package comment.
type Text string

// maxTextBytes bounds one Text field; denial reasons are the longest legitimate values.
const maxTextBytes = 4096

// MarshalText implements encoding.TextMarshaler with scrubbing.
func (t Text) MarshalText() ([]byte, error) { return []byte(scrubText(string(t))), nil }

// Redacted replaces every credential-shaped value.
const Redacted = "[REDACTED]"

// credentialPattern finds credential-shaped substrings. It is one alternation so a field
// is scanned once:
//   - "name: value" / "name=value" for header and parameter names that carry credentials;
//   - HTTP auth schemes followed by a token (Bearer, Basic);
//   - well-known key formats: OpenAI/Anthropic "sk-...", AWS access key ids, GitHub and
//     Slack tokens, JWTs.
var credentialPattern = regexp.MustCompile(`(?i)` +
	`\b(?:proxy-authorization|authorization|x-api-key|x-goog-api-key|api[-_]?key|cookie|set-cookie|` +
	`access[-_]?token|refresh[-_]?token|id[-_]?token|client[-_]?secret|api[-_]?secret|secret[-_]?key|password|passwd)` +
	`\s*["']?\s*[:=]\s*(?:"[^"]*"|'[^']*'|(?:bearer|basic|token)\s+[^\s,;&"'})\]]+|[^\s,;&"'})\]]+)` +
	`|\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}` +
	`|\bsk-[A-Za-z0-9_-]{16,}` +
	`|\bAKIA[0-9A-Z]{16}\b` +
	`|\bgh[pousr]_[A-Za-z0-9]{20,}` +
	`|\bxox[abprs]-[A-Za-z0-9-]{10,}` +
	`|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)

// scrubText removes credential-shaped values and bounds the length (on a rune boundary).
func scrubText(s string) string {
	if s == "" {
		return s
	}
	s = credentialPattern.ReplaceAllString(s, Redacted)
	if len(s) > maxTextBytes {
		cut := maxTextBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…[truncated]"
	}
	return s
}

// credentialKey reports whether a JSON member name names a credential, so its value is
// dropped whatever it looks like.
func credentialKey(k string) bool {
	k = strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
	switch k {
	case "authorization", "proxyauthorization", "xapikey", "apikey", "xgoogapikey", "cookie",
		"setcookie", "accesstoken", "refreshtoken", "idtoken", "token", "bearertoken",
		"clientsecret", "apisecret", "secretkey", "password", "passwd", "secret", "privatekey":
		return true
	}
	return false
}

func scrubMessages(items []ahp.Message) []ahp.Message {
	if items == nil {
		return nil
	}
	out := make([]ahp.Message, len(items))
	for i, m := range items {
		parts := make([]ahp.Part, len(m.Parts))
		for j, p := range m.Parts {
			if p.Text != nil {
				t := scrubContent(*p.Text)
				p.Text = &t
			}
			parts[j] = p
		}
		m.Parts = parts
		out[i] = m
	}
	return out
}

// scrubContent is scrubText without the length bound: content is opt-in and its length is
// the operator's choice.
func scrubContent(s string) string { return credentialPattern.ReplaceAllString(s, Redacted) }

// scrubJSON rewrites a JSON value with every string scrubbed and credential-named members
// redacted. Numbers keep their exact text.
func scrubJSON(raw json.RawMessage) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	out, err := json.Marshal(scrubValue(v))
	if err != nil {
		return nil, false
	}
	return out, true
}

func scrubValue(v any) any {
	switch x := v.(type) {
	case string:
		return scrubContent(x)
	case []any:
		for i := range x {
			x[i] = scrubValue(x[i])
		}
		return x
	case map[string]any:
		for k, e := range x {
			if credentialKey(k) {
				x[k] = Redacted
				continue
			}
			x[k] = scrubValue(e)
		}
		return x
	default:
		return v
	}
}

// Closed vocabularies. Each type encodes only its listed values; any other value is
// written as Unknown so that a mistaken assignment can never put free text in the log.
// The vocabularies that other packages decide are declared once, by their owner, with
// that same encoding: chain.Outcome, transport.Kind and transport.Violation (the engine),
// enforcement.Action and enforcement.Held (the proxy's enforcement). The types below
// encode protocol values declared in chain/ahp.

// Unknown is written for a closed-vocabulary value outside its vocabulary.
const Unknown = enforcement.Unknown

// Permission is the settled permission (ahp.Permission*).
type Permission string

// MarshalText implements encoding.TextMarshaler.
func (p Permission) MarshalText() ([]byte, error) {
	return closed(string(p), ahp.PermissionNone, ahp.PermissionAllow, ahp.PermissionAsk, ahp.PermissionDeny), nil
}

// Flow is the settled flow (ahp.Flow*).
type Flow string

// MarshalText implements encoding.TextMarshaler.
func (f Flow) MarshalText() ([]byte, error) {
	return closed(string(f), ahp.FlowNone, ahp.FlowStop, ahp.FlowContinue), nil
}

// EffectType is one of the eight core effect types.
type EffectType string

// MarshalText implements encoding.TextMarshaler.
func (e EffectType) MarshalText() ([]byte, error) {
	if ahp.IsEffectType(string(e)) {
		return []byte(e), nil
	}
	return []byte(Unknown), nil
}

// FailurePolicy is the subscription's failure policy.
type FailurePolicy string

// MarshalText implements encoding.TextMarshaler.
func (p FailurePolicy) MarshalText() ([]byte, error) {
	return closed(string(p), registration.FailOpen, registration.FailClosed), nil
}

// EventType is one of the 32 AHP event names, or hookproxy's extension event
// (ahp.EventToolDefinitions).
type EventType string

// MarshalText implements encoding.TextMarshaler.
func (e EventType) MarshalText() ([]byte, error) {
	if ahp.IsEventType(string(e)) || e == ahp.EventToolDefinitions {
		return []byte(e), nil
	}
	return []byte(Unknown), nil
}

func closed(v string, vocabulary ...string) []byte {
	for _, w := range vocabulary {
		if v == w {
			return []byte(v)
		}
	}
	return []byte(Unknown)
}
