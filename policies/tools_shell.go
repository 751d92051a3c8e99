package policies

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// The command model of the tools policy: a shell script (or an argv) is evaluated
// statically the way the shell would run it, and every simple command it runs comes out
// as a shellCmd — its words after quote removal, backslash escapes, ANSI-C $'…' strings,
// brace and tilde expansion; reached through lists, pipelines, if/while/for/case bodies,
// subshells, functions, command and process substitutions; unwrapped from wrappers (sudo,
// env -S, timeout, xargs, find -exec, ssh host CMD, ...) and from nested shells and eval,
// re-parsed up to maxShellDepth. What cannot be known without running something (a
// program name from a variable, code piped into a shell from a download, an interpreter
// one-liner) is kept as a command of kind cmdUnanalysable, with the static words around
// it, so that a policy can decide what to do with it.

// homeMark stands for the home directory a tilde or $HOME expands to; a quoted "~" stays a
// plain "~", the name of a directory in the working directory.
const homeMark = "\x01~"

const (
	maxShellDepth    = 8       // nested shells, eval, wrappers' scripts followed
	maxShellCommands = 4096    // commands evaluated per tool call before the rest is unanalysable
	maxShellInput    = 1 << 20 // longer scripts are unanalysable
	maxLoopItems     = 16      // for-loop items evaluated one by one (more: the variable is unknown)
	maxShellSteps    = 20000   // statements evaluated per tool call (loops re-evaluate their bodies)
	maxBraceFields   = 256     // words a brace expansion may produce before it is not expanded
)

type cmdKind uint8

const (
	cmdRun          cmdKind = iota // a program run with known words
	cmdUnanalysable                // something runs that static evaluation cannot see
	cmdForkBomb                    // a function that calls itself into the background or a pipe
	cmdWrite                       // a redirection writing to a file: argv = [">", target]
)

// shellWord is one evaluated word; dyn means its value is not known statically.
type shellWord struct {
	s   string
	dyn bool
	// split: dynamic and unquoted, so field splitting may make it any number of words,
	// options included ($FLAGS); a quoted "$f" stays one word.
	split bool
	feed  *stdinFeed // a process substitution <(...): what reading this path yields
}

// shellCmd is one command the shell would run.
type shellCmd struct {
	kind     cmdKind
	argv     []shellWord
	via      []string // wrappers and shells it was reached through, outermost first
	cwd      string   // working directory set by an earlier static cd ("" = where the call runs)
	why      string   // cmdUnanalysable: what could not be evaluated
	words    []string // cmdUnanalysable: the static words seen around it (program names it may run)
	viaFind  bool     // run by find -exec/-ok once per file of a tree, or fed a tree's paths
	fromNet  bool     // cmdUnanalysable: the code comes from a download (curl, wget, ...)
	codeText string   // cmdUnanalysable: inline code (python -c ...), searched for hints
}

// prog is the program's base name ("" when unknown).
func (c *shellCmd) prog() string {
	if len(c.argv) == 0 || c.argv[0].dyn {
		return ""
	}
	return path.Base(c.argv[0].s)
}

// args are the words after the program.
func (c *shellCmd) args() []shellWord {
	if len(c.argv) == 0 {
		return nil
	}
	return c.argv[1:]
}

