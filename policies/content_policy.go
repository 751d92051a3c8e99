package policies

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// contentPolicy is what the scanning policies (secrets, pii) share: the content an event
// carries at its boundary — the message list with the request's params, or a tool's input
// — is scanned with one detector and what is found is settled by the policy's decision
// (redact.go), under the action the policy configured for that boundary.
type contentPolicy struct {
	d      scanner
	noun   string // what is found, in a refusal: "a credential"
	prefix string // the prefix of the effects' codes: "hookproxy.secrets."
	// request and response are the policy's actions on each side (actionOff: the event is
	// let through).
	request, response string
	// decision is the effect's action, reason and code for the kinds found.
	decision func(ev *ahp.Event, action string, kinds []string) contentDecision
	// refuseSplit blocks a message whose text parts show a finding only when joined (no
	// per-part edit can redact it): the model reads them as one text.
	refuseSplit bool
}

func (c *contentPolicy) intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	ev, caps, err := unpack(ctx, req)
	if err != nil {
		return nil, err
	}
	b, ok := boundaryOf(ev.Type)
	if !ok {
		return results(), nil
	}
	action := c.request
	if b.dir == dirResponse {
		action = c.response
	}
	if action == actionOff {
		return results(), nil
	}
	// Every scan of this call is metered (work.go): past its deadline or the request's
	// work budget it stops, and what was not scanned does not pass.
	d := newMeter(ctx, c.d)
	defer d.done()
	m := &d.meter
	if !b.list {
		if ev.Tool == nil || len(ev.Tool.Input) == 0 {
			return results(), nil
		}
		is := scanInput(ev.Tool.Input, d, redactPlaceholder)
		if m.stopped() != nil {
			return overBudget(m, caps)
		}
		if len(is.kinds) == 0 {
			return results(), nil
		}
		res := decideContent(ev, caps, b, d, c.decision(ev, action, is.kinds), nil, &is, false)
		if m.stopped() != nil { // a redaction re-scans what it edits
			return overBudget(m, caps)
		}
		return res, nil
	}
	// The request's params (tool descriptions, metadata, ...): params.go.
	var ext map[string]json.RawMessage
	if ev.Type == ahp.EventModelRequestBefore {
		var refuse *ahp.Effect
		ps := d.scanParams(ev.Params) // scan_cache.go
		if m.stopped() != nil {
			return overBudget(m, caps)
		}
		if refuse, ext = paramsResult(ps, action, c.noun, c.prefix, caps); refuse != nil {
			return results(*refuse), nil
		}
	}
	ls := scanItems(ev.Items, d, responseSkipsToolCalls(b))
	if m.stopped() != nil {
		return overBudget(m, caps)
	}
	if c.refuseSplit && len(ls.split) > 0 {
		reason := "A message contains " + c.noun + " split across its text parts (" + strings.Join(ls.split, ", ") + ")."
		if e, ok := block(caps, reason, c.prefix+ls.split[0]); ok {
			return results(e), nil
		}
	}
	if len(ls.hits) == 0 {
		return withExtensions(results(), ext), nil
	}
	_, textOffer := req.Params.Extensions[ahp.ExtRedactText]
	res := decideContent(ev, caps, b, d, c.decision(ev, action, ls.kinds()), &ls, nil, textOffer)
	if m.stopped() != nil { // a redaction re-scans the tool_call parts it edits
		return overBudget(m, caps)
	}
	return withExtensions(res, ext), nil
}

// responseSkipsToolCalls leaves tool_call parts of model output alone: tool arguments are
// edited at tool.before through modify(input), and the mapping layer treats tool calls of a
// response as governed there.
func responseSkipsToolCalls(b boundary) partFilter {
	if b.target != ahp.TargetResponse {
		return allParts
	}
	return skipResponseToolCalls
}
