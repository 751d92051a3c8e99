package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// ToolsConfig configures the tools policy. The zero value denies nothing.
//
//	{"deny": [{"tool": "Bash", "command": "rm", "flags": ["-r|-R|--recursive"], "reason": "No recursive deletes."}],
//	 "allow": ["Read", "Grep", "Bash", "mcp__files__*"],
//	 "destructive": true}
type ToolsConfig struct {
	// Deny rules, tried in order; the first rule that matches a tool call denies it.
	Deny []ToolRule `json:"deny,omitempty"`
	// Allow, when set, is the complete list of tool name globs that may be called; a call
	// to any other tool is denied (after the deny rules).
	Allow []string `json:"allow,omitempty"`
	// Destructive appends the DefaultDestructive rules after Deny.
	Destructive bool `json:"destructive,omitempty"`
	// CaseSensitive makes tool globs (rules and allow) match the name's letter case; by
	// default "bash" matches a rule on "Bash" (issue 13 §5: agents and MCP servers spell
	// the same tool differently).
	CaseSensitive bool `json:"caseSensitive,omitempty"`
	// DenyUnparseable denies a call whose arguments are not a JSON object (the event says
	// so in a tool.input gap; the proxy carries their raw text under raw_arguments).
	DenyUnparseable bool `json:"denyUnparseable,omitempty"`
}

// ToolRule denies tool calls. Every condition that is set must hold; a rule with only a
// tool glob denies every call of that tool.
type ToolRule struct {
	// Name labels the rule in reasons and audit records (default "deny[<index>]").
	Name string `json:"name,omitempty"`
	// Tool is a path.Match glob over the tool name ("Bash", "mcp__*"), in any letter case
	// unless the policy sets caseSensitive; empty matches every tool. As in path.Match,
	// '*' does not cross '/'.
	Tool string `json:"tool,omitempty"`
	// InputPattern is an RE2 expression searched in the tool input serialized as compact
	// JSON: keys in their original order, no insignificant whitespace, strings with only
	// the escapes JSON requires (so "\u003e" arrives as ">"). Empty matches any input.
	InputPattern string `json:"inputPattern,omitempty"`
	// Argument names a top-level input member; Pattern is then searched in its value (the
	// string itself, or the compact JSON of a non-string value). A missing member does not
	// match. "*" means any string anywhere in the input, and any all-string array joined
	// with spaces (an argv such as ["rm", "-rf", "/"]) — except strings stored under a
	// prose key (description, explanation, reason, rationale, justification, title,
	// summary, comment, note, notes, thought, thinking), which describe the call rather
	// than perform it. Argument without Pattern matches when the member is present.
	Argument string `json:"argument,omitempty"`
	// Pattern is an RE2 expression searched in Argument's value; it requires Argument.
	Pattern string `json:"pattern,omitempty"`
	// Command matches a shell command anywhere in the input's strings (and argv arrays),
	// parsed as shell: a glob over the program's base name ("rm", "git"), found after ;,
	// &&, |, in $(...), in sh -c '...', behind sudo or env. Flags, each "a|b|..."
	// alternatives, must all be present: a short flag in any cluster (-rf, -fr, -r -f), a
	// long one alone or with =value. Prose keys are skipped as for Argument "*".
	Command string   `json:"command,omitempty"`
	Flags   []string `json:"flags,omitempty"`
	// Reason is the deny reason shown to the agent (default names the tool and the rule).
	Reason string `json:"reason,omitempty"`
	// Code is the deny code, a reverse-DNS name (default "hookproxy.tools.denied").
	Code string `json:"code,omitempty"`
}

// Tools is the tools policy. At tool.before (and tool.permission.request) it denies calls
// matched by a deny rule or missing from the allow list: deny if advertised, else flow stop
// if advertised, else no effect. Other events get no effects.
type Tools struct {
	rules           []toolRule
	allow           []string
	caseSensitive   bool
	denyUnparseable bool
}

var _ ahp.Interceptor = (*Tools)(nil)

type toolRule struct {
	label    string
	tool     string
	input    *pattern
	argument string
	pattern  *pattern
	command  *commandRule
	reason   string
	code     string
}

