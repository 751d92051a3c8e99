package ahp

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/hookproxy/hookproxy/internal/jsonpath"
)

// Event validation (AHP spec, execution-payloads.md). The envelope is open — unknown
// top-level members are ignored (AHP-CORE-003) — but every nested protocol object is closed,
// and each event type has its own required, forbidden and cross-field rules.

// fieldCheck validates one event-specific member.
type fieldCheck func(v *validator, path string, x any)

// eventRule is the shape of one event type.
type eventRule struct {
	required  []string // event-specific members that must be present
	forbidden []string // members of other events that must not appear
	// messageItems: items is a model-visible slot (messages); otherwise bare parts.
	messageItems bool
	// closedTurn: the execution-event schemas close the turn object.
	closedTurn bool
	fields     map[string]fieldCheck
	// check runs the cross-field rules after the members were checked.
	check func(v *validator, path string, ev map[string]any)
}

// Member checks shared by several event types. They are functions, not closures built in
// an init, so that the rule table below is plain package-level data.
func checkModel(v *validator, p string, x any)        { v.stringRecord(p, x, "id", "provider") }
func checkAttempt(v *validator, p string, x any)      { v.attempt(p, x) }
func checkExecution(v *validator, p string, x any)    { v.execution(p, x) }
func checkErrorInfo(v *validator, p string, x any)    { v.errorInfo(p, x) }
func checkCall(v *validator, p string, x any)         { v.identity(p, x, true) }
func checkTool(v *validator, p string, x any)         { v.tool(p, x) }
func checkBatch(v *validator, p string, x any)        { v.batch(p, x) }
func checkToolPath(v *validator, p string, x any)     { v.str(p, x, 1) }
func checkNonEmpty(v *validator, p string, x any)     { v.str(p, x, 1) }
func checkBoolean(v *validator, p string, x any)      { v.boolean(p, x) }
func checkObject(v *validator, p string, x any)       { v.object(p, x) }
func checkNonNegative(v *validator, p string, x any)  { v.nonNegative(p, x) }
func checkCount(v *validator, p string, x any)        { v.integer(p, x, 0) }
func checkMessage(v *validator, p string, x any)      { v.message(p, x, "") }
func checkTextParts(v *validator, p string, x any)    { v.parts(p, x, true) }
func checkAttemptUsage(v *validator, p string, x any) { v.usage(p, x, false) }
func checkTurnUsage(v *validator, p string, x any)    { v.usage(p, x, true) }
func checkTask(v *validator, p string, x any)         { v.task(p, x) }
func checkWorkspace(v *validator, p string, x any)    { v.workspace(p, x) }

// checkEnum accepts only the listed string values.
func checkEnum(values ...string) fieldCheck {
	return func(v *validator, p string, x any) { v.enum(p, x, values...) }
}

var (
	checkFinishOutcome = checkEnum("completed", "failed", "cancelled", "max_iterations")
	checkToolOutcome   = checkEnum("ok", "error", "denied", "cancelled", "timeout")
)

func checkConfigChange(after bool) fieldCheck {
	return func(v *validator, p string, x any) { v.configChange(p, x, after) }
}

// checkToolFields is the member set every tool.* event shares, plus extra.
func checkToolFields(extra map[string]fieldCheck) map[string]fieldCheck {
	m := map[string]fieldCheck{"call": checkCall, "tool": checkTool, "path": checkToolPath, "batch": checkBatch}
	for k, f := range extra {
		m[k] = f
	}
	return m
}