// String renders the command for a reason: its evaluated words, shell-quoted where
// needed, and the wrappers it was reached through.
func (c *shellCmd) String() string {
	var b strings.Builder
	switch c.kind {
	case cmdUnanalysable:
		b.WriteString(c.why)
		if len(c.argv) > 0 {
			b.WriteString(": ")
		}
	case cmdForkBomb:
		b.WriteString("fork bomb ")
	}
	for i, w := range c.argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case w.dyn:
			b.WriteString("$…")
		case strings.HasPrefix(w.s, homeMark) && !strings.ContainsAny(w.s, " \t\n'\"\\$`;&|<>(){}"):
			b.WriteString(strings.ReplaceAll(w.s, homeMark, "~"))
		case w.s == "" || strings.ContainsAny(w.s, " \t\n'\"\\$`;&|<>(){}*?[]#~\x01"):
			if q, err := syntax.Quote(w.s, syntax.LangBash); err == nil {
				b.WriteString(q)
			} else {
				b.WriteString("'" + w.s + "'")
			}
		default:
			b.WriteString(w.s)
		}
		if b.Len() > 200 {
			b.WriteString(" …")
			break
		}
	}
	if c.cwd != "" {
		b.WriteString(" (in " + strings.ReplaceAll(c.cwd, homeMark, "~") + ")")
	}
	if len(c.via) > 0 {
		b.WriteString(" (via " + strings.Join(c.via, ", ") + ")")
	}
	return strings.ReplaceAll(b.String(), homeMark, "~")
}

// stdinFeed is what a command reads on standard input, or a process substitution yields.
type stdinFeed struct {
	known bool     // text is exactly what is read
	text  string   //
	items []string // paths a producer lists (find T → T), for xargs
	tree  bool     // items stand for whole trees (find)
	progs []string // programs producing it
	net   bool     // a producer downloads (curl, wget, ...)
}

// shellEval evaluates one tool call's commands.
type shellEval struct {
	cmds   []shellCmd
	vars   map[string]string   // variables with one known value
	multi  map[string][]string // every value a variable was given (known or not)
	cwd    string
	funcs  map[string]bool
	count  int
	steps  int
	inFind bool // evaluating what find -exec (or xargs fed by find) runs

	// ctx ends the evaluation (the policy's deadline): it is asked every stopEvery
	// statements and before every script is parsed; once it has ended nothing more is
	// evaluated, and the caller answers with ctx's error, never with what it found so far.
	ctx    context.Context
	asks   int
	halted bool
}

// stopEvery is how many statements are evaluated between two looks at the deadline: a
// statement costs a microsecond or so, the look a clock read.
const stopEvery = 16

// ended reports whether the evaluation must stop (its context has ended), looking at the
// context on every stopEvery-th call, or on this one when now is set (before a parse, which
// costs more than a statement). An evaluation without a context (env -S's word splitting)
// never stops.
func (e *shellEval) ended(now bool) bool {
	if !e.halted && e.ctx != nil {
		if e.asks++; (now || e.asks%stopEvery == 1) && e.ctx.Err() != nil {
			e.halted = true
		}
	}
	return e.halted
}

// analyseScript evaluates a shell script until ctx ends.
func analyseScript(ctx context.Context, script string) []shellCmd {
	e := &shellEval{ctx: ctx}
	e.script(script, nil, 0)
	return e.cmds
}

// analyseArgv evaluates a command given as argv (["bash", "-lc", "..."]) until ctx ends.
func analyseArgv(ctx context.Context, argv []string) []shellCmd {
	e := &shellEval{ctx: ctx}
	words := make([]shellWord, len(argv))
	for i, a := range argv {
		words[i] = shellWord{s: a}
	}
	e.runWords(words, nil, nil, 0, nil)
	return e.cmds
}

func (e *shellEval) add(c shellCmd) {
	e.count++
	switch {
	case e.count == maxShellCommands+1:
		c = shellCmd{kind: cmdUnanalysable, why: "too many commands to evaluate"}
	case e.count > maxShellCommands+1:
		return
	}
	if c.kind == cmdRun && c.cwd == "" {
		c.cwd = e.cwd
	}
	c.viaFind = c.viaFind || e.inFind
	e.cmds = append(e.cmds, c)
}

func (e *shellEval) unanalysable(why string, argv []shellWord, via []string, words []string) {
	net := false
	for _, w := range argv {
		if !w.dyn {
			words = append(words, w.s)
			continue
		}
		// The source of a dynamic word ($(curl ...): code from a download; $(echo rm):
		// the program it may name).
		for _, tok := range shellishWords(w.s) {
			net = net || netFetchers[path.Base(tok)]
			words = append(words, tok)
		}
	}
	e.add(shellCmd{kind: cmdUnanalysable, why: why, argv: argv, via: via, words: words, fromNet: net})
}

