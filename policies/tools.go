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
	// default "bash" matches a rule on "Bash" (agents and MCP servers spell
	// the same tool differently).
	CaseSensitive bool `json:"caseSensitive,omitempty"`
	// DenyUnparseable denies a call whose arguments are not a JSON object (the event says
	// so in a tool.input gap; the proxy carries their raw text under raw_arguments).
	DenyUnparseable bool `json:"denyUnparseable,omitempty"`
	// Unanalysable is the action for a command the command model cannot evaluate
	// statically (a program name from a variable, code piped into a shell, an interpreter
	// one-liner, a rule's program with an argument not known): "auto" (default) denies it
	// when the rule it escapes names its program (rm $X, $(echo rm) -rf /, python -c with
	// shutil.rmtree) and allows it otherwise; "deny" denies every one; "ask" asks for
	// approval — approvals do not exist yet, so it denies, saying so; "allow" lets it run.
	// With allowCommands, "auto" means "deny".
	Unanalysable string `json:"unanalysable,omitempty"`
	// AllowCommands, when set, is the complete list of commands a tool call may run: every
	// command evaluated from its input must match an entry (shell builtins that run nothing
	// — cd, echo, test, export, ... — need none; sudo, doas, su, ssh, chroot need their own).
	// Anything else is denied (or asked, per Unlisted).
	AllowCommands []CommandAllow `json:"allowCommands,omitempty"`
	// Unlisted is the action for a command allowCommands does not list: "deny" (default)
	// or "ask" (denies, saying approval is required, until approvals exist).
	Unlisted string `json:"unlisted,omitempty"`
}

// CommandAllow is one entry of an allow list of commands.
type CommandAllow struct {
	// Command is a glob over the program's base name ("go", "npm", "python*").
	Command string `json:"command"`
	// Subcommands, when set, lists the first operand the command may be given ("status",
	// "diff" for git); options before it are skipped (git -C dir status).
	Subcommands []string `json:"subcommands,omitempty"`
	// Tool restricts the entry to tools matching this glob (default: any tool).
	Tool string `json:"tool,omitempty"`
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
	// Effect names a built-in rule about what a command does, matched on the evaluated
	// commands: recursive-delete, block-device-write, mkfs, permissions-root, fork-bomb,
	// pipe-to-shell, shutdown (see DefaultDestructive).
	Effect string `json:"effect,omitempty"`
	// Targets restricts a path-bearing effect (recursive-delete): "any" (default) or
	// "protected" — the root, home and system directories, the working directory and its
	// parents, and globs over them (/*, ~/*, *).
	Targets string `json:"targets,omitempty"`
	// Reason is the deny reason shown to the agent (default names the tool and the rule).
	Reason string `json:"reason,omitempty"`
	// Code is the deny code, a reverse-DNS name (default "hookproxy.tools.denied").
	Code string `json:"code,omitempty"`
	// Action is what a match does: "deny" (default) or "ask" — hold the call for a
	// person's decision where ask is advertised (an approval path exists), else deny it
	// saying approval is needed (mandatory approval fails closed). A deny from any other
	// rule, the allow list or allowCommands still wins over an ask (deny wins over ask).
	Action string `json:"action,omitempty"`
}

// Tools is the tools policy. At tool.before (and tool.permission.request) it denies calls
// matched by a deny rule or missing from the allow list: deny if advertised, else flow stop
// if advertised, else no effect. Other events get no effects.
type Tools struct {
	rules           []toolRule
	allow           []string
	caseSensitive   bool
	denyUnparseable bool
	unanalysable    string
	allowCommands   []CommandAllow
	unlisted        string
}

var _ ahp.Interceptor = (*Tools)(nil)

type toolRule struct {
	label    string
	tool     string
	input    *pattern
	argument string
	pattern  *pattern
	command  *commandRule
	effect   *effect
	targets  bool // effect restricted to protected targets
	reason   string
	code     string
	ask      bool // action: ask
}