// eventRules is the rule table: one entry per event type.
var eventRules = map[string]*eventRule{
	"session.start": {
		required:     []string{"session", "trigger", "harness", "permissionMode", "manifest", "items"},
		forbidden:    []string{"tool", "outcome"},
		messageItems: true,
		fields: map[string]fieldCheck{
			"trigger":        checkEnum("startup", "resume", "clear", "compact", "fork"),
			"resumedFrom":    checkCall,
			"permissionMode": checkNonEmpty,
			"harness":        func(v *validator, p string, x any) { v.stringRecord(p, x, "name", "version") },
			"manifest":       func(v *validator, p string, x any) { v.manifest(p, x) },
		},
		check: func(v *validator, p string, ev map[string]any) {
			if t, _ := ev["trigger"].(string); t == "clear" || t == "fork" {
				if _, has := ev["resumedFrom"]; !has {
					v.failf(p, "\"resumedFrom\" is required when trigger is %q", t)
				}
			}
		},
	},
	"session.end": {
		required:  []string{"session", "outcome", "reason"},
		forbidden: []string{"tool"},
		fields: map[string]fieldCheck{
			"outcome":  checkEnum("completed", "cancelled", "error", "unknown"),
			"reason":   checkNonEmpty,
			"counters": func(v *validator, p string, x any) { v.counters(p, x) },
		},
	},
	"config.change.before": {required: []string{"change"}, fields: map[string]fieldCheck{"change": checkConfigChange(false)}},
	"config.change.after":  {required: []string{"change"}, fields: map[string]fieldCheck{"change": checkConfigChange(true)}},
	"turn.start": {
		required:     []string{"turn", "trigger", "items"},
		messageItems: true,
		closedTurn:   true,
		fields: map[string]fieldCheck{
			"trigger":      checkEnum("user", "continuation", "hook", "external"),
			"expandedFrom": checkNonEmpty,
		},
	},
	"turn.finish.before": {
		required:     []string{"turn", "outcome", "continuationCount", "items"},
		messageItems: true,
		closedTurn:   true,
		fields: map[string]fieldCheck{
			"outcome":           checkFinishOutcome,
			"continuationCount": checkCount,
			"lastAssistantItem": checkCall,
			"usage":             checkTurnUsage,
		},
	},
	"turn.end": {
		required:     []string{"turn", "outcome", "continuationCount", "items"},
		messageItems: true,
		closedTurn:   true,
		fields: map[string]fieldCheck{
			"outcome":           checkFinishOutcome,
			"continuationCount": checkCount,
			"lastAssistantItem": checkCall,
			"usage":             checkTurnUsage,
			"error":             checkErrorInfo,
		},
		check: func(v *validator, p string, ev map[string]any) {
			if o, _ := ev["outcome"].(string); o == "completed" {
				v.forbidden(p, ev, "when outcome is \"completed\"", "error")
			}
		},
	},
	"turn.progress": {
		required:   []string{"turn", "item", "delta", "final"},
		closedTurn: true,
		fields:     map[string]fieldCheck{"item": checkCall, "delta": checkMessage, "final": checkBoolean},
	},
	"model.request.before": {
		required:     []string{"model", "attempt", "params", "items"},
		forbidden:    []string{"usage", "execution", "finishReason", "latencyMs", "error"},
		messageItems: true,
		closedTurn:   true,
		fields:       map[string]fieldCheck{"model": checkModel, "attempt": checkAttempt, "params": checkObject},
	},
	"model.response.after": {
		required:     []string{"model", "attempt", "execution", "items", "finishReason"},
		forbidden:    []string{"error"},
		messageItems: true,
		closedTurn:   true,
		fields: map[string]fieldCheck{
			"model": checkModel, "attempt": checkAttempt, "execution": checkExecution, "usage": checkAttemptUsage,
			"finishReason": checkNonEmpty, "latencyMs": checkNonNegative,
		},
		check: func(v *validator, p string, ev map[string]any) {
			// A supplied result fabricates no usage or latency.
			if status, reason := executionOf(ev); status == ExecutionSkipped {
				if reason != "" && reason != SkipSuppliedResult {
					v.failf(jsonpath.Member(jsonpath.Member(p, "execution"), "reason"), "must be %q on checkModel.response.after", SkipSuppliedResult)
				}
				v.forbidden(p, ev, "when the response was a supplied result (checkExecution skipped)", "usage", "latencyMs")
			}
		},
	},
	"model.error": {
		required:   []string{"model", "attempt", "execution", "error"},
		forbidden:  []string{"finishReason"},
		closedTurn: true,
		fields: map[string]fieldCheck{
			"model": checkModel, "attempt": checkAttempt, "execution": checkExecution, "error": checkErrorInfo,
			"usage": checkAttemptUsage, "latencyMs": checkNonNegative, "recovery": checkNonEmpty,
		},
		check: func(v *validator, p string, ev map[string]any) {
			if status, _ := executionOf(ev); status != "" && status != ExecutionExecuted {
				v.failf(jsonpath.Member(jsonpath.Member(p, "execution"), "status"), "must be %q on checkModel.error", ExecutionExecuted)
			}
		},
	},
	"model.switch.before": {
		required:   []string{"current", "proposed", "reason"},
		forbidden:  []string{"previous"},
		closedTurn: true,
		fields: map[string]fieldCheck{
			"current": checkModel, "proposed": checkModel, "reason": checkNonEmpty,
			"pricing": func(v *validator, p string, x any) { v.pricing(p, x) },
		},
	},
	"model.switch.after": {
		required:   []string{"previous", "current", "reason"},
		forbidden:  []string{"proposed"},
		closedTurn: true,
		fields:     map[string]fieldCheck{"previous": checkModel, "current": checkModel, "reason": checkNonEmpty},
	},
	"tool.before": {
		required:  []string{"call", "tool", "path"},
		forbidden: []string{"outcome", "execution", "durationMs", "fileChanges"},
		fields:    checkToolFields(nil),
	},
	"tool.after": {
		required:     []string{"outcome", "execution", "call", "tool", "path", "items"},
		messageItems: true,
		fields: checkToolFields(map[string]fieldCheck{
			"outcome": checkToolOutcome, "execution": checkExecution, "error": checkErrorInfo, "durationMs": checkNonNegative,
			"fileChanges": func(v *validator, p string, x any) {
				if arr, ok := v.array(p, x); ok {
					for i, e := range arr {
						v.fileChange(jsonpath.Index(p, i), e)
					}
				}
			},
		}),
		check: func(v *validator, p string, ev map[string]any) {
			outcome, _ := ev["outcome"].(string)
			if outcome == "error" {
				if _, has := ev["error"]; !has {
					v.failf(p, "\"error\" is required when outcome is \"error\"")
				}
			} else if _, isStr := ev["outcome"].(string); isStr {
				v.forbidden(p, ev, "unless outcome is \"error\"", "error")
			}
			v.deniedIsPolicySkip(p, ev, outcome)
			if status, _ := executionOf(ev); status == ExecutionSkipped {
				v.forbidden(p, ev, "when the checkCall was not executed (checkExecution skipped)", "durationMs", "fileChanges")
			}
		},
	},
	"tool.permission.request": {
		required:   []string{"call", "tool", "path", "suggestions", "sandboxBypass"},
		forbidden:  []string{"decision", "decidedBy", "outcome", "execution"},
		closedTurn: true,
		fields: checkToolFields(map[string]fieldCheck{
			"suggestions": func(v *validator, p string, x any) {
				if arr, ok := v.array(p, x); ok {
					for i, e := range arr {
						v.object(jsonpath.Index(p, i), e)
					}
				}
			},
			"sandboxBypass": checkBoolean,
		}),
	},
	"tool.permission.resolved": {
		required:   []string{"call", "tool", "path", "decision", "decidedBy"},
		closedTurn: true,
		fields: checkToolFields(map[string]fieldCheck{
			"decision":  checkEnum("allow", "deny"),
			"decidedBy": checkEnum("user", "policy", "hook", "auto", "classifier"),
		}),
	},
	"tool.progress": {
		required:   []string{"call", "tool", "path", "partialOutput", "backgrounded"},
		forbidden:  []string{"outcome", "execution"},
		closedTurn: true,
		fields:     checkToolFields(map[string]fieldCheck{"partialOutput": checkMessage, "backgrounded": checkBoolean}),
	},
	"tool.batch.after": {
		required:   []string{"batch", "calls"},
		closedTurn: true,
		fields: map[string]fieldCheck{
			"batch": checkCall, // {id, synthesized?}: the aggregate boundary names only the checkBatch
			"calls": func(v *validator, p string, x any) { v.batchCalls(p, x) },
		},
	},
	"context.compact.before": {
		required:     []string{"trigger", "items"},
		forbidden:    []string{"summary", "removed", "execution"},
		messageItems: true,
		closedTurn:   true,
		fields: map[string]fieldCheck{
			"trigger":      checkEnum("auto", "manual", "hook"),
			"instructions": checkTextParts,
			"tokenCounts": func(v *validator, p string, x any) {
				if m := v.tokenCounts(p, x); m != nil {
					v.forbidden(p, m, "before compaction ran", "after")
				}
			},
		},
	},
	"context.compact.after": {
		required:     []string{"summary", "removed", "execution"},
		messageItems: true,
		closedTurn:   true,
		fields: map[string]fieldCheck{
			"summary":   checkTextParts,
			"execution": checkExecution,
			"removed": func(v *validator, p string, x any) {
				if arr, ok := v.array(p, x); ok {
					for i, e := range arr {
						ip := jsonpath.Index(p, i)
						if m, ok := v.object(ip, e); ok {
							v.required(ip, m, "id")
							v.closed(ip, m, "id")
							v.optional(ip, m, "id", func(at string, y any) { v.str(at, y, 1) })
						}
					}
				}
			},
			"tokenCounts": func(v *validator, p string, x any) { v.tokenCounts(p, x) },
		},
		check: func(v *validator, p string, ev map[string]any) {
			if status, reason := executionOf(ev); status == ExecutionSkipped && reason != "" && reason != SkipSuppliedResult {
				v.failf(jsonpath.Member(jsonpath.Member(p, "execution"), "reason"), "must be %q on context.compact.after", SkipSuppliedResult)
			}
		},
	},
	"task.change.before":       {required: []string{"task"}, fields: map[string]fieldCheck{"task": checkTask}},
	"task.change.after":        {required: []string{"task"}, fields: map[string]fieldCheck{"task": checkTask}},
	"user.attention":           {required: []string{"attention"}, fields: map[string]fieldCheck{"attention": func(v *validator, p string, x any) { v.attention(p, x) }}},
	"user.elicitation.request": {required: []string{"elicitation"}, fields: map[string]fieldCheck{"elicitation": func(v *validator, p string, x any) { v.elicitation(p, x, false) }}},
	"user.elicitation.result":  {required: []string{"elicitation"}, fields: map[string]fieldCheck{"elicitation": func(v *validator, p string, x any) { v.elicitation(p, x, true) }}},
	"user.message.inbound":     {required: []string{"message"}, fields: map[string]fieldCheck{"message": func(v *validator, p string, x any) { v.userMessage(p, x, true) }}},
	"user.message.outbound":    {required: []string{"message"}, fields: map[string]fieldCheck{"message": func(v *validator, p string, x any) { v.userMessage(p, x, false) }}},
	"workspace.change.before":  {required: []string{"workspace"}, fields: map[string]fieldCheck{"workspace": checkWorkspace}},
	"workspace.change.after":   {required: []string{"workspace"}, fields: map[string]fieldCheck{"workspace": checkWorkspace}},
	"file.changed": {
		required: []string{"changes"},
		fields:   map[string]fieldCheck{"changes": func(v *validator, p string, x any) { v.fileChanged(p, x) }},
	},
	"hook.failure": {
		required: []string{"failure", "parentEventId"},
		fields:   map[string]fieldCheck{"failure": func(v *validator, p string, x any) { v.failure(p, x) }},
	},
}