// parsers are reused: building one costs more than parsing a typical command.
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

func newParser() *syntax.Parser { return parsers.Get().(*syntax.Parser) }

// script parses s and evaluates every statement the shell would run before a syntax
// error; what follows an error is unanalysable (its words kept for the policy).
func (e *shellEval) script(s string, via []string, depth int) {
	if e.ended(true) {
		return
	}
	if depth > maxShellDepth || e.count > maxShellCommands || len(s) > maxShellInput {
		e.unanalysable("nested too deep or too long to evaluate", nil, via, shellishWords(s))
		return
	}
	stmts, err := parseStmts(s)
	for _, st := range stmts {
		e.stmt(st, via, nil, depth)
	}
	if err != nil {
		rest := s
		if len(stmts) > 0 {
			if off := int(stmts[len(stmts)-1].End().Offset()); off <= len(s) {
				rest = s[off:]
			}
		}
		// bash runs what it parsed before the error; the rest is read line by line as
		// words, and is also unanalysable as a whole.
		for _, line := range strings.Split(rest, "\n") {
			if words := shellishWords(line); len(words) > 0 {
				argv := make([]shellWord, len(words))
				for i, w := range words {
					argv[i] = shellWord{s: w}
				}
				e.add(shellCmd{kind: cmdRun, argv: argv, via: via})
			}
		}
		e.unanalysable("not valid shell", nil, via, nil)
	}
}

// parseStmts parses s statement by statement: the statements before a syntax error come
// with the error. The iterator is consumed to its end: Parser.Stmts, which stops at the
// error, makes mvdan.cc/sh v3.14.1 yield again after the loop ended and panic (found by
// FuzzShellEval: "cat <<EOF &0..."). A panic of the parser is an error here, never the
// proxy's.
func parseStmts(s string) (stmts []*syntax.Stmt, err error) {
	parser := newParser()
	defer func() {
		if r := recover(); r != nil {
			stmts, err = nil, fmt.Errorf("shell parser: %v", r)
			return // a parser that panicked is not reused
		}
		parsers.Put(parser)
	}()
	for st, e := range parser.StmtsSeq(strings.NewReader(s)) {
		if e != nil {
			if err == nil {
				err = e
			}
			continue
		}
		stmts = append(stmts, st)
	}
	return stmts, err
}

// shellishWords splits text that is not valid shell into words, quotes and separators
// dropped, so that a program name in it can still be recognised.
func shellishWords(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return strings.ContainsRune(" \t\n;&|()<>{}'\"`$\\", r)
	})
}

func (e *shellEval) stmts(list []*syntax.Stmt, via []string, depth int) {
	for _, st := range list {
		e.stmt(st, via, nil, depth)
	}
}

// stmt evaluates one statement; in is its standard input when it is a pipeline stage.
func (e *shellEval) stmt(st *syntax.Stmt, via []string, in *stdinFeed, depth int) {
	if st == nil || e.count > maxShellCommands || e.ended(false) {
		return
	}
	if e.steps++; e.steps == maxShellSteps {
		e.unanalysable("too large to evaluate", nil, via, nil)
	}
	if e.steps >= maxShellSteps {
		return
	}
	for _, r := range st.Redirs {
		e.nested(r.Word, via, depth)
		e.nested(r.Hdoc, via, depth)
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob:
			if w := e.word1(r.Word); w.s != "" || w.dyn {
				e.add(shellCmd{kind: cmdWrite, argv: []shellWord{{s: ">"}, w}, via: via})
			}
		case syntax.DplOut:
			if w := e.word1(r.Word); !w.dyn && w.s != "-" && strings.Trim(w.s, "0123456789") != "" {
				e.add(shellCmd{kind: cmdWrite, argv: []shellWord{{s: ">"}, w}, via: via})
			}
		case syntax.Hdoc, syntax.DashHdoc:
			in = e.docFeed(r.Hdoc)
		case syntax.WordHdoc:
			w := e.word1(r.Word)
			in = &stdinFeed{known: !w.dyn, text: w.s + "\n"}
		case syntax.RdrIn:
			w := e.word1(r.Word)
			in = &stdinFeed{progs: []string{"<" + w.s}}
		}
	}
	e.command(st.Cmd, via, in, depth)
}

