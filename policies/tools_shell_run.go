package policies

import (
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// How the command model follows a command into what it runs: wrappers (their options and
// option arguments skipped), shells and eval (their script re-parsed), find -exec, xargs,
// parallel, and interpreter one-liners (unanalysable).

// wrapSpec describes a program that runs another command given as its remaining words.
type wrapSpec struct {
	short      string   // short options that take an argument
	long       []string // long options that take an argument (matched by unambiguous prefix)
	script     byte     // short option whose argument is a shell script (su -c)
	scriptLong string   // its long spelling (--command)
	positional int      // words between the options and the command (timeout DURATION, ssh HOST)
	joined     bool     // the command's words are joined and run by a shell (ssh, watch)
	assigns    bool     // NAME=value words may precede the command (env, sudo)
	permute    bool     // options may follow the positional words (su USER -c, ssh HOST -t)
	privileged bool     // runs as another user or host: named in an allow list itself
}

var wrapperSpecs = map[string]wrapSpec{
	"sudo": {short: "CDghprtTUuR", long: []string{"user", "group", "prompt", "chdir", "chroot", "close-from",
		"role", "type", "other-user", "command-timeout", "host"}, assigns: true, privileged: true},
	"doas":             {short: "uC", privileged: true},
	"pkexec":           {long: []string{"user"}, privileged: true},
	"su":               {short: "sgGw", long: []string{"shell", "group", "supp-group", "whitelist-environment"}, script: 'c', scriptLong: "command", positional: 64, permute: true, privileged: true},
	"runuser":          {short: "sgGwu", long: []string{"shell", "group", "supp-group", "user", "whitelist-environment"}, script: 'c', scriptLong: "command", positional: 64, permute: true, privileged: true},
	"env":              {short: "uCSP", long: []string{"unset", "chdir", "split-string"}, assigns: true},
	"timeout":          {short: "ks", long: []string{"kill-after", "signal"}, positional: 1},
	"nice":             {short: "n", long: []string{"adjustment"}},
	"nohup":            {},
	"setsid":           {},
	"chroot":           {long: []string{"userspec", "groups"}, positional: 1, privileged: true},
	"stdbuf":           {short: "ioe", long: []string{"input", "output", "error"}},
	"ionice":           {short: "cnpPu", long: []string{"class", "classdata", "pid", "pgid", "uid"}},
	"exec":             {short: "a"},
	"builtin":          {},
	"time":             {short: "fo", long: []string{"format", "output"}},
	"watch":            {short: "nq", long: []string{"interval", "equexit"}, joined: true},
	"busybox":          {},
	"toybox":           {},
	"script":           {short: "EIOBTm", long: []string{"echo", "log-in", "log-out", "log-io", "log-timing", "logging-format", "output-limit"}, script: 'c', scriptLong: "command"},
	"ssh":              {short: "bcDEeFIiJLlmOopQRSWw", positional: 1, permute: true, joined: true, privileged: true},
	"flock":            {short: "wEo", long: []string{"wait", "timeout", "conflict-exit-code"}, script: 'c', scriptLong: "command", positional: 1},
	"taskset":          {positional: 1},
	"caffeinate":       {short: "tw"},
	"unbuffer":         {},
	"fakeroot":         {short: "lsi", long: []string{"lib", "faked", "save-file", "load-file"}},
	"strace":           {short: "abeEIoOpPsSuUX"},
	"ltrace":           {short: "aAeDnopsSuX"},
	"nsenter":          {short: "tSGrw", long: []string{"target", "setuid", "setgid"}, privileged: true},
	"unshare":          {short: "S", long: []string{"setuid", "setgid", "propagation", "setgroups", "map-user", "map-group"}},
	"torsocks":         {short: "uPa"},
	"proxychains":      {short: "f"},
	"proxychains4":     {short: "f"},
	"screen":           {short: "SceptTh"},
	"chrt":             {positional: 1},
	"sg":               {positional: 1, joined: true, privileged: true},
	"systemd-run":      {short: "upEHM", long: []string{"unit", "property", "description", "slice", "uid", "gid", "setenv", "working-directory", "machine", "host"}, privileged: true},
	"firejail":         {},
	"dbus-run-session": {},
	"catchsegv":        {},
	"valgrind":         {},
	"xvfb-run":         {short: "nsfep"},
}

// parse skips the wrapper's options. It returns the command words, and the script given
// through the script option (su -c CMD), if any.
func (s wrapSpec) parse(args []shellWord) (rest []shellWord, script *shellWord, split *shellWord) {
	pos := s.positional
	i := 0
	for i < len(args) {
		a := args[i]
		if a.dyn {
			break
		}
		w := a.s
		switch {
		case w == "--":
			i++
			goto operands
		case strings.HasPrefix(w, "--") && len(w) > 2:
			name, _, hasVal := strings.Cut(w[2:], "=")
			if s.scriptLong != "" && strings.HasPrefix(s.scriptLong, name) {
				if hasVal {
					v := shellWord{s: w[strings.IndexByte(w, '=')+1:]}
					script = &v
				} else if i+1 < len(args) {
					script = &args[i+1]
					i++
				}
			} else if !hasVal && prefixOfAny(name, s.long) {
				if name == "split-string" || strings.HasPrefix("split-string", name) && len(name) >= 2 {
					if i+1 < len(args) {
						split = &args[i+1]
					}
				}
				if i+1 < len(args) {
					i++ // the option's value; the last word has none (the wrapper refuses it)
				}
			} else if hasVal && strings.HasPrefix("split-string", name) && len(name) >= 2 {
				v := shellWord{s: w[strings.IndexByte(w, '=')+1:]}
				split = &v
			}
			i++
		case len(w) > 1 && w[0] == '-':
			i++
			for j := 1; j < len(w); j++ {
				c := w[j]
				if s.script != 0 && c == s.script {
					if j+1 < len(w) {
						v := shellWord{s: w[j+1:]}
						script = &v
					} else if i < len(args) {
						script = &args[i]
						i++
					}
					break
				}
				if strings.IndexByte(s.short, c) >= 0 {
					var v *shellWord
					if j+1 < len(w) {
						v = &shellWord{s: w[j+1:]}
					} else if i < len(args) {
						v = &args[i]
						i++
					}
					if c == 'S' && v != nil && s.assigns && s.short == "uCSP" {
						split = v
					}
					break
				}
			}
		case s.assigns && isAssignment(w):
			i++
		case s.permute && pos > 0:
			pos--
			i++
		default:
			goto operands
		}
	}
operands:
	for ; i < len(args) && s.assigns && !args[i].dyn && isAssignment(args[i].s); i++ {
	}
	for ; pos > 0 && i < len(args); pos-- {
		i++
	}
	return args[i:], script, split
}

func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for k, r := range w[:eq] {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || k > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func prefixOfAny(name string, longs []string) bool {
	for _, l := range longs {
		if strings.HasPrefix(l, name) {
			return true
		}
	}
	return false
}

var shellNames = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true,
	"ash": true, "yash": true, "posh": true, "rbash": true, "fish": true, "ksh93": true, "pdksh": true, "oksh": true}

// interpreters run code given inline with one of their options.
var interpreters = map[string]string{ // program → options whose argument is code
	"python": "c", "python2": "c", "python3": "c", "pypy": "c", "pypy3": "c",
	"perl": "eE", "ruby": "e", "node": "ep", "nodejs": "ep", "bun": "ep", "deno": "", "php": "r",
	"lua": "e", "luajit": "e", "Rscript": "e", "osascript": "e", "tclsh": "", "pwsh": "c", "powershell": "c",
	"jshell": "", "irb": "", "groovy": "e", "julia": "e", "elixir": "e", "erl": "", "scala": "e",
}

// interpArgOpts are interpreter options that take an argument (attached or next).
var interpArgOpts = map[string]string{"python": "WXmQ", "python2": "WXmQ", "python3": "WXmQ", "pypy": "WXm", "pypy3": "WXm",
	"perl": "MmI", "ruby": "IrCEF", "node": "r", "nodejs": "r", "php": "cdfz"}

// notRun are programs whose arguments name commands without running them.
var notRun = map[string]bool{"type": true, "which": true, "hash": true, "help": true, "man": true,
	"whatis": true, "apropos": true, "whereis": true, "info": true, "tldr": true, "complete": true, "compgen": true}

// runWords follows one command given as words.
func (e *shellEval) runWords(argv []shellWord, via []string, in *stdinFeed, depth int, dynWords []string) {
	for guard := 0; guard < 64 && len(argv) > 0; guard++ {
		if depth > maxShellDepth || e.count > maxShellCommands {
			e.unanalysable("nested too deep to evaluate", argv, via, nil)
			return
		}
		if argv[0].dyn {
			e.unanalysable("program name not known statically", argv, via, dynWords)
			return
		}
		prog := path.Base(argv[0].s)
		if strings.HasPrefix(prog, "python3.") || strings.HasPrefix(prog, "python2.") {
			prog = "python3"
		}
		if spec, ok := wrapperSpecs[prog]; ok {
			if prog == "exec" && len(argv) == 1 || prog == "busybox" && len(argv) > 1 && strings.HasPrefix(argv[1].s, "-") {
				e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
				return
			}
			rest, script, split := spec.parse(argv[1:])
			v := append(clip(via), prog)
			if split != nil {
				if split.dyn {
					e.unanalysable("env -S string not known statically", argv, via, nil)
					return
				}
				words := splitWords(split.s)
				argv = append(words, rest...)
				via = append(clip(via), "env -S")
				continue
			}
			if script != nil {
				if script.dyn {
					e.unanalysable("script not known statically", argv, via, dynWords)
					return
				}
				e.script(script.s, append(clip(via), prog+" -c"), depth+1)
				return
			}
			if len(rest) == 0 {
				if prog == "su" || prog == "runuser" || prog == "ssh" || prog == "script" || prog == "sudo" && hasShortFlag(argv[1:], "si") {
					e.shellInput(prog, in, v, depth)
				}
				e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
				return
			}
			if spec.joined && !(prog == "watch" && hasShortFlag(argv[1:], "x")) {
				if joined, ok := joinStatic(rest); ok {
					e.script(joined, v, depth+1)
				} else {
					e.unanalysable("command not known statically", rest, v, dynWords)
				}
				return
			}
			if spec.privileged || prog == "busybox" || prog == "toybox" {
				// Keep a trace of the wrapper itself: allow lists name it.
				e.add(shellCmd{kind: cmdRun, argv: argv[:len(argv)-len(rest)], via: via})
			}
			argv, via = rest, v
			continue
		}
		switch {
		case shellNames[strings.TrimSuffix(prog, ".exe")]:
			e.shell(prog, argv, via, in, depth)
			return
		case prog == "eval":
			if joined, ok := joinStatic(argv[1:]); ok {
				e.script(joined, append(clip(via), "eval"), depth+1)
			} else {
				e.unanalysable("eval of text not known statically", argv, via, dynWords)
			}
			return
		case prog == "trap":
			if len(argv) > 1 && !argv[1].dyn && argv[1].s != "-" && !strings.HasPrefix(argv[1].s, "-") {
				e.script(argv[1].s, append(clip(via), "trap"), depth+1)
			}
			e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
			return
		case prog == "alias":
			for _, a := range argv[1:] {
				if _, val, ok := strings.Cut(a.s, "="); ok && !a.dyn {
					e.script(val, append(clip(via), "alias"), depth+1)
				}
			}
			e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
			return
		case prog == "source" || prog == ".":
			if len(argv) > 1 {
				if f := argv[1]; f.feed != nil || f.s == "/dev/stdin" || f.s == "-" {
					feed := f.feed
					if feed == nil {
						feed = in
					}
					e.shellInput(prog, feed, via, depth)
					return
				}
			}
			e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
			return
		case prog == "command":
			i := 1
			for ; i < len(argv) && strings.HasPrefix(argv[i].s, "-") && argv[i].s != "--"; i++ {
				if strings.ContainsAny(argv[i].s, "vV") {
					return // command -v NAME only looks the name up
				}
			}
			if i < len(argv) && argv[i].s == "--" {
				i++
			}
			argv, via = argv[i:], append(clip(via), "command")
			continue
		case notRun[prog]:
			e.add(shellCmd{kind: cmdRun, argv: argv[:1], via: via})
			return
		case prog == "set":
			// set -- a b c: the positional parameters become known words.
			for i, a := range argv {
				if a.s == "--" || i == 1 && !strings.HasPrefix(a.s, "-") && !strings.HasPrefix(a.s, "+") {
					start := i + 1
					if a.s != "--" {
						start = i
					}
					for k, w := range argv[start:] {
						if e.multi == nil {
							e.multi = map[string][]string{}
						}
						e.multi["@"] = append(e.multi["@"], w.s)
						e.multi["*"] = append(e.multi["*"], w.s)
						e.multi[strconv.Itoa(k+1)] = append(e.multi[strconv.Itoa(k+1)], w.s)
					}
					break
				}
			}
			e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
			return
		case prog == "cd" || prog == "pushd":
			e.chdir(argv)
			e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
			return
		case prog == "find":
			e.find(argv, via, depth)
			return
		case prog == "xargs":
			e.xargs(argv, via, in, depth)
			return
		case prog == "parallel":
			e.parallel(argv, via, in, depth)
			return
		case isInterpreter(prog):
			e.interpreter(prog, argv, via, in)
			return
		case e.funcs[prog]:
			return // a function of the script: its body was evaluated where it was defined
		}
		e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
		return
	}
}

func isInterpreter(prog string) bool {
	if _, ok := interpreters[prog]; ok {
		return true
	}
	switch prog {
	case "awk", "gawk", "mawk", "nawk":
		return true
	}
	return false
}

func hasShortFlag(args []shellWord, letters string) bool {
	for _, a := range args {
		if len(a.s) > 1 && a.s[0] == '-' && a.s[1] != '-' && strings.ContainsAny(a.s[1:], letters) {
			return true
		}
		if !strings.HasPrefix(a.s, "-") {
			return false
		}
	}
	return false
}

func joinStatic(ws []shellWord) (string, bool) {
	parts := make([]string, len(ws))
	for i, w := range ws {
		if w.dyn {
			return "", false
		}
		parts[i] = w.s
	}
	return strings.Join(parts, " "), true
}

// envEscapes are env -S's own escapes (it is not a shell: no tilde, no globs).
var envEscapes = strings.NewReplacer(`\r`, "\r", `\n`, "\n", `\t`, "\t", `\f`, "\f", `\v`, "\v", `\_`, " ", `\c`, "")

// splitWords splits env -S's string into words, quotes and escapes resolved as env does.
func splitWords(s string) []shellWord {
	e := &shellEval{}
	s = envEscapes.Replace(s)
	var out []shellWord
	stmts, err := parseStmts(s)
	if err != nil || len(stmts) != 1 {
		for _, w := range strings.Fields(s) {
			out = append(out, shellWord{s: w})
		}
		return out
	}
	if c, ok := stmts[0].Cmd.(*syntax.CallExpr); ok {
		out = e.words(c.Args, nil, maxShellDepth+1)
		for i := range out {
			out[i].s = strings.ReplaceAll(out[i].s, homeMark, "~")
		}
		return out
	}
	for _, w := range strings.Fields(s) {
		out = append(out, shellWord{s: w})
	}
	return out
}

func (e *shellEval) chdir(argv []shellWord) {
	if len(argv) < 2 {
		e.cwd = homeMark
		return
	}
	d := argv[len(argv)-1]
	if d.dyn || d.s == "-" {
		e.cwd = ""
		return
	}
	switch {
	case strings.HasPrefix(d.s, "/") || strings.HasPrefix(d.s, homeMark):
		e.cwd = d.s
	case e.cwd == "":
		e.cwd = d.s
	default:
		e.cwd = e.cwd + "/" + d.s
	}
}

// shell follows sh/bash/zsh/... : the script of -c, or what it reads on its input; a
// script file is a program like any other.
func (e *shellEval) shell(prog string, argv []shellWord, via []string, in *stdinFeed, depth int) {
	cmdMode, stdinMode := false, false
	i := 1
	for i < len(argv) {
		a := argv[i]
		if a.dyn {
			break
		}
		w := a.s
		if w == "--" || w == "-" {
			i++
			break
		}
		if strings.HasPrefix(w, "--") {
			if w == "--rcfile" || w == "--init-file" {
				i++
			}
			if strings.HasPrefix(w, "--command") && prog == "fish" {
				if _, v, ok := strings.Cut(w, "="); ok {
					e.script(v, append(clip(via), prog+" -c"), depth+1)
					return
				}
				cmdMode = true
			}
			i++
			continue
		}
		if len(w) > 1 && (w[0] == '-' || w[0] == '+') {
			i++
			for j := 1; j < len(w); j++ {
				switch w[j] {
				case 'c':
					cmdMode = true
				case 's':
					stdinMode = true
				case 'o', 'O':
					if j+1 == len(w) {
						i++
					}
				case 'C':
					if prog == "fish" && i < len(argv) {
						i++
					}
				}
			}
			continue
		}
		break
	}
	label := prog
	if cmdMode {
		label += " -c"
	}
	v := append(clip(via), label)
	switch {
	case cmdMode:
		if i >= len(argv) {
			return
		}
		if argv[i].dyn {
			e.unanalysable("shell script not known statically", argv, via, nil)
			return
		}
		e.script(argv[i].s, v, depth+1)
	case stdinMode || i >= len(argv):
		e.shellInput(prog, in, v, depth)
	case argv[i].feed != nil || argv[i].s == "/dev/stdin":
		feed := argv[i].feed
		if feed == nil {
			feed = in
		}
		e.shellInput(prog, feed, v, depth)
	default:
		e.add(shellCmd{kind: cmdRun, argv: argv, via: via}) // bash script.sh: runs a file
	}
}

// shellInput follows a shell that runs what it reads.
func (e *shellEval) shellInput(prog string, in *stdinFeed, via []string, depth int) {
	switch {
	case in == nil:
		// No input given: the agent's shell has nothing on it.
	case in.known:
		e.script(in.text, via, depth+1)
	default:
		e.add(shellCmd{kind: cmdUnanalysable, why: prog + " runs code it reads, not known statically", via: via,
			words: in.progs, fromNet: in.net, argv: []shellWord{{s: prog}}})
	}
}

// interpreter: an inline program in another language is not evaluated.
func (e *shellEval) interpreter(prog string, argv []shellWord, via []string, in *stdinFeed) {
	opts := interpreters[prog]
	code, inline := "", false
	awk := strings.HasSuffix(prog, "awk")
	for i := 1; i < len(argv); i++ {
		w := argv[i].s
		if awk {
			if w == "-f" || w == "--file" || strings.HasPrefix(w, "-f") && len(w) > 2 {
				break // a program file
			}
			if w == "-F" || w == "-v" {
				i++
				continue
			}
			if strings.HasPrefix(w, "-") {
				continue
			}
			code, inline = w, true
			break
		}
		if prog == "deno" && w == "eval" && i+1 < len(argv) {
			code, inline = argv[i+1].s, true
			break
		}
		if strings.HasPrefix(w, "--eval") || strings.HasPrefix(w, "--print") || w == "--command" {
			if _, v, ok := strings.Cut(w, "="); ok {
				code = v
			} else if i+1 < len(argv) {
				code = argv[i+1].s
			}
			inline = true
			break
		}
		if len(w) > 1 && w[0] == '-' && w[1] != '-' {
			if k := strings.IndexAny(w[1:], interpArgOpts[prog]); k >= 0 && (opts == "" || k < strings.IndexAny(w[1:]+opts, opts)) {
				if k+2 == len(w) {
					i++ // the argument is the next word (python -W ignore, perl -I lib)
				}
				if strings.HasPrefix(prog, "python") && w[k+1] == 'm' {
					break // python -m module: a program like any other
				}
				continue
			}
			if k := strings.IndexAny(w[1:], opts); opts != "" && k >= 0 {
				if rest := w[k+2:]; rest != "" {
					code = rest
				} else if i+1 < len(argv) {
					code = argv[i+1].s
				}
				inline = true
				break
			}
			continue
		}
		if w == "-" && in != nil {
			inline = true
			code = in.text
		}
		break
	}
	if !inline && len(argv) == 1 && in != nil && !awk {
		inline, code = true, in.text
	}
	if !inline {
		e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
		return
	}
	if awk && !strings.Contains(code, "system") && !strings.Contains(code, "|") && !strings.Contains(code, "getline") {
		e.add(shellCmd{kind: cmdRun, argv: argv, via: via}) // an awk program that runs nothing
		return
	}
	c := shellCmd{kind: cmdUnanalysable, why: "inline " + prog + " code", argv: argv, via: via, codeText: code}
	for _, w := range argv {
		if !w.dyn {
			c.words = append(c.words, w.s)
		}
	}
	e.add(c)
}

// findStarts splits find's arguments into its starting points and its expression.
func findStarts(args []shellWord) (starts, expr []shellWord) {
	i := 0
	for i < len(args) && !args[i].dyn {
		w := args[i].s
		if w == "-H" || w == "-L" || w == "-P" || strings.HasPrefix(w, "-O") {
			i++
			continue
		}
		if w == "-D" {
			i += 2
			continue
		}
		break
	}
	j := i
	for j < len(args) && (args[j].dyn || !(strings.HasPrefix(args[j].s, "-") || args[j].s == "(" || args[j].s == "!" || args[j].s == ",")) {
		j++
	}
	return args[i:j], args[j:]
}

// find: the commands of -exec/-execdir/-ok/-okdir run once per file under the starting
// points, with {} standing for them.
func (e *shellEval) find(argv []shellWord, via []string, depth int) {
	e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
	starts, expr := findStarts(argv[1:])
	if len(starts) == 0 {
		starts = []shellWord{{s: "."}}
	}
	for i := 0; i < len(expr); i++ {
		switch expr[i].s {
		case "-exec", "-execdir", "-ok", "-okdir":
			label := "find " + expr[i].s
			j := i + 1
			for j < len(expr) && !(expr[j].s == ";" || expr[j].s == "+" && j > i+1 && strings.Contains(expr[j-1].s, "{}")) {
				j++
			}
			sub := expr[i+1 : j]
			i = j
			if len(sub) == 0 {
				continue
			}
			items := findSelected(starts, expr)
			if len(items) > maxLoopItems {
				items = items[:maxLoopItems]
			}
			e.withItems(sub, "{}", items, true, append(clip(via), label), nil, depth)
		}
	}
}

// withItems runs sub once per item, the item replacing repl in its words (appended when
// repl is ""). tree marks items standing for whole directory trees.
func (e *shellEval) withItems(sub []shellWord, repl string, items []shellWord, tree bool, via []string, in *stdinFeed, depth int) {
	savedFind := e.inFind
	e.inFind = e.inFind || tree
	defer func() { e.inFind = savedFind }()
	if repl == "" {
		argv := append(append([]shellWord(nil), sub...), items...)
		e.runWords(argv, via, in, depth+1, nil)
		return
	}
	replaced := false
	for _, it := range items {
		argv := make([]shellWord, len(sub))
		for k, w := range sub {
			argv[k] = w
			if !w.dyn && strings.Contains(w.s, repl) {
				replaced = true
				if it.dyn {
					argv[k] = shellWord{s: w.s, dyn: true}
				} else {
					argv[k] = shellWord{s: strings.ReplaceAll(w.s, repl, it.s)}
				}
			}
		}
		e.runWords(argv, via, in, depth+1, nil)
	}
	if len(items) == 0 || !replaced && repl != "{}" {
		e.runWords(sub, via, in, depth+1, nil)
	}
}

// feedItems are the items xargs or parallel read: known words, a producer's paths
// (find T: trees under T), or one unknown item.
func feedItems(in *stdinFeed) ([]shellWord, bool) {
	switch {
	case in == nil:
		return nil, false
	case in.known:
		var out []shellWord
		for _, f := range strings.FieldsFunc(in.text, func(r rune) bool { return r == 0 || r == ' ' || r == '\t' || r == '\n' }) {
			out = append(out, shellWord{s: f})
		}
		return out, false
	case len(in.items) > 0:
		out := make([]shellWord, len(in.items))
		for i, s := range in.items {
			out[i] = shellWord{s: s}
		}
		return out, in.tree
	}
	return []shellWord{{s: "$…", dyn: true, split: true}}, false // unknown items may be options too
}

func (e *shellEval) xargs(argv []shellWord, via []string, in *stdinFeed, depth int) {
	repl := ""
	var argFile *shellWord
	i := 1
	for i < len(argv) && !argv[i].dyn && strings.HasPrefix(argv[i].s, "-") {
		w := argv[i].s
		i++
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "--") {
			name, val, hasVal := strings.Cut(w[2:], "=")
			if strings.HasPrefix("replace", name) && len(name) >= 2 {
				repl = "{}"
				if hasVal {
					repl = val
				}
			} else if strings.HasPrefix("arg-file", name) && len(name) >= 2 {
				if hasVal {
					argFile = &shellWord{s: val}
				} else if i < len(argv) {
					argFile = &argv[i]
					i++
				}
			} else if !hasVal && prefixOfAny(name, []string{"delimiter", "eof", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}) {
				i++
			}
			continue
		}
		for j := 1; j < len(w); j++ {
			c := w[j]
			if c == 'i' {
				repl = "{}"
				if j+1 < len(w) {
					repl = w[j+1:]
				}
				break
			}
			if strings.IndexByte("aEdILnPs", c) >= 0 {
				v := w[j+1:]
				if v == "" && i < len(argv) {
					v = argv[i].s
					i++
				}
				if c == 'I' {
					repl = v
				}
				if c == 'a' {
					w := shellWord{s: v}
					if v == "" || w.s == argv[i-1].s {
						w = argv[i-1]
					}
					argFile = &w
				}
				break
			}
		}
	}
	sub := argv[i:]
	if len(sub) == 0 {
		sub = []shellWord{{s: "echo"}}
	}
	if argFile != nil {
		// xargs -a FILE reads its items from the file, not its input.
		in = argFile.feed
		if in == nil {
			in = &stdinFeed{}
		}
	}
	items, tree := feedItems(in)
	e.withItems(sub, repl, items, tree, append(clip(via), "xargs"), nil, depth)
}