// ValidateEvent validates one event object (the params.event member of a message).
func ValidateEvent(event json.RawMessage) error {
	_, err := validate(event, "", func(v *validator, x any) { v.event("$", x) })
	return err
}

// event validates an event and returns its type and id ("" when absent or invalid).
func (v *validator) event(path string, x any) (typ, id string) {
	ev, ok := v.object(path, x)
	if !ok {
		return "", ""
	}
	v.required(path, ev, "id", "source", "type", "time")
	if t, has := ev["type"]; has {
		s, isStr := t.(string)
		switch {
		case !isStr:
			v.failf(jsonpath.Member(path, "type"), "must be a string, not %s", jsonpath.TypeName(t))
		case !IsEventType(s):
			// Unknown event types are unsupported semantics, never ignorable.
			v.failf(jsonpath.Member(path, "type"), "unknown event type %q", s)
		default:
			typ = s
		}
	}
	if x, has := ev["id"]; has {
		id, _ = v.str(jsonpath.Member(path, "id"), x, 1)
	}
	v.optional(path, ev, "source", func(at string, y any) { v.uri(at, y) })
	v.optional(path, ev, "time", func(at string, y any) { v.dateTime(at, y) })
	v.optional(path, ev, "session", v.session)
	if x, has := ev["parentEventId"]; has {
		// Omit a parent that is unknown; an empty one is not a parent.
		v.str(jsonpath.Member(path, "parentEventId"), x, 1)
	}
	v.optional(path, ev, "synthesized", func(at string, y any) { v.boolean(at, y) })
	v.optional(path, ev, "extensions", v.extensions)
	v.optional(path, ev, "gaps", func(at string, y any) { v.gaps(at, y, false) })
	rule := eventRules[typ]
	v.optional(path, ev, "turn", func(at string, y any) { v.identity(at, y, rule != nil && rule.closedTurn) })
	if rule == nil {
		return typ, id
	}
	if x, has := ev["items"]; has {
		if rule.messageItems {
			v.messages(jsonpath.Member(path, "items"), x, "")
		} else {
			v.parts(jsonpath.Member(path, "items"), x, false)
		}
	}
	v.required(path, ev, rule.required...)
	v.forbidden(path, ev, "on "+typ, rule.forbidden...)
	for _, k := range slices.Sorted(maps.Keys(ev)) {
		if f := rule.fields[k]; f != nil {
			f(v, jsonpath.Member(path, k), ev[k])
		}
	}
	if rule.check != nil {
		rule.check(v, path, ev)
	}
	return typ, id
}