func (e *shellEval) docFeed(w *syntax.Word) *stdinFeed {
	if w == nil {
		return &stdinFeed{known: true}
	}
	if e.dynamic(w) {
		return &stdinFeed{}
	}
	s, err := expand.Document(e.expandConfig(), w)
	if err != nil {
		return &stdinFeed{}
	}
	return &stdinFeed{known: true, text: s}
}

func (e *shellEval) command(cmd syntax.Command, via []string, in *stdinFeed, depth int) {
	switch x := cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		e.call(x, via, in, depth)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			e.pipeline(x, via, in, depth)
			return
		}
		e.stmt(x.X, via, in, depth)
		e.stmt(x.Y, via, in, depth)
	case *syntax.Subshell:
		saved := e.cwd
		e.stmts(x.Stmts, via, depth)
		e.cwd = saved
	case *syntax.Block:
		e.stmts(x.Stmts, via, depth)
	case *syntax.IfClause:
		for c := x; c != nil; c = c.Else {
			e.stmts(c.Cond, via, depth)
			e.stmts(c.Then, via, depth)
		}
	case *syntax.WhileClause:
		e.stmts(x.Cond, via, depth)
		e.stmts(x.Do, via, depth)
	case *syntax.ForClause:
		e.forClause(x, via, depth)
	case *syntax.CaseClause:
		e.nested(x.Word, via, depth)
		for _, it := range x.Items {
			e.stmts(it.Stmts, via, depth)
		}
	case *syntax.FuncDecl:
		name := ""
		if x.Name != nil {
			name = x.Name.Value
		}
		if e.funcs == nil {
			e.funcs = map[string]bool{}
		}
		e.funcs[name] = true
		if name != "" && forkBomb(name, x.Body) {
			e.add(shellCmd{kind: cmdForkBomb, argv: []shellWord{{s: name + "(){ " + name + "|" + name + "& }"}}, via: via})
		}
		e.stmt(x.Body, via, nil, depth)
	case *syntax.TimeClause:
		e.stmt(x.Stmt, append(clip(via), "time"), in, depth)
	case *syntax.CoprocClause:
		e.stmt(x.Stmt, via, in, depth)
	case *syntax.DeclClause:
		for _, a := range x.Args {
			e.assign(a, via, depth)
		}
	default:
		// [[ ]], (( )), let, ...: only substitutions inside them run commands.
		e.substitutions(cmd, via, depth)
	}
}

func clip(s []string) []string { return s[:len(s):len(s)] }

// forkBomb reports whether a function's body calls the function itself in the
// background or in a pipeline.
func forkBomb(name string, body *syntax.Stmt) bool {
	found := false
	syntax.Walk(body, func(n syntax.Node) bool {
		if found {
			return false
		}
		switch x := n.(type) {
		case *syntax.Stmt:
			if c, ok := x.Cmd.(*syntax.CallExpr); ok && x.Background && len(c.Args) > 0 && c.Args[0].Lit() == name {
				found = true
			}
		case *syntax.BinaryCmd:
			if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
				for _, s := range []*syntax.Stmt{x.X, x.Y} {
					if c, ok := s.Cmd.(*syntax.CallExpr); ok && len(c.Args) > 0 && c.Args[0].Lit() == name {
						found = true
					}
				}
			}
		}
		return !found
	})
	return found
}