func (e *shellEval) parallel(argv []shellWord, via []string, in *stdinFeed, depth int) {
	i := 1
	for i < len(argv) && !argv[i].dyn && strings.HasPrefix(argv[i].s, "-") && !strings.HasPrefix(argv[i].s, ":::") {
		w := argv[i].s
		i++
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "--") {
			if !strings.Contains(w, "=") && prefixOfAny(w[2:], []string{"jobs", "max-procs", "sshlogin", "arg-file", "delimiter", "max-args", "max-replace-args", "results", "joblog", "timeout", "delay", "tmpdir", "workdir", "colsep", "eof", "halt"}) {
				i++
			}
			continue
		}
		if len(w) == 2 && strings.IndexByte("jPNnSadIEX", w[1]) >= 0 {
			i++
		}
	}
	var sub, items []shellWord
	j := i
	for j < len(argv) && !strings.HasPrefix(argv[j].s, ":::") {
		j++
	}
	sub = argv[i:j]
	tree := false
	if j < len(argv) {
		for _, w := range argv[j+1:] {
			if !strings.HasPrefix(w.s, ":::") {
				items = append(items, w)
			}
		}
	} else {
		items, tree = feedItems(in)
	}
	v := append(clip(via), "parallel")
	if len(sub) == 1 && !sub[0].dyn && strings.ContainsAny(sub[0].s, " \t;|&") {
		for _, it := range items {
			s := sub[0].s
			if strings.Contains(s, "{}") {
				s = strings.ReplaceAll(s, "{}", it.s)
			} else {
				s += " " + it.s
			}
			if it.dyn {
				e.unanalysable("parallel command not known statically", sub, v, nil)
				continue
			}
			e.script(s, v, depth+1)
		}
		return
	}
	repl := ""
	for _, w := range sub {
		if strings.Contains(w.s, "{}") {
			repl = "{}"
		}
	}
	e.withItems(sub, repl, items, tree, v, nil, depth)
}
