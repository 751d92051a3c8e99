package ahp

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/hookproxy/hookproxy/internal/jsonpath"
)

// Capabilities and the manifest (AHP-CAP-001, AHP-CAP-002; AHP spec, capability-auth.md
// "Discovery and honest capabilities").

var (
	coreEffects   = []string{EffectDeny, EffectAllow, EffectAsk, EffectModify, EffectMessage, EffectReturn, EffectFlow, EffectInject}
	modifyTargets = []string{TargetInput, TargetOutput, TargetPrompt, TargetRequest, TargetResponse, TargetContent,
		TargetInstructions, TargetSummary, TargetWorkspace}
)

// IsEffectType reports whether t is one of the eight core effect types of the draft.
func IsEffectType(t string) bool { return slices.Contains(coreEffects, t) }

// ValidateCapabilities validates a capability advertisement. With eventType set it must also
// lie within that event's per-event bound (EventBounds): only the event's effects, its own
// modify target and its flow operations. eventType "" checks the generic shape only.
func ValidateCapabilities(eventType string, caps json.RawMessage) error {
	_, err := validate(caps, "", func(v *validator, x any) {
		if eventType != "" && !IsInterceptable(eventType) {
			v.failf("$", "%q is not an interceptable event, so it has no capabilities", eventType)
			return
		}
		v.capabilities("$", x, eventType)
	})
	return err
}

// capabilities checks an advertisement; eventType, when interceptable, applies its bound.
func (v *validator) capabilities(path string, x any, eventType string) {
	c, ok := v.object(path, x)
	if !ok {
		return
	}
	bound, bounded := EventBounds[eventType]
	var effects []string
	if e, has := c["effects"]; !has {
		// AHP-CAP-002: every interception advertises its effects; {} grants nothing.
		v.failf(path, "\"effects\" is required")
	} else if arr, ok := v.array(jsonpath.Member(path, "effects"), e); ok {
		ep := jsonpath.Member(path, "effects")
		seen := map[string]bool{}
		for i, item := range arr {
			ip := jsonpath.Index(ep, i)
			s, isStr := item.(string)
			switch {
			case !isStr:
				v.failf(ip, "must be a string, not %s", jsonpath.TypeName(item))
				continue
			case seen[s]:
				v.failf(ip, "duplicate effect %q", s)
				continue
			case !slices.Contains(coreEffects, s) && !IsReverseDNS(s):
				v.failf(ip, "unknown effect %q", s)
				continue
			case bounded && !slices.Contains(bound.Effects, s):
				v.failf(ip, "effect %q cannot be advertised for %s", s, eventType)
			}
			seen[s] = true
			effects = append(effects, s)
		}
	}
	has := func(e string) bool { return slices.Contains(effects, e) }

	// The modify, flow and inject blocks exist exactly when their effect is advertised.
	for _, blk := range []string{EffectModify, EffectFlow, EffectInject} {
		_, present := c[blk]
		if _, listed := c["effects"]; !listed {
			continue
		}
		switch {
		case has(blk) && !present:
			v.failf(path, "%q is required when effects lists %q", blk, blk)
		case present && !has(blk):
			v.failf(jsonpath.Member(path, blk), "is only allowed when effects lists %q", blk)
		}
	}
	if m, present := c["modify"]; present {
		v.modifyCaps(jsonpath.Member(path, "modify"), m, bound.Target, bounded)
	}
	if f, present := c["flow"]; present {
		v.flowCaps(jsonpath.Member(path, "flow"), f, bound.FlowOps, bounded, eventType)
	}
	if in, present := c["inject"]; present {
		v.injectCaps(jsonpath.Member(path, "inject"), in)
	}
	if el, present := c["elicitation"]; present {
		ep := jsonpath.Member(path, "elicitation")
		if m, ok := v.object(ep, el); ok {
			for _, k := range []string{"form", "url"} {
				if mode, has := m[k]; has {
					v.object(jsonpath.Member(ep, k), mode)
				}
			}
		}
	}
}