func (e *shellEval) forClause(x *syntax.ForClause, via []string, depth int) {
	it, ok := x.Loop.(*syntax.WordIter)
	if !ok { // for ((...)): only substitutions in its header run commands
		syntax.Walk(x.Loop, func(n syntax.Node) bool {
			if s, ok := n.(*syntax.CmdSubst); ok {
				e.stmts(s.Stmts, via, depth)
				return false
			}
			return true
		})
		e.stmts(x.Do, via, depth)
		return
	}
	name := it.Name.Value
	items := e.words(it.Items, via, depth)
	if len(it.Items) == 0 || len(items) > maxLoopItems {
		e.setVar(name, shellWord{dyn: true})
		e.stmts(x.Do, via, depth)
		return
	}
	for _, w := range items {
		e.setVarOnly(name, w)
		e.stmts(x.Do, via, depth)
	}
}

func (e *shellEval) setVarOnly(name string, w shellWord) {
	if e.vars == nil {
		e.vars = map[string]string{}
	}
	if w.dyn {
		delete(e.vars, name)
		e.vars[name+"\x00dyn"] = ""
		return
	}
	delete(e.vars, name+"\x00dyn")
	e.vars[name] = w.s
}

// setVar records an assignment: a variable given two different values, or one not known
// statically, is unknown from then on.
func (e *shellEval) setVar(name string, w shellWord) {
	if e.multi == nil {
		e.multi = map[string][]string{}
	}
	prev, seen := e.vars[name]
	e.multi[name] = append(e.multi[name], w.s)
	if w.dyn || seen && prev != w.s || e.vars != nil && hasKey(e.vars, name+"\x00dyn") {
		e.setVarOnly(name, shellWord{dyn: true})
		return
	}
	e.setVarOnly(name, w)
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func (e *shellEval) assign(a *syntax.Assign, via []string, depth int) {
	if a == nil || a.Name == nil {
		return
	}
	e.nested(a.Value, via, depth)
	if a.Array != nil {
		syntax.Walk(a.Array, func(n syntax.Node) bool {
			if s, ok := n.(*syntax.CmdSubst); ok {
				e.stmts(s.Stmts, via, depth)
				return false
			}
			return true
		})
		// An array's elements are what "${a[@]}" may run: keep their words.
		if e.multi == nil {
			e.multi = map[string][]string{}
		}
		for _, el := range a.Array.Elems {
			if el.Value != nil {
				e.multi[a.Name.Value] = append(e.multi[a.Name.Value], e.word1(el.Value).s)
			}
		}
		e.setVar(a.Name.Value, shellWord{dyn: true})
		return
	}
	if a.Naked {
		return
	}
	w := e.word1(a.Value)
	if a.Append || a.Index != nil {
		w.dyn = true
	}
	e.setVar(a.Name.Value, w)
}

// pipeline evaluates the stages of a | b | c, feeding each stage what the previous one
// is statically known to write.
func (e *shellEval) pipeline(x *syntax.BinaryCmd, via []string, in *stdinFeed, depth int) {
	var stages []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) && len(s.Redirs) == 0 {
			flatten(b.X)
			flatten(b.Y)
			return
		}
		stages = append(stages, s)
	}
	flatten(x.X)
	flatten(x.Y)
	feed := in
	saved := e.cwd
	for _, st := range stages {
		e.stmt(st, via, feed, depth)
		feed = e.output(st, feed)
		e.cwd = saved // each stage runs in a subshell
	}
}

var netFetchers = map[string]bool{"curl": true, "wget": true, "fetch": true, "aria2c": true, "http": true, "https": true,
	"xh": true, "lwp-request": true, "GET": true, "nc": true, "ncat": true, "socat": true, "scp": true, "rsync": true, "ssh": true}