// session checks the open session object.
func (v *validator) session(path string, x any) {
	s, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, s, "id")
	v.optional(path, s, "id", func(at string, y any) { v.str(at, y, 1) })
	v.strMembers(path, s, 0, "cwd", "model")
	if x, has := s["workspaceRoots"]; has {
		if arr, ok := v.array(jsonpath.Member(path, "workspaceRoots"), x); ok {
			for i, e := range arr {
				v.str(jsonpath.Index(jsonpath.Member(path, "workspaceRoots"), i), e, 0)
			}
		}
	}
	if x, has := s["agent"]; has {
		ap := jsonpath.Member(path, "agent")
		if a, ok := v.object(ap, x); ok {
			v.required(ap, a, "id")
			v.optional(ap, a, "id", func(at string, y any) { v.str(at, y, 1) })
			v.optional(ap, a, "type", func(at string, y any) { v.str(at, y, 0) })
		}
	}
	v.optional(path, s, "synthesized", func(at string, y any) { v.boolean(at, y) })
}

// identity checks an identity object {id, synthesized?}: call, resumedFrom, item,
// lastAssistantItem and the tool.batch.after batch are closed; turn is closed only on
// execution events.
func (v *validator) identity(path string, x any, closed bool) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "id")
	if closed {
		v.closed(path, m, "id", "synthesized")
	}
	v.optional(path, m, "id", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "synthesized", func(at string, y any) { v.boolean(at, y) })
}