// NewTools validates cfg, compiles every expression once and builds the policy.
func NewTools(cfg ToolsConfig) (*Tools, error) {
	p := &Tools{caseSensitive: cfg.CaseSensitive, denyUnparseable: cfg.DenyUnparseable,
		unanalysable: cfg.Unanalysable, allowCommands: cfg.AllowCommands, unlisted: cfg.Unlisted}
	switch p.unanalysable {
	case "":
		p.unanalysable = "auto"
	case "auto", "deny", "ask", "allow":
	default:
		return nil, configErrorf("unanalysable: unknown action %q (auto, deny, ask, allow)", cfg.Unanalysable)
	}
	switch p.unlisted {
	case "":
		p.unlisted = "deny"
	case "deny", "ask":
	default:
		return nil, configErrorf("unlisted: unknown action %q (deny, ask)", cfg.Unlisted)
	}
	for i, a := range cfg.AllowCommands {
		if _, err := path.Match(a.Command, ""); err != nil || a.Command == "" {
			return nil, configErrorf("allowCommands[%d].command: invalid glob %q", i, a.Command)
		}
		if _, err := path.Match(a.Tool, ""); err != nil {
			return nil, configErrorf("allowCommands[%d].tool: invalid glob %q", i, a.Tool)
		}
	}
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
	switch r.Action {
	case "", "deny":
	case "ask":
		cr.ask = true
	default:
		return cr, configErrorf("%s.action: unknown action %q (deny, ask)", where, r.Action)
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
	if r.Effect != "" {
		if cr.effect = effects[r.Effect]; cr.effect == nil {
			return cr, configErrorf("%s.effect: unknown effect %q (%s)", where, r.Effect, strings.Join(effectNames, ", "))
		}
		if r.Command != "" {
			return cr, configErrorf("%s.effect: a rule has either command or effect", where)
		}
	}
	switch r.Targets {
	case "", "any":
	case "protected":
		if r.Effect == "" {
			return cr, configErrorf("%s.targets: requires effect", where)
		}
		cr.targets = true
	default:
		return cr, configErrorf("%s.targets: unknown value %q (any, protected)", where, r.Targets)
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
	ctx      context.Context // ends the evaluation of its commands
	raw      json.RawMessage
	tool     string
	parsed   bool
	value    jsonValue
	ok       bool
	compact  string
	analysed bool
	cmds     []shellCmd
}

// commands are the evaluated commands of the call's command keys (or of its raw text when
// it is not JSON).
func (in *toolInput) commands() []shellCmd {
	if in.analysed {
		return in.cmds
	}
	in.analysed = true
	in.parse()
	if in.ok {
		in.cmds = inputCommands(in.ctx, in.tool, &in.value)
	} else if in.compact != "" {
		in.cmds = analyseScript(in.ctx, in.compact)
	}
	return in.cmds
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

// EndsByDeadline marks the policy as bounded (transport.BoundedPolicy): its work is
// charged to the request's budget before it starts, and the evaluation of the commands and
// the rules look at the deadline as they go and stop there (shellEval.ended).
func (p *Tools) EndsByDeadline() {}

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
	v := p.evaluate(ctx, ev.Tool.Name, ev.Tool.Input)
	if err := ctx.Err(); err != nil {
		// The evaluation stopped at the deadline: what it found so far is no verdict.
		return nil, err
	}
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
	if v.ask {
		// The approval path holds the call (hookproxy.ask_reason tells the person why);
		// without one, mandatory approval fails closed: the call is denied, saying so.
		if caps.Has(ahp.EffectAsk) {
			r := results(ahp.Effect{Type: ahp.EffectAsk})
			reason, _ := json.Marshal(map[string]string{"reason": v.reason})
			r.Extensions = map[string]json.RawMessage{askReasonExtension: reason}
			return r, nil
		}
		v.reason += askSuffix
	}
	if e, ok := block(caps, v.reason, v.code); ok {
		return results(e), nil
	}
	return results(), nil
}

// verdict is the outcome of the rules for one call.
type verdict struct {
	denied       bool
	ask          bool   // denied unless a person approves (action ask)
	rule         string // rule label, or "allow" for the allow list
	reason, code string
}

// evaluate applies the deny rules, the unanalysable action, then the allow lists, to one
// call.
func (p *Tools) evaluate(ctx context.Context, name string, input json.RawMessage) verdict {
	in := toolInput{ctx: ctx, raw: input, tool: name}
	match := name
	if !p.caseSensitive {
		match = strings.ToLower(name)
	}
	var unsure *toolRule
	var unsureCmd *shellCmd
	// The first ask is kept while the rest is evaluated: a deny anywhere wins over it.
	var asked *verdict
	keepAsk := func(v verdict) {
		if asked == nil {
			asked = &v
		}
	}
	for i := range p.rules {
		if ctx.Err() != nil {
			return verdict{} // the caller answers with the context's error
		}
		r := &p.rules[i]
		t, cmd := r.check(match, &in)
		if t == triUnknown && unsure == nil {
			unsure, unsureCmd = r, cmd
		}
		if t != triYes {
			continue
		}
		v := r.deny(name, cmd)
		if !v.ask {
			return v
		}
		keepAsk(v)
	}
	if unsure != nil && p.unanalysable != "allow" {
		v := p.unanalysableVerdict(name, unsureCmd, unsure.label)
		if !v.ask {
			return v
		}
		keepAsk(v)
	}
	if asked == nil && (p.unanalysable == "deny" || p.unanalysable == "ask" || len(p.allowCommands) > 0 && p.unanalysable == "auto") {
		for i, c := range in.commands() {
			if c.kind == cmdUnanalysable {
				v := p.unanalysableVerdict(name, &in.cmds[i], "")
				if !v.ask {
					return v
				}
				keepAsk(v)
				break
			}
		}
	}
	if len(p.allow) > 0 && !globAny(p.allow, match) {
		return verdict{denied: true, rule: "allow", reason: fmt.Sprintf("Tool %s is not in the list of allowed tools.", name), code: "hookproxy.tools.not_allowed"}
	}
	if len(p.allowCommands) > 0 {
		for i := range in.commands() {
			if c := &in.cmds[i]; c.kind == cmdRun && !p.commandAllowed(match, c) || c.kind == cmdForkBomb {
				if p.unlisted == "ask" {
					keepAsk(verdict{denied: true, ask: true, rule: "allowCommands", code: "hookproxy.tools.not_allowed",
						reason: fmt.Sprintf("Tool call %s: `%s` is not in the list of allowed commands; it needs approval.", name, c)})
					continue
				}
				reason := fmt.Sprintf("Tool call %s is blocked: `%s` is not in the list of allowed commands.", name, c)
				return verdict{denied: true, rule: "allowCommands", reason: reason, code: "hookproxy.tools.not_allowed"}
			}
		}
	}
	if asked != nil {
		return *asked
	}
	return verdict{}
}

// askSuffix ends the reason of an "ask" verdict denied because no approval path exists
// (ask is not advertised): mandatory approval fails closed.
const askSuffix = " No approval path is configured (the admin listener is off), so it is refused."

// askReasonExtension carries an ask's reason to the person deciding (the ask effect has
// no reason field); the proxy reads it (proxy.ExtAskReason).
const askReasonExtension = "hookproxy.ask_reason"

func (p *Tools) unanalysableVerdict(tool string, c *shellCmd, rule string) verdict {
	what := "a command"
	if c != nil {
		what = "`" + c.String() + "`"
	}
	reason := fmt.Sprintf("Tool call %s is blocked: %s cannot be evaluated statically", tool, what)
	if rule != "" {
		reason += " and may be what rule " + rule + " refuses"
	}
	reason += "."
	if p.unanalysable == "ask" {
		reason += " It needs approval."
		return verdict{denied: true, ask: true, rule: "unanalysable", reason: reason, code: "hookproxy.tools.unanalysable"}
	}
	return verdict{denied: true, rule: "unanalysable", reason: reason, code: "hookproxy.tools.unanalysable"}
}

func (r *toolRule) deny(tool string, c *shellCmd) verdict {
	reason := r.reason
	switch {
	case c != nil && reason != "":
		reason += fmt.Sprintf(" (`%s` refused by rule %s)", c, r.label)
	case c != nil:
		reason = fmt.Sprintf("Tool call %s is blocked: `%s` refused by rule %s.", tool, c, r.label)
	case reason == "":
		reason = fmt.Sprintf("Tool call %s is blocked by policy rule %s.", tool, r.label)
	}
	if r.ask {
		if r.reason == "" {
			reason = fmt.Sprintf("Tool call %s needs approval (rule %s).", tool, r.label)
			if c != nil {
				reason = fmt.Sprintf("Tool call %s: `%s` needs approval (rule %s).", tool, c, r.label)
			}
		}
		return verdict{denied: true, ask: true, rule: r.label, reason: reason, code: r.code}
	}
	return verdict{denied: true, rule: r.label, reason: reason, code: r.code}
}

// implicitCommands run nothing but the shell itself; an allow list need not name them.
var implicitCommands = map[string]bool{"cd": true, "pushd": true, "popd": true, "echo": true, "printf": true,
	"true": true, "false": true, "test": true, "[": true, "pwd": true, "exit": true, "export": true, "set": true,
	"unset": true, "shift": true, "read": true, "wait": true, "return": true, "break": true, "continue": true,
	":": true, "type": true, "which": true, "hash": true, "help": true}

// commandAllowed matches one command against allowCommands.
func (p *Tools) commandAllowed(tool string, c *shellCmd) bool {
	prog := c.prog()
	if implicitCommands[prog] {
		return true
	}
	for _, a := range p.allowCommands {
		if a.Tool != "" {
			g := a.Tool
			if !p.caseSensitive {
				g = strings.ToLower(g)
			}
			if ok, _ := path.Match(g, tool); !ok {
				continue
			}
		}
		if ok, _ := path.Match(a.Command, prog); !ok {
			continue
		}
		if len(a.Subcommands) == 0 {
			return true
		}
		if sub, ok := subcommand(c.args()); ok && containsStr(a.Subcommands, sub) {
			return true
		}
	}
	return false
}

// subcommand is the first operand, options before it (and the arguments of -C and -c, as
// git takes them) skipped.
func subcommand(args []shellWord) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.dyn {
			return "", false
		}
		if a.s == "-C" || a.s == "-c" {
			i++
			continue
		}
		if strings.HasPrefix(a.s, "-") {
			continue
		}
		return a.s, true
	}
	return "", false
}

func globAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// check answers whether the rule matches the call: yes, no, or cannot tell (its command or
// effect depends on something not known statically). The command it concerns, if any,
// comes with the answer.
func (r *toolRule) check(name string, in *toolInput) (tri, *shellCmd) {
	if r.tool != "" {
		if ok, _ := path.Match(r.tool, name); !ok {
			return triNo, nil
		}
	}
	if r.input != nil {
		in.parse()
		if !r.input.match(in.compact) {
			return triNo, nil
		}
	}
	if r.argument != "" && !r.argumentMatches(in) {
		return triNo, nil
	}
	if r.command == nil && r.effect == nil {
		return triYes, nil
	}
	cmds := in.commands()
	res, hit := triNo, (*shellCmd)(nil)
	for i := range cmds {
		c := &cmds[i]
		t := r.commandTri(c)
		if t == triYes {
			return triYes, c
		}
		if t == triUnknown && res == triNo {
			res, hit = triUnknown, c
		}
	}
	return res, hit
}

// commandTri answers for one evaluated command; an unanalysable command is "cannot tell"
// when its static words name the rule's program (or its inline code a hint of the effect).
func (r *toolRule) commandTri(c *shellCmd) tri {
	if r.effect != nil {
		if t := r.effect.match(c, r.targets); t != triNo || c.kind != cmdUnanalysable {
			return t
		}
		for _, w := range c.words {
			if containsStr(r.effect.programs, path.Base(w)) {
				return triUnknown
			}
		}
		if c.codeText != "" {
			for _, tok := range codeTokens(c.codeText) {
				if containsStr(r.effect.hints, tok) || containsStr(r.effect.programs, tok) {
					return triUnknown
				}
			}
		}
		return triNo
	}
	if c.kind != cmdUnanalysable {
		return r.command.match(c)
	}
	for _, w := range c.words {
		if r.command.names(w) {
			return triUnknown
		}
	}
	for _, tok := range codeTokens(c.codeText) {
		if r.command.names(tok) {
			return triUnknown
		}
	}
	return triNo
}

// codeTokens splits inline code into identifier-like tokens (shutil.rmtree → shutil, rmtree).
func codeTokens(code string) []string {
	return strings.FieldsFunc(code, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
}

func (r *toolRule) argumentMatches(in *toolInput) bool {
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
