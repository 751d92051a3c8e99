package proxy

import (
	"encoding/json"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
)

// paramsRedactions collects the hookproxy.redact_params extensions of a settled
// model.request.before (ahp.ExtRedactParams): text found in the request's params, which
// no AHP modify target covers, replaced in place before the body goes upstream. A
// malformed list, or a replacement that is not a redaction placeholder, is ignored
// with an error log: the extension can only take text out, never put new text in.
func (x *lifecycle) paramsRedactions(st *chain.Settlement) []ahp.ParamsRedaction {
	var out []ahp.ParamsRedaction
	for _, e := range st.Extensions {
		if e.Key != ahp.ExtRedactParams {
			continue
		}
		var reds []ahp.ParamsRedaction
		if err := json.Unmarshal(e.Value, &reds); err != nil {
			x.s.logAt(x.ctx, zapcore.ErrorLevel, "ignored a malformed "+ahp.ExtRedactParams+" extension",
				zap.String("backend", e.BackendID), zap.Error(err))
			continue
		}
		for _, r := range reds {
			if r.Find == "" || !ahp.RedactionPlaceholder.MatchString(r.Replace) {
				x.s.logAt(x.ctx, zapcore.ErrorLevel, "ignored a "+ahp.ExtRedactParams+" entry whose replacement is not a redaction placeholder",
					zap.String("backend", e.BackendID))
				continue
			}
			out = append(out, r)
		}
	}
	return out
}
