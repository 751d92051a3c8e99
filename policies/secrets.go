package policies

import (
	"context"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// SecretsConfig configures the secrets policy. The zero value is the default.
//
//	{"action": "redact", "kinds": ["aws_access_key_id", "github_token"],
//	 "allow": ["^AKIAIOSFODNN7EXAMPLE$"], "minEntropy": 3.0, "minLength": 10}
type SecretsConfig struct {
	// Action is "redact" (default: each credential is replaced by
	// [REDACTED:<kind>:<first 8 hex of sha256(credential)>]) or "deny" (the operation is
	// refused; the reason names the kind, never the value).
	Action string `json:"action,omitempty"`
	// Kinds limits detection to these kinds (default: every kind of SecretKinds).
	Kinds []string `json:"kinds,omitempty"`
	// Allow holds RE2 patterns of known-safe values: a detected value matched by any of
	// them (unanchored; write ^…$ for an exact value) is left alone.
	Allow []string `json:"allow,omitempty"`
	// MinEntropy is the Shannon entropy, in bits per character, that a value assigned to a
	// credential-like name (password, secret, token, api_key, ...) needs to be reported as
	// generic_secret (default 3.0).
	MinEntropy float64 `json:"minEntropy,omitempty"`
	// MinLength is the minimum length of such a value (default 10).
	MinLength int `json:"minLength,omitempty"`
}

// Defaults of SecretsConfig.
const (
	DefaultSecretsMinEntropy = 3.0
	DefaultSecretsMinLength  = 10
)

// Secrets is the secrets policy: it finds credentials in request messages, prompts, tool
// inputs, tool outputs and (when subscribed) model responses, and redacts them or refuses
// the operation.
//
// Effects, by what the request advertises (AHP spec, capability-auth.md "Discovery and honest
// capabilities"):
//   - redact at a message-list boundary (model.request.before → request, turn.start →
//     prompt, tool.after → output, model.response.after / turn.finish.before → response):
//     modify replace of the whole list, every message and part id kept, only the secret
//     substrings replaced. Only when replace is advertised for that target and every text
//     part of the list is visible to the policy (a projected event withholding text gives no
//     authority to replace it).
//   - redact at tool.before: modify(input) replace of the whole input object with secrets
//     replaced inside string values, recursively; merge of the changed top-level members
//     when only merge is advertised.
//   - when redaction is not possible: deny if advertised, else no effect.
//   - action deny: deny if advertised, else flow stop if advertised, else redaction as
//     above if possible, else no effect.
//
// At model.response.after and turn.finish.before, tool_call parts are not edited: tool
// arguments are governed at tool.before, where modify(input) applies to them.
type Secrets struct {
	scan    *secretScanner
	content contentPolicy
}

var _ ahp.Interceptor = (*Secrets)(nil)

// NewSecrets validates cfg and builds the policy.
func NewSecrets(cfg SecretsConfig) (*Secrets, error) {
	action := cfg.Action
	switch action {
	case "":
		action = actionRedact
	case actionRedact, actionDeny:
	default:
		return nil, configErrorf("action: must be %q or %q, got %q", actionRedact, actionDeny, cfg.Action)
	}
	kinds, err := newKindSet(cfg.Kinds, SecretKinds, "kinds")
	if err != nil {
		return nil, err
	}
	allow, err := compileAllow(cfg.Allow, "allow")
	if err != nil {
		return nil, err
	}
	minEntropy := cfg.MinEntropy
	switch {
	case minEntropy == 0:
		minEntropy = DefaultSecretsMinEntropy
	case minEntropy < 0 || minEntropy > 8:
		return nil, configErrorf("minEntropy: must be between 0 and 8 bits per character, got %v", cfg.MinEntropy)
	}
	minLength := cfg.MinLength
	switch {
	case minLength == 0:
		minLength = DefaultSecretsMinLength
	case minLength < 4 || minLength > 256:
		return nil, configErrorf("minLength: must be between 4 and 256, got %d", cfg.MinLength)
	}
	p := &Secrets{scan: newSecretScanner(kinds, allow, minEntropy, minLength)}
	p.content = contentPolicy{d: p.scan, noun: "a credential", prefix: "hookproxy.secrets.", refuseSplit: true,
		request: action, response: action, decision: secretsDecision}
	return p, nil
}

// ReadsEventOnly marks the policy as a reader of the events it is given
// (transport.EventReader): it writes none of them and keeps none of them (its result cache
// and list memo keep their own copies), so the in-process transport need not copy them.
func (p *Secrets) ReadsEventOnly() {}

// EndsByDeadline marks the policy as bounded (transport.BoundedPolicy): every scan is
// metered (work.go), and the meter stops at the call's deadline.
func (p *Secrets) EndsByDeadline() {}

// Intercept implements ahp.Interceptor.
func (p *Secrets) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	return p.content.intercept(ctx, req)
}

func secretsDecision(ev *ahp.Event, action string, kinds []string) contentDecision {
	noun := "a credential"
	if len(kinds) > 1 {
		noun = "credentials"
	}
	return contentDecision{
		action: action,
		reason: subjectOf(ev) + " " + noun + " (" + strings.Join(kinds, ", ") + ").",
		code:   "hookproxy.secrets." + kinds[0],
	}
}

// subjectOf starts a refusal reason with what holds the finding, for example
// "The arguments of tool call Bash contain".
func subjectOf(ev *ahp.Event) string {
	name := ""
	if ev.Tool != nil && ev.Tool.Name != "" {
		name = " " + ev.Tool.Name
	}
	switch ev.Type {
	case ahp.EventToolBefore, "tool.permission.request":
		return "The arguments of tool call" + name + " contain"
	case ahp.EventToolAfter:
		return "The output of tool" + name + " contains"
	case ahp.EventModelResponseAfter, ahp.EventTurnFinishBefore:
		return "The model response contains"
	case ahp.EventTurnStart:
		return "The prompt contains"
	default:
		return "The request contains"
	}
}