// gaps checks a gap list {path, reason}; closed inside MCP connections.
func (v *validator) gaps(path string, x any, closed bool) []string {
	arr, ok := v.array(path, x)
	if !ok {
		return nil
	}
	var paths []string
	for i, e := range arr {
		ip := jsonpath.Index(path, i)
		g, ok := v.object(ip, e)
		if !ok {
			continue
		}
		v.required(ip, g, "path", "reason")
		if closed {
			v.closed(ip, g, "path", "reason")
		}
		if p, has := g["path"]; has {
			if s, ok := v.str(jsonpath.Member(ip, "path"), p, 1); ok {
				paths = append(paths, s)
			}
		}
		v.optional(ip, g, "reason", func(at string, y any) { v.str(at, y, 1) })
	}
	return paths
}

func (v *validator) attempt(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "id", "number")
	v.closed(path, m, "id", "number", "synthesized")
	v.optional(path, m, "id", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "number", func(at string, y any) { v.integer(at, y, 1) })
	v.optional(path, m, "synthesized", func(at string, y any) { v.boolean(at, y) })
}

// execution checks {status: executed} or {status: skipped, reason, detail?} (detail never
// with supplied_result, which carries no subscription identity).
func (v *validator) execution(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	if !v.required(path, m, "status") {
		return
	}
	status, ok := v.enum(jsonpath.Member(path, "status"), m["status"], ExecutionExecuted, ExecutionSkipped)
	if !ok {
		return
	}
	if status == ExecutionExecuted {
		v.closed(path, m, "status")
		return
	}
	if !v.required(path, m, "reason") {
		return
	}
	reason, ok := v.enum(jsonpath.Member(path, "reason"), m["reason"], SkipSuppliedResult, SkipPolicy, SkipCancelled, SkipTimeout, SkipOther)
	if !ok {
		return
	}
	if reason == SkipSuppliedResult {
		v.closed(path, m, "status", "reason")
		return
	}
	v.closed(path, m, "status", "reason", "detail")
	v.optional(path, m, "detail", func(at string, y any) { v.str(at, y, 1) })
}

// executionOf returns the execution status and reason of an event, "" when absent.
func executionOf(ev map[string]any) (status, reason string) {
	m, _ := ev["execution"].(map[string]any)
	status, _ = m["status"].(string)
	reason, _ = m["reason"].(string)
	return status, reason
}

// deniedIsPolicySkip: a denied call was never run, and a policy skipped it.
func (v *validator) deniedIsPolicySkip(path string, obj map[string]any, outcome string) {
	if outcome != "denied" {
		return
	}
	if status, reason := executionOf(obj); status != "" && (status != ExecutionSkipped || reason != SkipPolicy) {
		v.failf(jsonpath.Member(path, "execution"), "must be {\"status\": \"skipped\", \"reason\": \"policy\"} when outcome is \"denied\"")
	}
}

func (v *validator) errorInfo(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "message", "class")
	v.closed(path, m, "message", "class", "code", "status", "native")
	v.strMembers(path, m, 1, "message", "class", "code")
	if s, has := m["status"]; has {
		switch st := s.(type) {
		case string:
			v.str(jsonpath.Member(path, "status"), st, 1)
		case json.Number:
			v.integer(jsonpath.Member(path, "status"), st, -1<<62)
		default:
			v.failf(jsonpath.Member(path, "status"), "must be a string or an integer, not %s", jsonpath.TypeName(s))
		}
	}
}