// NewTools validates cfg, compiles every expression once and builds the policy.
func NewTools(cfg ToolsConfig) (*Tools, error) {
	p := &Tools{caseSensitive: cfg.CaseSensitive, denyUnparseable: cfg.DenyUnparseable}
	rules := cfg.Deny
	if cfg.Destructive {
		rules = append(append([]ToolRule(nil), cfg.Deny...), DefaultDestructive()...)
	}
	for i, r := range rules {
		where := fmt.Sprintf("deny[%d]", i)
		if i >= len(cfg.Deny) {
			where = "destructive"
		}
		cr, err := compileToolRule(r, where)
		if err != nil {
			return nil, err
		}
		if !cfg.CaseSensitive {
			cr.tool = strings.ToLower(cr.tool)
		}
		p.rules = append(p.rules, cr)
	}
	for i, g := range cfg.Allow {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return nil, configErrorf("allow[%d]: invalid glob %q", i, g)
		}
	}
	p.allow = cfg.Allow
	if !cfg.CaseSensitive {
		p.allow = make([]string, len(cfg.Allow))
		for i, g := range cfg.Allow {
			p.allow[i] = strings.ToLower(g)
		}
	}
	return p, nil
}

func compileToolRule(r ToolRule, where string) (toolRule, error) {
	cr := toolRule{label: r.Name, tool: r.Tool, argument: r.Argument, reason: r.Reason, code: r.Code}
	if cr.label == "" {
		cr.label = where
	}
	if r.Tool != "" {
		if _, err := path.Match(r.Tool, ""); err != nil {
			return cr, configErrorf("%s.tool: invalid glob %q", where, r.Tool)
		}
	}
	var err error
	if r.InputPattern != "" {
		if cr.input, err = compilePattern(r.InputPattern); err != nil {
			return cr, configErrorf("%s.inputPattern: invalid regular expression: %v", where, err)
		}
	}
	if r.Pattern != "" {
		if r.Argument == "" {
			return cr, configErrorf("%s.pattern: requires argument (use inputPattern to match the whole input)", where)
		}
		if cr.pattern, err = compilePattern(r.Pattern); err != nil {
			return cr, configErrorf("%s.pattern: invalid regular expression: %v", where, err)
		}
	}
	if r.Command != "" {
		if cr.command, err = compileCommandRule(r.Command, r.Flags); err != nil {
			return cr, configErrorf("%s.command: invalid glob %q", where, r.Command)
		}
	} else if len(r.Flags) > 0 {
		return cr, configErrorf("%s.flags: requires command", where)
	}
	if err := checkCode(r.Code, where); err != nil {
		return cr, err
	}
	if cr.code == "" {
		cr.code = "hookproxy.tools.denied"
	}
	return cr, nil
}

// toolInput is the lazily parsed input of one call.
type toolInput struct {
	raw     json.RawMessage
	parsed  bool
	value   jsonValue
	ok      bool
	compact string
}

func (in *toolInput) parse() {
	if in.parsed {
		return
	}
	in.parsed = true
	v, err := parseJSON(in.raw)
	if err != nil {
		// Not JSON: patterns see the bytes as they are.
		in.compact = strings.TrimSpace(string(in.raw))
		return
	}
	in.value, in.ok = v, true
	// Compact JSON is rarely longer than the input; one buffer of that size avoids regrowth.
	in.compact = string(v.appendJSON(make([]byte, 0, len(in.raw)+16)))
}

