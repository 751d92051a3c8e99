package policies

import (
	"context"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// PIIConfig configures the pii policy. The zero value is the default.
//
//	{"request": "redact", "response": "off", "kinds": ["email", "payment_card"],
//	 "allow": ["@example\\.com$"]}
type PIIConfig struct {
	// Request is the action for content on its way to the model or a tool
	// (model.request.before, turn.start, tool.before): "redact" (default), "deny" or "off".
	Request string `json:"request,omitempty"`
	// Response is the action for content produced by the model or a tool
	// (model.response.after, turn.finish.before, tool.after): "off" (default), "redact"
	// or "deny". The default leaves tool results intact for the agent; the request-side
	// scan still redacts them from the history before the next model call.
	Response string `json:"response,omitempty"`
	// Kinds limits detection to these kinds (default: every kind of PIIKinds).
	Kinds []string `json:"kinds,omitempty"`
	// Allow holds RE2 patterns of values to leave alone (unanchored), for example a
	// support address or a test card number.
	Allow []string `json:"allow,omitempty"`
}

// PII is the pii policy: it finds e-mail addresses, phone numbers, payment card numbers,
// IBANs and US social security numbers and redacts them with
// [REDACTED:<kind>:<first 8 hex of sha256(value)>] or refuses the operation, per
// direction. Effects follow the same capability rules as the secrets policy (see Secrets).
type PII struct {
	scan    *piiScanner
	content contentPolicy
}

var _ ahp.Interceptor = (*PII)(nil)

// NewPII validates cfg and builds the policy.
func NewPII(cfg PIIConfig) (*PII, error) {
	req, err := piiAction(cfg.Request, actionRedact, "request")
	if err != nil {
		return nil, err
	}
	resp, err := piiAction(cfg.Response, actionOff, "response")
	if err != nil {
		return nil, err
	}
	kinds, err := newKindSet(cfg.Kinds, PIIKinds, "kinds")
	if err != nil {
		return nil, err
	}
	allow, err := compileAllow(cfg.Allow, "allow")
	if err != nil {
		return nil, err
	}
	p := &PII{scan: newPIIScanner(kinds, allow)}
	p.content = contentPolicy{d: p.scan, noun: "personal data", prefix: "hookproxy.pii.", decision: piiDecision,
		request: req, response: resp}
	return p, nil
}

func piiAction(v, def, path string) (string, error) {
	switch v {
	case "":
		return def, nil
	case actionRedact, actionDeny, actionOff:
		return v, nil
	}
	return "", configErrorf("%s: must be %q, %q or %q, got %q", path, actionRedact, actionDeny, actionOff, v)
}

// ReadsEventOnly marks the policy as a reader of the events it is given
// (transport.EventReader): it writes none of them and keeps none of them (its result cache
// and list memo keep their own copies), so the in-process transport need not copy them.
func (p *PII) ReadsEventOnly() {}

// EndsByDeadline marks the policy as bounded (transport.BoundedPolicy): every scan is
// metered (work.go), and the meter stops at the call's deadline.
func (p *PII) EndsByDeadline() {}

// Intercept implements ahp.Interceptor.
func (p *PII) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	return p.content.intercept(ctx, req)
}

func piiDecision(ev *ahp.Event, action string, kinds []string) contentDecision {
	return contentDecision{
		action: action,
		reason: subjectOf(ev) + " personal data (" + strings.Join(kinds, ", ") + ").",
		code:   "hookproxy.pii." + kinds[0],
	}
}