// usage checks provider usage; turn usage is a total over the turn, attempt usage an
// amount of one attempt reported by the provider or estimated.
func (v *validator) usage(path string, x any, turn bool) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "kind", "scope", "completeness", "provenance")
	v.closed(path, m, "kind", "scope", "completeness", "provenance", "inputTokens", "outputTokens",
		"cacheReadTokens", "cacheWriteTokens", "cost")
	if k, has := m["kind"]; has {
		if turn {
			v.constant(jsonpath.Member(path, "kind"), k, "total")
		} else {
			v.constant(jsonpath.Member(path, "kind"), k, "amount")
		}
	}
	if s, has := m["scope"]; has {
		if turn {
			v.constant(jsonpath.Member(path, "scope"), s, "turn")
		} else {
			v.constant(jsonpath.Member(path, "scope"), s, "attempt")
		}
	}
	v.optional(path, m, "completeness", func(at string, y any) { v.enum(at, y, "complete", "partial", "unknown") })
	if p, has := m["provenance"]; has {
		if turn {
			v.enum(jsonpath.Member(path, "provenance"), p, "provider", "estimate", "mixed")
		} else {
			v.enum(jsonpath.Member(path, "provenance"), p, "provider", "estimate")
		}
	}
	v.countMembers(path, m, "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
	if c, has := m["cost"]; has {
		cp := jsonpath.Member(path, "cost")
		if cost, ok := v.object(cp, c); ok {
			v.required(cp, cost, "amount", "currency", "basis")
			v.closed(cp, cost, "amount", "currency", "basis")
			v.optional(cp, cost, "amount", func(at string, y any) { v.nonNegative(at, y) })
			if cur, has := cost["currency"]; has {
				if s, ok := v.str(jsonpath.Member(cp, "currency"), cur, 0); ok && !reCurrency.MatchString(s) {
					v.failf(jsonpath.Member(cp, "currency"), "must be an ISO 4217 code such as USD")
				}
			}
			v.optional(cp, cost, "basis", func(at string, y any) { v.enum(at, y, "billed", "reported", "estimated") })
		}
	}
}

func (v *validator) pricing(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "currency")
	v.closed(path, m, "currency", "inputPerMillionTokens", "outputPerMillionTokens")
	if c, has := m["currency"]; has {
		if s, ok := v.str(jsonpath.Member(path, "currency"), c, 0); ok && !reCurrency.MatchString(s) {
			v.failf(jsonpath.Member(path, "currency"), "must be an ISO 4217 code such as USD")
		}
	}
	for _, k := range []string{"inputPerMillionTokens", "outputPerMillionTokens"} {
		if n, has := m[k]; has {
			v.nonNegative(jsonpath.Member(path, k), n)
		}
	}
}

// tool checks the closed tool object; input is always a JSON object (never a string), and
// mcp is present exactly when origin is mcp.
func (v *validator) tool(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "name", "input", "origin")
	v.closed(path, m, "name", "kind", "input", "origin", "mcp")
	v.optional(path, m, "name", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "kind", func(at string, y any) { v.str(at, y, 1) })
	if in, has := m["input"]; has {
		if _, isObj := in.(map[string]any); !isObj {
			v.failf(jsonpath.Member(path, "input"), "must be a JSON object, not %s (structured input is never a JSON-encoded string)", jsonpath.TypeName(in))
		}
	}
	origin := ""
	if o, has := m["origin"]; has {
		origin, _ = v.enum(jsonpath.Member(path, "origin"), o, OriginNative, OriginMCP)
	}
	_, hasMCP := m["mcp"]
	switch {
	case origin == OriginMCP && !hasMCP:
		v.failf(path, "\"mcp\" is required when origin is \"mcp\"")
	case origin != OriginMCP && hasMCP && origin != "":
		v.failf(jsonpath.Member(path, "mcp"), "is only allowed when origin is \"mcp\"")
	}
	if hasMCP {
		v.mcp(jsonpath.Member(path, "mcp"), m["mcp"])
	}
}

func (v *validator) mcp(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "server", "toolName", "provenance", "connection")
	v.closed(path, m, "server", "toolName", "provenance", "connection")
	if s, has := m["server"]; has {
		sp := jsonpath.Member(path, "server")
		if srv, ok := v.object(sp, s); ok {
			v.required(sp, srv, "id")
			v.closed(sp, srv, "id", "name")
			v.strMembers(sp, srv, 1, "id", "name")
		}
	}
	v.optional(path, m, "toolName", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "provenance", func(at string, y any) { v.enum(at, y, "runtime", "inferred") })
	v.optional(path, m, "connection", v.connection)
}