// modifyCaps checks {<target>: {replace, merge}}: at least one target, both booleans
// present, at least one true (an all-false entry would advertise nothing), and only the
// event's own target.
func (v *validator) modifyCaps(path string, x any, target string, bounded bool) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	if len(m) == 0 {
		v.failf(path, "must name at least one target")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		tp := jsonpath.Member(path, k)
		if bounded && k != target {
			if target == "" {
				v.failf(tp, "this event has no modification target")
			} else {
				v.failf(tp, "target %q cannot be advertised here (the event's target is %q)", k, target)
			}
			continue
		}
		if !slices.Contains(modifyTargets, k) {
			// The generic shape leaves unknown target names open; they grant nothing.
			continue
		}
		ops, ok := v.object(tp, m[k])
		if !ok {
			continue
		}
		v.required(tp, ops, "replace", "merge")
		anyTrue := false
		for _, op := range []string{"replace", "merge"} {
			if b, has := ops[op]; has && v.boolean(jsonpath.Member(tp, op), b) && b.(bool) {
				anyTrue = true
			}
		}
		if !anyTrue {
			v.failf(tp, "must allow replace or merge")
		}
	}
}

// flowCaps checks {operations, remainingContinuations?, continuationCount?, maxContinuations?};
// continue needs its allowance stated (remainingContinuations and continuationCount).
func (v *validator) flowCaps(path string, x any, allowed []string, bounded bool, eventType string) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	hasContinue := false
	if !v.required(path, m, "operations") {
		return
	}
	op := jsonpath.Member(path, "operations")
	if arr, ok := v.array(op, m["operations"]); ok {
		if len(arr) == 0 {
			v.failf(op, "must name at least one operation")
		}
		seen := map[string]bool{}
		for i, e := range arr {
			ip := jsonpath.Index(op, i)
			s, ok := v.enum(ip, e, OpStop, OpContinue)
			if !ok {
				continue
			}
			if seen[s] {
				v.failf(ip, "duplicate operation %q", s)
			}
			seen[s] = true
			if bounded && !slices.Contains(allowed, s) {
				v.failf(ip, "flow %q cannot be advertised for %s", s, eventType)
			}
			if s == OpContinue {
				hasContinue = true
			}
		}
	}
	v.countMembers(path, m, "remainingContinuations", "continuationCount", "maxContinuations")
	if hasContinue {
		v.required(path, m, "remainingContinuations", "continuationCount")
	}
}

// injectCaps checks {context: {append: true, deliverAt: [now|next_turn, ...]}}.
func (v *validator) injectCaps(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	if !v.required(path, m, "context") {
		return
	}
	cp := jsonpath.Member(path, "context")
	ctx, ok := v.object(cp, m["context"])
	if !ok {
		return
	}
	v.required(cp, ctx, "append", "deliverAt")
	if a, has := ctx["append"]; has {
		if b, isBool := a.(bool); !isBool || !b {
			v.failf(jsonpath.Member(cp, "append"), "must be true (injection only appends)")
		}
	}
	if d, has := ctx["deliverAt"]; has {
		dp := jsonpath.Member(cp, "deliverAt")
		if arr, ok := v.array(dp, d); ok {
			if len(arr) == 0 {
				v.failf(dp, "must name at least one delivery point")
			}
			seen := map[string]bool{}
			for i, e := range arr {
				if s, ok := v.enum(jsonpath.Index(dp, i), e, DeliverNow, DeliverNextTurn); ok {
					if seen[s] {
						v.failf(jsonpath.Index(dp, i), "duplicate %q", s)
					}
					seen[s] = true
				}
			}
		}
	}
}

// ValidateManifest validates a harness manifest (AHP spec, capability-auth.md "Discovery and
// honest capabilities").
func ValidateManifest(manifest json.RawMessage) error {
	_, err := validate(manifest, "", func(v *validator, x any) { v.manifest("$", x) })
	return err
}

