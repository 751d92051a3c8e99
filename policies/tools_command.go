package policies

import (
	"context"
	"encoding/json"
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The command matcher of a tools rule: the commands of a tool call (the strings under its
// command keys, parsed and evaluated by the command model in tools_shell.go) are compared
// by program base name and flags. A rule {"command": "rm", "flags": ["-r|-R|--recursive"]}
// matches rm -rf, rm -fr, rm -r -f, \rm -Rf, "/bin/rm" --rec, sudo -u root rm -r, rm in
// bash -c '...', behind env -S, timeout 60, xargs or find -exec, which no single regular
// expression over the text does.

// commandRule is a compiled command matcher.
type commandRule struct {
	program string     // glob over the program's base name
	flags   [][]string // each entry: alternatives, all entries required
}

func compileCommandRule(program string, flags []string) (*commandRule, error) {
	if _, err := path.Match(program, ""); err != nil {
		return nil, err
	}
	cr := &commandRule{program: program}
	for _, f := range flags {
		var alts []string
		for _, a := range strings.Split(f, "|") {
			if a = strings.TrimSpace(a); a != "" {
				alts = append(alts, a)
			}
		}
		if len(alts) > 0 {
			cr.flags = append(cr.flags, alts)
		}
	}
	return cr, nil
}

// names reports whether a word names the rule's program.
func (c *commandRule) names(word string) bool {
	ok, _ := path.Match(c.program, path.Base(word))
	return ok
}

// match answers for one evaluated command.
func (c *commandRule) match(cmd *shellCmd) tri {
	if cmd.kind != cmdRun || !c.names(cmd.prog()) {
		return triNo
	}
	args := cmd.args()
	dyn := false // an unquoted expansion could be any flag
	for _, a := range args {
		dyn = dyn || a.split
	}
	for _, alts := range c.flags {
		if !hasFlag(args, alts) {
			if dyn {
				return triUnknown // a word not known statically could be the flag
			}
			return triNo
		}
	}
	return triYes
}

// hasFlag reports whether args hold one of the alternative flags: a short flag ("-r")
// anywhere in a cluster ("-rf", "-fr"), a long one ("--force") alone, with "=value", or
// abbreviated to a prefix ("--rec", "--for": GNU getopt_long accepts any unambiguous
// one). Arguments after "--" are operands.
func hasFlag(args []shellWord, alts []string) bool {
	for _, w := range args {
		a := w.s
		if w.dyn {
			continue
		}
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		for _, f := range alts {
			switch {
			case strings.HasPrefix(f, "--"):
				name, _, _ := strings.Cut(a, "=")
				if name == f || len(name) > 2 && strings.HasPrefix(a, "--") && strings.HasPrefix(f, name) {
					return true
				}
			case len(f) == 2 && f[0] == '-':
				if !strings.HasPrefix(a, "--") && strings.IndexByte(a[1:], f[1]) >= 0 {
					return true
				}
			default:
				if a == f {
					return true
				}
			}
		}
	}
	return false
}

// commandKeys are the input members that hold a command, in the shapes agents send:
// Claude Code's Bash {"command": "..."}, Codex's exec_command {"cmd": "..."} and shell
// {"command": ["bash", "-lc", "..."]}, local_shell_call {"command", "argv"}, shell_call
// {"commands": [...]}, script tools {"script": ...}, freeform exec tools {"input": ...}.
// "input" counts only for a tool whose name says it runs commands (exec, shell, bash,
// terminal, run, cmd): an apply_patch input is a patch, not a script.
var commandKeys = map[string]bool{"command": true, "cmd": true, "cmdline": true, "command_line": true,
	"commands": true, "script": true, "argv": true, "shell_command": true, "raw_arguments": true}

// codeModeCall is a tool call in Codex's code mode, where the freeform input of the exec
// tool is JavaScript calling its tools: const r = await tools.exec_command({cmd: "ls"}).
var (
	codeModeCall    = regexp.MustCompile(`\btools\s*\.\s*[A-Za-z_][A-Za-z0-9_]*\s*\(`)
	codeModeLiteral = regexp.MustCompile(`\btools\s*\.\s*(?:exec_command|shell_command|shell|local_shell)\s*\(\s*\{\s*"?(?:cmd|command)"?\s*:\s*("(?:[^"\\\n]|\\.)*"|\[(?:\s*"(?:[^"\\\n]|\\.)*"\s*,?)*\])\s*[,}]`)
)

// codeModeCommands returns the commands of a code-mode program when every tool call in it
// runs a literal command (a JSON string, or an argv array of them); ok is false when a
// call's command is computed, or the text is not such a program: it is then evaluated
// as shell (and, not being shell, is unanalysable).
func codeModeCommands(js string) (cmds []string, ok bool) {
	calls := codeModeCall.FindAllStringIndex(js, -1)
	lits := codeModeLiteral.FindAllStringSubmatch(js, -1)
	if len(calls) == 0 || len(calls) != len(lits) {
		return nil, false
	}
	for _, m := range lits {
		lit := m[1]
		if strings.HasPrefix(lit, "[") {
			var argv []string
			if err := json.Unmarshal([]byte(lit), &argv); err != nil {
				return nil, false
			}
			quoted := make([]string, len(argv))
			for i, a := range argv {
				q, err := syntax.Quote(a, syntax.LangBash)
				if err != nil {
					return nil, false
				}
				quoted[i] = q
			}
			cmds = append(cmds, strings.Join(quoted, " "))
			continue
		}
		var c string
		if err := json.Unmarshal([]byte(lit), &c); err != nil {
			return nil, false
		}
		cmds = append(cmds, c)
	}
	return cmds, true
}

// inputCommands evaluates every command in a tool call's input.
func inputCommands(ctx context.Context, tool string, v *jsonValue) []shellCmd {
	var out []shellCmd
	t := strings.ToLower(tool)
	freeform := strings.Contains(t, "exec") || strings.Contains(t, "shell") || strings.Contains(t, "bash") ||
		strings.Contains(t, "terminal") || strings.Contains(t, "run") || strings.Contains(t, "cmd") || strings.Contains(t, "command")
	collectCommands(ctx, v, "", false, freeform, &out)
	return out
}

func collectCommands(ctx context.Context, v *jsonValue, key string, under, freeform bool, out *[]shellCmd) {
	if proseKeys[key] {
		return
	}
	isCmd := under || commandKeys[key] || freeform && key == "input"
	switch v.kind {
	case jsonString:
		if !isCmd || strings.TrimSpace(v.str) == "" {
			return
		}
		if key == "input" && strings.Contains(v.str, "tools.") {
			if cmds, ok := codeModeCommands(v.str); ok {
				for _, c := range cmds {
					*out = append(*out, analyseScript(ctx, c)...)
				}
				return
			}
		}
		*out = append(*out, analyseScript(ctx, v.str)...)
	case jsonObject:
		for i := range v.elems {
			collectCommands(ctx, &v.elems[i], v.keys[i], false, freeform, out)
		}
	case jsonArray:
		if isCmd && key != "commands" {
			argv := make([]string, 0, len(v.elems))
			for i := range v.elems {
				if v.elems[i].kind != jsonString {
					argv = nil
					break
				}
				argv = append(argv, v.elems[i].str)
			}
			if len(argv) > 0 {
				*out = append(*out, analyseArgv(ctx, argv)...)
				return
			}
		}
		for i := range v.elems {
			collectCommands(ctx, &v.elems[i], "", isCmd && key == "commands", freeform, out)
		}
	}
}