// connection checks an MCP connection descriptor: every location member is either present
// or declared as a gap (so an undisclosed location is explicit, never silently missing),
// and it never carries credentials (closed objects).
func (v *validator) connection(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	if !v.required(path, m, "transport") {
		return
	}
	t, ok := v.str(jsonpath.Member(path, "transport"), m["transport"], 0)
	if !ok {
		return
	}
	var gapped []string
	if g, has := m["gaps"]; has {
		gp := jsonpath.Member(path, "gaps")
		gapped = v.gaps(gp, g, true)
		if arr, isArr := g.([]any); isArr && len(arr) == 0 {
			v.failf(gp, "must not be empty (omit it instead)")
		}
	}
	locate := func(keys ...string) {
		for _, k := range keys {
			if _, has := m[k]; !has && !slices.Contains(gapped, k) {
				v.failf(path, "%q is required, or a gap with path %q", k, k)
			}
		}
	}
	switch {
	case t == "http" || t == "sse":
		v.closed(path, m, "transport", "url", "gaps")
		if u, has := m["url"]; has {
			if s, ok := v.uri(jsonpath.Member(path, "url"), u); ok && !hasHTTPScheme(s) {
				v.failf(jsonpath.Member(path, "url"), "must be an http:// or https:// URL")
			}
		}
		locate("url")
	case t == "stdio":
		v.closed(path, m, "transport", "command", "args", "cwd", "gaps")
		v.optional(path, m, "command", func(at string, y any) { v.str(at, y, 1) })
		v.optional(path, m, "cwd", func(at string, y any) { v.str(at, y, 1) })
		if a, has := m["args"]; has {
			if arr, ok := v.array(jsonpath.Member(path, "args"), a); ok {
				for i, e := range arr {
					v.str(jsonpath.Index(jsonpath.Member(path, "args"), i), e, 0)
				}
			}
		}
		locate("command", "args", "cwd")
	case len(t) > 1 && t[0] == '_':
		// Extension transports carry an address form and address, each present or gapped.
		v.closed(path, m, "transport", "addressForm", "address", "gaps")
		v.strMembers(path, m, 1, "addressForm", "address")
		locate("addressForm", "address")
	default:
		v.failf(jsonpath.Member(path, "transport"), "%q is not http, sse, stdio or an extension transport \"_name\"", t)
	}
}

func hasHTTPScheme(s string) bool {
	return len(s) >= 7 && s[:7] == "http://" || len(s) >= 8 && s[:8] == "https://"
}

// batch checks the batch of sibling calls of a tool event.
func (v *validator) batch(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "id", "callIds")
	v.closed(path, m, "id", "callIds", "synthesized")
	v.optional(path, m, "id", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "callIds", func(at string, y any) { v.uniqueStrings(at, y, 1, 1) })
	v.optional(path, m, "synthesized", func(at string, y any) { v.boolean(at, y) })
}

func (v *validator) batchCalls(path string, x any) {
	v.objects(path, x, "call", func(ip string, c map[string]any) {
		v.required(ip, c, "call", "tool", "path", "outcome", "execution")
		v.closed(ip, c, "call", "tool", "path", "batch", "outcome", "execution")
		checks := map[string]func(string, any){
			"call":      func(p string, x any) { v.identity(p, x, true) },
			"tool":      v.tool,
			"path":      func(p string, x any) { v.str(p, x, 1) },
			"batch":     v.batch,
			"outcome":   func(p string, x any) { v.enum(p, x, "ok", "error", "denied", "cancelled", "timeout") },
			"execution": v.execution,
		}
		for _, k := range slices.Sorted(maps.Keys(c)) {
			if f := checks[k]; f != nil {
				f(jsonpath.Member(ip, k), c[k])
			}
		}
		outcome, _ := c["outcome"].(string)
		v.deniedIsPolicySkip(ip, c, outcome)
	})
}

// fileChange checks one entry of tool.after fileChanges (created/modified/deleted/moved).
func (v *validator) fileChange(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "path", "change")
	v.closed(path, m, "path", "change", "previousPath", "before", "after")
	v.strMembers(path, m, 1, "path", "previousPath")
	change := ""
	if c, has := m["change"]; has {
		change, _ = v.enum(jsonpath.Member(path, "change"), c, "created", "modified", "deleted", "moved")
	}
	v.partMembers(path, m, false, "before", "after")
	switch change {
	case "moved":
		if _, has := m["previousPath"]; !has {
			v.failf(path, "\"previousPath\" is required when change is \"moved\"")
		}
	case "created":
		v.forbidden(path, m, "when change is \"created\" (there was no file before)", "before")
	case "deleted":
		v.forbidden(path, m, "when change is \"deleted\" (there is no file after)", "after")
	}
}

// tokenCounts checks {before?, after?} and returns the object.
func (v *validator) tokenCounts(path string, x any) map[string]any {
	m, ok := v.object(path, x)
	if !ok {
		return nil
	}
	v.closed(path, m, "before", "after")
	v.countMembers(path, m, "before", "after")
	return m
}

func (v *validator) counters(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v.integer(jsonpath.Member(path, k), m[k], 0)
	}
}