// manifest checks the nine required keys of a manifest. A manifest describes capabilities
// and never asserts identity.
func (v *validator) manifest(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "events", "gaps", "transports", "authentication", "toolPaths", "contentCategories",
		"limits", "managedPolicy", "correlationIdentityFields")
	v.forbidden(path, m, "in a manifest (discovery is not an identity assertion)", "identity")
	v.optional(path, m, "events", v.manifestEvents)
	v.optional(path, m, "gaps", func(at string, y any) { v.gaps(at, y, false) })
	enumSet := func(key string, values ...string) {
		x, has := m[key]
		if !has {
			return
		}
		kp := jsonpath.Member(path, key)
		for i, s := range v.uniqueStrings(kp, x, 0, 0) {
			if !slices.Contains(values, s) {
				v.failf(jsonpath.Index(kp, i), "%q is not one of %v", s, values)
			}
		}
	}
	enumSet("transports", "http", "stdio", "in_process")
	enumSet("authentication", "bearer", "oauth")
	for _, k := range []string{"toolPaths", "contentCategories", "correlationIdentityFields"} {
		if x, has := m[k]; has {
			v.uniqueStrings(jsonpath.Member(path, k), x, 0, 1)
		}
	}
	if l, has := m["limits"]; has {
		lp := jsonpath.Member(path, "limits")
		if limits, ok := v.object(lp, l); ok {
			v.countMembers(lp, limits, "maxUploadBytes", "maxContinuations", "minTimeoutMs", "maxTimeoutMs")
		}
	}
	if mp, has := m["managedPolicy"]; has {
		pp := jsonpath.Member(path, "managedPolicy")
		if pol, ok := v.object(pp, mp); ok {
			v.required(pp, pol, "scopes", "disableable")
			managed := false
			if s, has := pol["scopes"]; has {
				for _, sc := range v.uniqueStrings(jsonpath.Member(pp, "scopes"), s, 0, 0) {
					if !slices.Contains([]string{"user", "project", "managed"}, sc) {
						v.failf(jsonpath.Member(pp, "scopes"), "%q is not user, project or managed", sc)
					}
					managed = managed || sc == "managed"
				}
			}
			if d, has := pol["disableable"]; has && v.boolean(jsonpath.Member(pp, "disableable"), d) && managed && d.(bool) {
				v.failf(jsonpath.Member(pp, "disableable"), "must be false when scopes include \"managed\"")
			}
		}
	}
}

func (v *validator) manifestEvents(path string, x any) {
	arr, ok := v.array(path, x)
	if !ok {
		return
	}
	for i, e := range arr {
		ip := jsonpath.Index(path, i)
		m, ok := v.object(ip, e)
		if !ok {
			continue
		}
		v.required(ip, m, "event", "modes")
		event := ""
		if ev, has := m["event"]; has {
			if s, isStr := ev.(string); isStr && IsEventType(s) {
				event = s
			} else {
				v.failf(jsonpath.Member(ip, "event"), "must be an event of the catalogue")
			}
		}
		intercept := false
		if md, has := m["modes"]; has {
			mp := jsonpath.Member(ip, "modes")
			modes := v.uniqueStrings(mp, md, 1, 0)
			for _, mode := range modes {
				if mode != "observe" && mode != "intercept" {
					v.failf(mp, "%q is not observe or intercept", mode)
				}
				intercept = intercept || mode == "intercept"
			}
		}
		if intercept && event != "" && !IsInterceptable(event) {
			v.failf(jsonpath.Member(ip, "modes"), "%s is observe-only and cannot be intercepted", event)
		}
		caps, hasCaps := m["capabilities"]
		if intercept && !hasCaps {
			v.failf(ip, "\"capabilities\" is required when modes include intercept")
		}
		if !hasCaps {
			continue
		}
		cp := jsonpath.Member(ip, "capabilities")
		bound := ""
		if IsInterceptable(event) {
			bound = event
		}
		v.capabilities(cp, caps, bound)
		if !intercept {
			// Observation grants no effect.
			if c, ok := caps.(map[string]any); ok {
				if eff, ok := c["effects"].([]any); ok && len(eff) > 0 {
					v.failf(jsonpath.Member(cp, "effects"), "must be empty when the event is only observed")
				}
			}
		}
	}
}
