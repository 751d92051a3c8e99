package policies

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The command matcher of a tools rule (issue 13 §5): the strings of a tool call's input
// are parsed as shell (mvdan.cc/sh, a full POSIX/bash parser) and every simple command in
// them — after ;, &&, ||, |, in $(...), in `sh -c '...'`, behind sudo/env/nohup/... — is
// compared by its program name and flags. A rule {"command": "rm", "flags": ["-r|-R|--recursive",
// "-f|--force"]} then matches rm -rf, rm -fr, rm -r -f, rm  -Rf, rm --recursive --force and
// a tab between them alike, which no single regular expression over the text does.

// commandRule is a compiled command matcher.
type commandRule struct {
	program string     // glob over the program's base name
	flags   [][]string // each entry: alternatives, all entries required
}

// wrappers run the command that follows them; their own flags are skipped.
var wrappers = map[string]bool{"sudo": true, "doas": true, "env": true, "nohup": true, "time": true,
	"command": true, "exec": true, "xargs": true, "nice": true, "ionice": true, "stdbuf": true, "timeout": true}

// shells run the script given with -c.
var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "ksh": true, "dash": true, "fish": true}

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

// matchesInput reports whether any command in the input's strings matches.
func (c *commandRule) matchesInput(v *jsonValue, key string) bool {
	if proseKeys[key] {
		return false
	}
	switch v.kind {
	case jsonString:
		return c.matchesScript(v.str, 0)
	case jsonObject:
		for i := range v.elems {
			if c.matchesInput(&v.elems[i], v.keys[i]) {
				return true
			}
		}
	case jsonArray:
		argv := make([]string, 0, len(v.elems))
		for i := range v.elems {
			if v.elems[i].kind != jsonString {
				argv = nil
				break
			}
			argv = append(argv, v.elems[i].str)
		}
		if len(argv) > 1 && c.matchesArgv(argv, 0) {
			return true // a command given as argv (["rm", "-rf", "/"])
		}
		for i := range v.elems {
			if c.matchesInput(&v.elems[i], key) {
				return true
			}
		}
	}
	return false
}

const maxShellDepth = 4 // sh -c "sh -c '...'" nesting followed

// matchesScript parses s as shell and tries every simple command in it.
func (c *commandRule) matchesScript(s string, depth int) bool {
	if depth > maxShellDepth || !strings.ContainsAny(c.program, "*?[") && !strings.Contains(s, c.program) {
		return false // the program's name is not in the text: nothing to parse
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s), "")
	if err != nil {
		// Not valid shell (a fragment, prose): each line as whitespace-separated words.
		for _, line := range strings.Split(s, "\n") {
			if c.matchesArgv(strings.Fields(line), depth) {
				return true
			}
		}
		return false
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if found {
			return false
		}
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			argv := make([]string, len(call.Args))
			for i, w := range call.Args {
				argv[i] = wordText(w)
			}
			found = c.matchesArgv(argv, depth)
		}
		return !found
	})
	return found
}

// wordText is a word's text with its quotes removed; expansions it cannot resolve
// ($VAR, $(...)) keep their source form, which no program name or flag equals.
func wordText(w *syntax.Word) string {
	if lit := w.Lit(); lit != "" {
		return lit
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(x.Value)
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(l.Value)
				} else {
					b.WriteString("$?")
				}
			}
		default:
			b.WriteString("$?")
		}
	}
	return b.String()
}

// matchesArgv matches one command given as words.
func (c *commandRule) matchesArgv(argv []string, depth int) bool {
	// Skip wrappers (and their options) and VAR=value assignments.
	for len(argv) > 0 {
		w := argv[0]
		switch {
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "="):
			argv = argv[1:]
		case wrappers[path.Base(w)]:
			argv = argv[1:]
			for len(argv) > 0 && strings.HasPrefix(argv[0], "-") {
				argv = argv[1:]
			}
		default:
			goto program
		}
	}
	return false
program:
	prog := path.Base(argv[0])
	if shells[prog] && depth < maxShellDepth {
		for i := 1; i+1 < len(argv); i++ {
			if strings.HasPrefix(argv[i], "-") && !strings.HasPrefix(argv[i], "--") && strings.Contains(argv[i], "c") {
				if c.matchesScript(argv[i+1], depth+1) {
					return true
				}
				break
			}
		}
	}
	if ok, _ := path.Match(c.program, prog); !ok {
		return false
	}
	for _, alts := range c.flags {
		if !hasFlag(argv[1:], alts) {
			return false
		}
	}
	return true
}

// hasFlag reports whether args hold one of the alternative flags: a short flag ("-r")
// anywhere in a cluster ("-rf", "-fr"), a long one ("--force") alone or with "=value".
// Arguments after "--" are operands.
func hasFlag(args, alts []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		for _, f := range alts {
			switch {
			case strings.HasPrefix(f, "--"):
				if a == f || strings.HasPrefix(a, f+"=") {
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