func (v *validator) configChange(path string, x any, after bool) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "source", "scope", "settings", "summary")
	if after {
		v.closed(path, m, "source", "scope", "settings", "summary", "path", "mcpServers")
	} else {
		v.closed(path, m, "source", "scope", "settings", "summary", "path")
	}
	v.strMembers(path, m, 1, "source", "scope", "summary", "path")
	if s, has := m["settings"]; has {
		if arr, ok := v.array(jsonpath.Member(path, "settings"), s); ok {
			for i, e := range arr {
				v.str(jsonpath.Index(jsonpath.Member(path, "settings"), i), e, 1)
			}
		}
	}
	if s, has := m["mcpServers"]; has && after {
		if arr, ok := v.array(jsonpath.Member(path, "mcpServers"), s); ok {
			for i, e := range arr {
				v.object(jsonpath.Index(jsonpath.Member(path, "mcpServers"), i), e)
			}
		}
	}
}

func (v *validator) task(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "id", "operation", "change")
	v.closed(path, m, "id", "operation", "change", "prior", "synthesized")
	v.optional(path, m, "id", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "operation", func(at string, y any) { v.enum(at, y, "create", "update", "remove") })
	for _, k := range []string{"change", "prior"} {
		if c, has := m[k]; has {
			v.object(jsonpath.Member(path, k), c)
		}
	}
	v.optional(path, m, "synthesized", func(at string, y any) { v.boolean(at, y) })
}

func (v *validator) workspace(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "kind", "change")
	v.closed(path, m, "kind", "change", "prior", "reason")
	v.optional(path, m, "kind", func(at string, y any) { v.enum(at, y, "cwd", "roots", "switch") })
	for _, k := range []string{"change", "prior"} {
		c, has := m[k]
		if !has {
			continue
		}
		cp := jsonpath.Member(path, k)
		wc, ok := v.object(cp, c)
		if !ok {
			continue
		}
		if len(wc) == 0 {
			v.failf(cp, "must name cwd or workspaceRoots")
		}
		v.closed(cp, wc, "cwd", "workspaceRoots")
		v.optional(cp, wc, "cwd", func(at string, y any) { v.str(at, y, 1) })
		v.optional(cp, wc, "workspaceRoots", func(at string, y any) { v.uniqueStrings(at, y, 0, 1) })
	}
	v.optional(path, m, "reason", func(at string, y any) { v.str(at, y, 0) })
}

func (v *validator) fileChanged(path string, x any) {
	v.objects(path, x, "change", func(ip string, m map[string]any) {
		v.required(ip, m, "path", "operation", "agentCaused")
		v.closed(ip, m, "path", "operation", "agentCaused", "before", "after")
		v.optional(ip, m, "path", func(at string, y any) { v.str(at, y, 1) })
		v.optional(ip, m, "operation", func(at string, y any) { v.enum(at, y, "create", "update", "remove") })
		v.optional(ip, m, "agentCaused", func(at string, y any) { v.boolean(at, y) })
		v.partMembers(ip, m, false, "before", "after")
	})
}

func (v *validator) attention(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "kind", "message", "title")
	v.closed(path, m, "kind", "message", "title")
	v.optional(path, m, "kind", func(at string, y any) { v.str(at, y, 1) })
	for _, k := range []string{"message", "title"} {
		if p, has := m[k]; has {
			v.parts(jsonpath.Member(path, k), p, true)
		}
	}
}

// elicitation checks the MCP elicitation wrapper; request/result is ONE text part whose
// body text is the serialized MCP JSON.
func (v *validator) elicitation(path string, x any, result bool) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	if result {
		v.required(path, m, "server", "mode", "action")
		v.closed(path, m, "server", "mode", "action", "result")
	} else {
		v.required(path, m, "server", "mode")
		v.closed(path, m, "server", "mode", "request")
	}
	v.optional(path, m, "server", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, m, "mode", func(at string, y any) { v.enum(at, y, "form", "url") })
	if a, has := m["action"]; has && result {
		v.enum(jsonpath.Member(path, "action"), a, "accept", "decline", "cancel")
	}
	v.partMembers(path, m, true, "request", "result")
}

// userMessage checks user.message.* wrappers: inbound messages are all role user (with the
// sender kept in the wrapper), outbound all role assistant.
func (v *validator) userMessage(path string, x any, inbound bool) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	role := RoleAssistant
	if inbound {
		role = RoleUser
		v.required(path, m, "channel", "sender", "messages")
		v.closed(path, m, "channel", "sender", "messages")
	} else {
		v.required(path, m, "channel", "messages")
		v.closed(path, m, "channel", "messages")
	}
	v.strMembers(path, m, 1, "channel", "sender")
	v.optional(path, m, "messages", func(at string, y any) { v.messages(at, y, role) })
}

func (v *validator) failure(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "backendId", "reason", "policy")
	v.closed(path, m, "backendId", "reason", "policy")
	v.strMembers(path, m, 1, "backendId", "reason")
	v.optional(path, m, "policy", func(at string, y any) { v.enum(at, y, "fail-open", "fail-closed") })
}
