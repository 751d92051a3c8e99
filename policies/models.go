package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// ModelsConfig configures the models policy. The zero value allows everything.
//
//	{"allow": ["gpt-4.1*", "claude-sonnet-*"], "maxOutputTokens": 8192, "requireMaxTokens": false}
type ModelsConfig struct {
	// Allow, when set, lists path.Match globs of the model ids that may be requested
	// (case-sensitive); any other model is denied.
	Allow []string `json:"allow,omitempty"`
	// MaxOutputTokens caps the output tokens a request may ask for, read from the request
	// params max_tokens, max_completion_tokens and max_output_tokens (the largest one
	// present counts). 0 means no cap.
	MaxOutputTokens int64 `json:"maxOutputTokens,omitempty"`
	// RequireMaxTokens denies requests that set none of those params while a cap is
	// configured (otherwise the provider's own default, possibly larger, applies).
	RequireMaxTokens bool `json:"requireMaxTokens,omitempty"`
}

// outputTokenParams are the native names of the output token limit (Anthropic and OpenAI
// chat: max_tokens; OpenAI chat: max_completion_tokens; OpenAI responses:
// max_output_tokens).
var outputTokenParams = []string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// Models is the models policy. At model.request.before it denies requests for a model
// (model.id, and the body's own model member when it names another) outside the allow list or asking for more output tokens than the cap: deny if
// advertised, else flow stop if advertised, else no effect. Other events get no effects.
type Models struct {
	allow      []string
	maxTokens  int64
	requireCap bool
}

var _ ahp.Interceptor = (*Models)(nil)

// NewModels validates cfg and builds the policy.
func NewModels(cfg ModelsConfig) (*Models, error) {
	for i, g := range cfg.Allow {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return nil, configErrorf("allow[%d]: invalid glob %q", i, g)
		}
	}
	if cfg.MaxOutputTokens < 0 {
		return nil, configErrorf("maxOutputTokens: must not be negative, got %d", cfg.MaxOutputTokens)
	}
	if cfg.RequireMaxTokens && cfg.MaxOutputTokens == 0 {
		return nil, configErrorf("requireMaxTokens: needs maxOutputTokens")
	}
	return &Models{allow: cfg.Allow, maxTokens: cfg.MaxOutputTokens, requireCap: cfg.RequireMaxTokens}, nil
}

// Intercept implements ahp.Interceptor.
func (p *Models) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	ev, caps, err := unpack(ctx, req)
	if err != nil {
		return nil, err
	}
	if ev.Type != ahp.EventModelRequestBefore {
		return results(), nil
	}
	reason, code, denied := p.evaluate(ev)
	if !denied {
		return results(), nil
	}
	if e, ok := block(caps, reason, code); ok {
		return results(e), nil
	}
	return results(), nil
}

func (p *Models) evaluate(ev *ahp.Event) (reason, code string, denied bool) {
	if len(p.allow) > 0 {
		id := ""
		if ev.Model != nil {
			id = ev.Model.ID
		}
		if id == "" {
			return "The request names no model, and only allowed models may be used.", "hookproxy.models.not_allowed", true
		}
		if !globAny(p.allow, id) {
			return fmt.Sprintf("Model %s is not allowed by policy.", id), "hookproxy.models.not_allowed", true
		}
		// model.id is the model that serves the request; on an Azure deployment path that
		// is the deployment the path names, while the body may name another model (Azure
		// ignores it, an OpenAI-compatible gateway behind the same path may not). Both must
		// be allowed.
		if body, ok := bodyModel(ev.Params); ok && body != id && !globAny(p.allow, body) {
			return fmt.Sprintf("Model %s is not allowed by policy.", body), "hookproxy.models.not_allowed", true
		}
	}
	if p.maxTokens == 0 {
		return "", "", false
	}
	requested, name, found := requestedOutputTokens(ev.Params)
	if !found {
		if p.requireCap {
			return fmt.Sprintf("The request sets no output token limit; policy requires one of at most %d.", p.maxTokens), "hookproxy.models.max_tokens", true
		}
		return "", "", false
	}
	if requested > float64(p.maxTokens) {
		return fmt.Sprintf("The request asks for %s output tokens (%s), more than the policy limit of %d.",
			strconv.FormatFloat(requested, 'f', -1, 64), name, p.maxTokens), "hookproxy.models.max_tokens", true
	}
	return "", "", false
}

// requestedOutputTokens reads the largest numeric output-token limit among the top-level
// params members named in outputTokenParams. Values that are not JSON numbers are
// ignored (the provider rejects them anyway).
func requestedOutputTokens(params json.RawMessage) (value float64, name string, found bool) {
	if len(params) == 0 {
		return 0, "", false
	}
	want := func(k string) bool {
		for _, n := range outputTokenParams {
			if k == n {
				return true
			}
		}
		return false
	}
	_ = topLevelMembers(params, want, func(k string, v jsonValue) {
		if v.kind != jsonNumber {
			return
		}
		f, err := strconv.ParseFloat(v.lit, 64)
		if err != nil {
			return
		}
		if !found || f > value {
			value, name, found = f, k, true
		}
	})
	return value, name, found
}

// bodyModel reads the request body's own "model" member from params (the OpenAI and
// Anthropic codecs keep it there). Only a non-empty string counts: the provider rejects
// any other value.
func bodyModel(params json.RawMessage) (model string, found bool) {
	if len(params) == 0 {
		return "", false
	}
	_ = topLevelMembers(params, func(k string) bool { return k == "model" }, func(_ string, v jsonValue) {
		if v.kind == jsonString && v.str != "" {
			model, found = v.str, true
		}
	})
	return model, found
}