// Intercept implements ahp.Interceptor.
func (p *Tools) Intercept(ctx context.Context, req *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	ev, caps, err := unpack(ctx, req)
	if err != nil {
		return nil, err
	}
	if (ev.Type != ahp.EventToolBefore && ev.Type != "tool.permission.request") || ev.Tool == nil {
		return results(), nil
	}
	// The rules' expressions run over the input (prefiltered by their literals, pattern.go):
	// charged to the request's work budget as one regular-expression pass (work.go).
	if m := (&meter{ctx: ctx, budget: transport.WorkBudgetFrom(ctx)}); !m.charge(regexWeight * len(ev.Tool.Input)) {
		return overBudget(m, caps)
	}
	v := p.evaluate(ev.Tool.Name, ev.Tool.Input)
	if !v.denied && p.denyUnparseable {
		for _, g := range ev.Gaps {
			if g.Path == "tool.input" {
				v = verdict{denied: true, rule: "denyUnparseable", code: "hookproxy.tools.unparseable",
					reason: fmt.Sprintf("Tool call %s is blocked: its arguments are not a JSON object.", ev.Tool.Name)}
				break
			}
		}
	}
	if !v.denied {
		return results(), nil
	}
	if e, ok := block(caps, v.reason, v.code); ok {
		return results(e), nil
	}
	return results(), nil
}

// verdict is the outcome of the rules for one call.
type verdict struct {
	denied       bool
	rule         string // rule label, or "allow" for the allow list
	reason, code string
}

// evaluate applies the deny rules, then the allow list, to one call.
func (p *Tools) evaluate(name string, input json.RawMessage) verdict {
	in := toolInput{raw: input}
	match := name
	if !p.caseSensitive {
		match = strings.ToLower(name)
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.matches(match, &in) {
			reason := r.reason
			if reason == "" {
				reason = fmt.Sprintf("Tool call %s is blocked by policy rule %s.", name, r.label)
			}
			return verdict{denied: true, rule: r.label, reason: reason, code: r.code}
		}
	}
	if len(p.allow) > 0 && !globAny(p.allow, match) {
		return verdict{denied: true, rule: "allow", reason: fmt.Sprintf("Tool %s is not in the list of allowed tools.", name), code: "hookproxy.tools.not_allowed"}
	}
	return verdict{}
}

func globAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

func (r *toolRule) matches(name string, in *toolInput) bool {
	if r.tool != "" {
		if ok, _ := path.Match(r.tool, name); !ok {
			return false
		}
	}
	if r.input != nil {
		in.parse()
		if !r.input.match(in.compact) {
			return false
		}
	}
	if r.command != nil {
		in.parse()
		if in.ok {
			if !r.command.matchesInput(&in.value, "") {
				return false
			}
		} else if !r.command.matchesScript(in.compact, 0) {
			return false
		}
	}
	if r.argument != "" {
		in.parse()
		if !in.ok || in.value.kind != jsonObject {
			return false
		}
		if r.argument == "*" {
			return anyString(&in.value, "", r.pattern)
		}
		for i, k := range in.value.keys {
			if k != r.argument {
				continue
			}
			if r.pattern == nil {
				return true
			}
			v := &in.value.elems[i]
			if v.kind == jsonString {
				if r.pattern.match(v.str) {
					return true
				}
			} else if r.pattern.match(string(v.appendJSON(nil))) {
				return true
			}
		}
		return false
	}
	return true
}

// proseKeys hold text about a call (Claude Code's Bash tool sends a "description"), not
// the call itself; the "*" argument does not look at them.
var proseKeys = map[string]bool{
	"description": true, "explanation": true, "reason": true, "rationale": true,
	"justification": true, "title": true, "summary": true, "comment": true, "note": true,
	"notes": true, "thought": true, "thinking": true,
}

// anyString reports whether re matches any string in v, or the space-joined elements of an
// array made only of strings (a command given as argv). A nil re matches any string.
// Values under prose keys are skipped.
func anyString(v *jsonValue, key string, re *pattern) bool {
	if proseKeys[key] {
		return false
	}
	switch v.kind {
	case jsonString:
		return re == nil || re.match(v.str)
	case jsonObject:
		for i := range v.elems {
			if anyString(&v.elems[i], v.keys[i], re) {
				return true
			}
		}
	case jsonArray:
		allStrings := len(v.elems) > 1
		for i := range v.elems {
			if v.elems[i].kind != jsonString {
				allStrings = false
			}
			if anyString(&v.elems[i], "", re) {
				return true
			}
		}
		if allStrings && re != nil {
			parts := make([]string, len(v.elems))
			for i := range v.elems {
				parts[i] = v.elems[i].str
			}
			return re.match(strings.Join(parts, " "))
		}
	}
	return false
}