// output is what a pipeline stage writes, as far as it is known statically: echo and
// printf of known words, cat of a here-document, base64 -d of known text, find's paths.
func (e *shellEval) output(st *syntax.Stmt, in *stdinFeed) *stdinFeed {
	out := &stdinFeed{}
	if in != nil {
		out.progs = append(out.progs, in.progs...)
		out.net = in.net
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		syntax.Walk(st, func(n syntax.Node) bool {
			if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
				p := path.Base(c.Args[0].Lit())
				out.progs = append(out.progs, p)
				out.net = out.net || netFetchers[p]
			}
			return true
		})
		return out
	}
	argv := e.words(call.Args, nil, maxShellDepth+1)
	argv = stripWrappersForOutput(argv)
	if len(argv) == 0 || argv[0].dyn {
		out.progs = append(out.progs, "$…")
		return out
	}
	prog := path.Base(argv[0].s)
	out.progs = append(out.progs, prog)
	out.net = out.net || netFetchers[prog]
	args := argv[1:]
	for _, r := range st.Redirs {
		if r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc || r.Op == syntax.WordHdoc {
			in = e.stmtFeed(r)
		}
	}
	switch prog {
	case "echo", "printf":
		var parts []string
		for _, a := range args {
			if a.dyn {
				return out
			}
			parts = append(parts, a.s)
		}
		if prog == "echo" {
			for len(parts) > 0 && (parts[0] == "-n" || parts[0] == "-e" || parts[0] == "-E" || parts[0] == "-ne" || parts[0] == "-en") {
				parts = parts[1:]
			}
			out.known, out.text = true, strings.Join(parts, " ")+"\n"
			out.text = unescapeEcho(out.text)
		} else if len(parts) > 0 {
			s, _, err := expand.Format(e.expandConfig(), parts[0], parts[1:])
			if err != nil {
				return out
			}
			out.known, out.text = true, s
		}
	case "cat":
		if len(args) == 0 && in != nil && in.known {
			out.known, out.text = true, in.text
		}
	case "base64":
		decode := false
		for _, a := range args {
			if a.s == "-d" || a.s == "--decode" || a.s == "-D" || strings.HasPrefix(a.s, "--d") {
				decode = true
			}
		}
		if decode && in != nil && in.known {
			if b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(in.text), "")); err == nil {
				out.known, out.text = true, string(b)
			}
		}
	case "find":
		starts, _ := findStarts(args)
		for _, s := range starts {
			if s.dyn {
				return out
			}
			out.items = append(out.items, s.s)
		}
		if len(out.items) == 0 {
			out.items = []string{"."}
		}
		out.tree = true
	}
	return out
}

func (e *shellEval) stmtFeed(r *syntax.Redirect) *stdinFeed {
	if r.Op == syntax.WordHdoc {
		w := e.word1(r.Word)
		return &stdinFeed{known: !w.dyn, text: w.s + "\n"}
	}
	return e.docFeed(r.Hdoc)
}

