package policies

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Text the model reads outside the messages — tool descriptions, response_format schemas,
// metadata, user, prompt variables — travels in model.request.before's opaque params,
// which no AHP modify target covers. The content policies scan it as well:
// with action deny a finding refuses the request; with action redact the policy asks the
// proxy to replace each found value in place through the hookproxy.redact_params result
// extension (ahp.ExtRedactParams), which can only take text out.

// paramsScan is what a scan of a request's params found.
type paramsScan struct {
	kinds []string
	reds  []ahp.ParamsRedaction
}

// scanParams scans every string of params and lists each distinct found value with its
// placeholder.
func scanParams(params json.RawMessage, d detector) paramsScan {
	var ps paramsScan
	if len(params) == 0 {
		return ps
	}
	is := scanInput(params, d, func(f Finding, value string) string {
		repl := placeholder(f.Kind, value)
		r := ahp.ParamsRedaction{Find: value, Replace: repl}
		if value != "" && !slices.Contains(ps.reds, r) {
			ps.reds = append(ps.reds, r)
		}
		return repl
	})
	ps.kinds = is.kinds
	if is.raw {
		ps.reds = nil // not an object: nothing the proxy could patch in place
	}
	return ps
}

// paramsResult settles a params finding by the policy's action. It returns the deny (or
// stop) to answer with when the request must be refused, otherwise the extensions to
// attach to the policy's result (nil when nothing was found).
func paramsResult(ps paramsScan, action, noun, codePrefix string, caps *ahp.Capabilities) (refuse *ahp.Effect, ext map[string]json.RawMessage) {
	if len(ps.kinds) == 0 {
		return nil, nil
	}
	if action == actionRedact && len(ps.reds) > 0 {
		raw, err := json.Marshal(ps.reds)
		if err == nil {
			return nil, map[string]json.RawMessage{ahp.ExtRedactParams: raw}
		}
	}
	reason := "The request's parameters (tool descriptions, metadata, ...) contain " + noun + " (" + strings.Join(ps.kinds, ", ") + ")."
	if e, ok := block(caps, reason, codePrefix+ps.kinds[0]); ok {
		return &e, nil
	}
	return nil, nil
}

// withExtensions adds result extensions to r's.
func withExtensions(r *ahp.InterceptResult, ext map[string]json.RawMessage) *ahp.InterceptResult {
	if len(ext) == 0 {
		return r
	}
	if r.Extensions == nil {
		r.Extensions = make(map[string]json.RawMessage, len(ext))
	}
	for k, v := range ext {
		r.Extensions[k] = v
	}
	return r
}