func unescapeEcho(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`)
	return r.Replace(s)
}

// stripWrappersForOutput drops sudo/env-style wrappers in front of a producer.
func stripWrappersForOutput(argv []shellWord) []shellWord {
	for i := 0; i < 4 && len(argv) > 0 && !argv[0].dyn; i++ {
		spec, ok := wrapperSpecs[path.Base(argv[0].s)]
		if !ok || spec.script != 0 {
			return argv
		}
		rest, _, _ := spec.parse(argv[1:])
		argv = rest
	}
	return argv
}

// substitutions evaluates the command and process substitutions inside a node: the only
// commands that run from inside a word or a test expression.
func (e *shellEval) substitutions(node syntax.Node, via []string, depth int) {
	syntax.Walk(node, func(n syntax.Node) bool {
		switch s := n.(type) {
		case *syntax.CmdSubst:
			e.stmts(s.Stmts, via, depth)
			return false
		case *syntax.ProcSubst:
			e.stmts(s.Stmts, via, depth)
			return false
		}
		return true
	})
}

// nested evaluates the commands inside a word's command and process substitutions.
func (e *shellEval) nested(w *syntax.Word, via []string, depth int) {
	if w == nil {
		return
	}
	for _, p := range w.Parts {
		if _, ok := p.(*syntax.Lit); ok {
			continue
		}
		e.substitutions(p, via, depth)
	}
}

// dynamic reports whether a word's value depends on something not known statically: a
// variable without one known value (HOME and PWD are known as ~ and .), a command
// substitution, arithmetic, an indirect or modified parameter.
func (e *shellEval) dynamic(w *syntax.Word) bool {
	dyn := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if dyn {
			return false
		}
		switch x := n.(type) {
		case *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ExtGlob:
			dyn = true
		case *syntax.ProcSubst:
			return false
		case *syntax.ParamExp:
			if x.Param == nil || x.Excl || x.Length || x.Index != nil || x.Slice != nil || x.Repl != nil || x.Exp != nil || x.Names != 0 || x.NestedParam != nil || x.Width || x.Flags != nil || len(x.Modifiers) > 0 {
				dyn = true
				return false
			}
			if _, ok := e.vars[x.Param.Value]; ok {
				return false
			}
			if x.Param.Value != "HOME" && x.Param.Value != "PWD" {
				dyn = true
			}
			return false
		}
		return true
	})
	return dyn
}

func (e *shellEval) expandConfig() *expand.Config {
	return &expand.Config{ProcSubst: procSubstPath, Env: expand.FuncEnviron(func(name string) string {
		if v, ok := e.vars[name]; ok {
			return v
		}
		switch {
		case name == "HOME":
			return homeMark
		case name == "PWD":
			return "."
		case strings.HasPrefix(name, "HOME "):
			return homeMark + name[5:]
		}
		return ""
	})}
}

// words expands words into fields; a word that is not known statically is one dynamic
// field. Substitutions inside the words are evaluated as commands.
func (e *shellEval) words(ws []*syntax.Word, via []string, depth int) []shellWord {
	out := make([]shellWord, 0, len(ws))
	cfg := e.expandConfig()
	for _, w := range ws {
		if depth <= maxShellDepth {
			e.nested(w, via, depth)
		}
		if lit := w.Lit(); lit != "" && !strings.ContainsAny(lit, "\\~{") {
			out = append(out, shellWord{s: lit})
			continue
		}
		if ps := procSubstOf(w); ps != nil {
			path, _ := procSubstPath(ps)
			out = append(out, shellWord{s: path, feed: e.substFeed(ps.Stmts)})
			continue
		}
		if e.dynamic(w) || braceFields(w) > maxBraceFields {
			out = append(out, shellWord{s: wordSource(w), dyn: true, split: unquotedExpansion(w)})
			continue
		}
		fields, err := expand.Fields(cfg, w)
		if err != nil {
			out = append(out, shellWord{s: wordSource(w), dyn: true})
			continue
		}
		braces := false
		if strings.ContainsRune(w.Lit(), '~') || strings.Contains(wordSource(w), "~") {
			c := *w
			braces = syntax.SplitBraces(&c)
		}
		for _, f := range fields {
			if braces && strings.HasPrefix(f, "~") {
				// bash expands the tilde of each word brace expansion produced ({~,x}).
				f = homeMark + f[1:]
			}
			out = append(out, shellWord{s: f})
		}
	}
	return out
}

// unquotedExpansion reports whether a word has an expansion outside double quotes at its
// start, where field splitting can turn it into options.
func unquotedExpansion(w *syntax.Word) bool {
	if len(w.Parts) == 0 {
		return false
	}
	switch w.Parts[0].(type) {
	case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp:
		return true
	}
	return false
}

// braceFields bounds the number of words a brace expansion makes ({1..100000}, or
// {a,b}{a,b}... multiplying).
func braceFields(w *syntax.Word) int {
	if !strings.Contains(wordSource(w), "{") {
		return 1
	}
	c := *w
	if !syntax.SplitBraces(&c) {
		return 1
	}
	return braceCount(c.Parts)
}

// braceCount multiplies the sizes of the brace expansions among parts (syntax.Walk does not
// know the BraceExp nodes SplitBraces makes, so they are walked here).
func braceCount(parts []syntax.WordPart) int {
	n := 1
	for _, p := range parts {
		b, ok := p.(*syntax.BraceExp)
		if !ok {
			continue
		}
		k := 0
		if b.Sequence && len(b.Elems) >= 2 {
			k = 1 << 20
			from, err1 := strconv.Atoi(b.Elems[0].Lit())
			to, err2 := strconv.Atoi(b.Elems[1].Lit())
			l0, l1 := b.Elems[0].Lit(), b.Elems[1].Lit()
			switch {
			case err1 == nil && err2 == nil:
				k = to - from
			case len(l0) == 1 && len(l1) == 1:
				k = int(l1[0]) - int(l0[0])
			}
			if k < 0 {
				k = -k
			}
			k++
		} else {
			for _, el := range b.Elems {
				k += braceCount(el.Parts)
			}
		}
		if k > maxBraceFields || n*k > maxBraceFields {
			return maxBraceFields + 1
		}
		n *= k
	}
	return n
}

// procSubstPath is what a process substitution expands to, as bash names it on Linux; the
// commands inside are evaluated where the word is (nested). Without it, mvdan.cc/sh's
// expand panics on a process substitution that is part of a longer word ("<(cmd)x", found
// by FuzzShellEval).
func procSubstPath(*syntax.ProcSubst) (string, error) { return "/dev/fd/63", nil }

func procSubstOf(w *syntax.Word) *syntax.ProcSubst {
	if len(w.Parts) == 1 {
		if p, ok := w.Parts[0].(*syntax.ProcSubst); ok {
			return p
		}
	}
	return nil
}

// word1 is a single word's value (a redirection target, an assignment).
func (e *shellEval) word1(w *syntax.Word) shellWord {
	if w == nil {
		return shellWord{}
	}
	if e.dynamic(w) {
		return shellWord{s: wordSource(w), dyn: true}
	}
	s, err := expand.Literal(e.expandConfig(), w)
	if err != nil {
		return shellWord{s: wordSource(w), dyn: true}
	}
	return shellWord{s: s}
}

// wordSource is the static text inside a word (for the words of an unanalysable command).
func wordSource(w *syntax.Word) string {
	var b strings.Builder
	syntax.Walk(w, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Lit:
			b.WriteString(x.Value)
			b.WriteByte(' ')
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
			b.WriteByte(' ')
		case *syntax.ParamExp:
			if x.Param != nil {
				b.WriteString("$" + x.Param.Value + " ")
			}
		}
		return true
	})
	return strings.TrimSpace(b.String())
}

// call evaluates a simple command.
func (e *shellEval) call(x *syntax.CallExpr, via []string, in *stdinFeed, depth int) {
	if len(x.Args) == 0 {
		for _, a := range x.Assigns {
			e.assign(a, via, depth)
		}
		return
	}
	for _, a := range x.Assigns {
		e.nested(a.Value, via, depth)
	}
	argv := e.words(x.Args, via, depth)
	var dynWords []string
	if len(argv) > 0 && argv[0].dyn {
		dynWords = e.dynamicWords(x.Args[0])
	}
	e.runWords(argv, via, in, depth, dynWords)
}

// dynamicWords are the static words that may become the value of a dynamic word: the
// literals inside it and every value given to the variables it names.
func (e *shellEval) dynamicWords(w *syntax.Word) []string {
	var out []string
	syntax.Walk(w, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Lit:
			out = append(out, shellishWords(x.Value)...)
		case *syntax.SglQuoted:
			out = append(out, shellishWords(x.Value)...)
		case *syntax.ParamExp:
			if x.Param != nil {
				for _, v := range e.multi[x.Param.Value] {
					out = append(out, shellishWords(v)...)
				}
			}
		}
		return true
	})
	return out
}

func (e *shellEval) substFeed(stmts []*syntax.Stmt) *stdinFeed {
	if len(stmts) != 1 {
		return &stdinFeed{}
	}
	return e.output(stmts[0], nil)
}
