package policies

import (
	"path"
	"strings"
)

// Rules about effects, matched on the evaluated commands of the command model: what a
// command does (deletes a tree, writes a disk), not how it is spelled. Each effect is a
// named built-in rule ({"effect": "recursive-delete"}); the destructive list enables them
// with "targets": "protected", restricting path-bearing effects to the root, home and
// system directories and the whole working directory.

// tri is a rule's answer about one command: no, yes, or cannot tell (a word it depends on
// is not known statically).
type tri uint8

const (
	triNo tri = iota
	triYes
	triUnknown
)

type effect struct {
	// programs an unanalysable command may name to be relevant to the effect, and words in
	// inline code (python -c, perl -e) that do the same.
	programs []string
	hints    []string
	match    func(c *shellCmd, protected bool) tri
}

// effectNames lists the built-in effects in documentation order.
var effectNames = []string{"recursive-delete", "block-device-write", "mkfs", "permissions-root", "fork-bomb", "pipe-to-shell", "shutdown"}

var effects = map[string]*effect{
	"recursive-delete": {
		programs: []string{"rm", "rmdir", "find", "shred", "unlink", "git", "rsync", "srm", "wipe"},
		hints:    []string{"rm", "rmtree", "rmdir", "rmSync", "rmdirSync", "rm_rf", "rm_r", "remove_dir_all", "RemoveAll", "rimraf", "unlink", "unlinkSync", "shred", "deltree", "remove_tree", "rmrf"},
		match:    matchRecursiveDelete,
	},
	"block-device-write": {
		programs: []string{"dd", "tee", "cp", "cat", "shred", "blkdiscard", "wipefs", "pv"},
		hints:    []string{"/dev/sd", "/dev/nvme", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/mmcblk", "/dev/disk", "/dev/md", "/dev/dm-", "/dev/mapper", "/dev/loop"},
		match:    matchBlockDeviceWrite,
	},
	"mkfs": {
		programs: []string{"mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "wipefs", "newfs", "mkexfatfs"},
		match:    matchMkfs,
	},
	"permissions-root": {
		programs: []string{"chmod", "chown", "chgrp"},
		match:    matchPermissionsRoot,
	},
	"fork-bomb": {
		match: func(c *shellCmd, _ bool) tri {
			if c.kind == cmdForkBomb {
				return triYes
			}
			return triNo
		},
	},
	"pipe-to-shell": {
		programs: []string{"curl", "wget"},
		match: func(c *shellCmd, _ bool) tri {
			if c.kind == cmdUnanalysable && c.fromNet {
				return triYes
			}
			return triNo
		},
	},
	"shutdown": {
		programs: []string{"shutdown", "reboot", "halt", "poweroff", "init", "telinit", "systemctl"},
		match:    matchShutdown,
	},
}

// options is a parsed argument list: flags (short letters, long names expanded from
// unambiguous prefixes) and operands.
type options struct {
	short    string
	long     []string
	operands []shellWord
	dyn      bool // a word is not known statically
	dynOpt   bool // a word not known statically may be options ($FLAGS unquoted)
}

// parseOptions parses GNU-style arguments. argShort and argLong name the options that
// take an argument; known lists the program's long options (for prefixes), if known.
func parseOptions(args []shellWord, argShort string, argLong, known []string) options {
	var o options
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.dyn {
			o.dyn = true
			o.dynOpt = o.dynOpt || a.split
			o.operands = append(o.operands, a)
			continue
		}
		w := a.s
		switch {
		case w == "--":
			o.operands = append(o.operands, args[i+1:]...)
			for _, x := range args[i+1:] {
				o.dyn = o.dyn || x.dyn
			}
			return o
		case strings.HasPrefix(w, "--") && len(w) > 2:
			name, _, hasVal := strings.Cut(w[2:], "=")
			name = expandLong(name, known)
			o.long = append(o.long, name)
			if !hasVal && containsStr(argLong, name) {
				i++
			}
		case len(w) > 1 && w[0] == '-':
			for j := 1; j < len(w); j++ {
				o.short += string(w[j])
				if strings.IndexByte(argShort, w[j]) >= 0 {
					if j+1 == len(w) {
						i++
					}
					break
				}
			}
		default:
			o.operands = append(o.operands, a)
		}
	}
	return o
}

// expandLong returns the long option an abbreviation stands for when it is the unambiguous
// prefix of one of known (GNU getopt_long accepts those); else the name as given.
func expandLong(name string, known []string) string {
	found := ""
	for _, k := range known {
		if k == name {
			return k
		}
		if strings.HasPrefix(k, name) {
			if found != "" {
				return name // ambiguous: getopt refuses it
			}
			found = k
		}
	}
	if found != "" {
		return found
	}
	return name
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (o *options) has(short byte, long ...string) bool {
	if short != 0 && strings.IndexByte(o.short, short) >= 0 {
		return true
	}
	for _, l := range long {
		if containsStr(o.long, l) {
			return true
		}
	}
	return false
}

var rmLong = []string{"force", "interactive", "one-file-system", "no-preserve-root", "preserve-root", "recursive", "dir", "verbose", "help", "version"}

// targetsVerdict is the answer for a deleting command over its targets.
func targetsVerdict(targets []shellWord, cwd string, protected bool) tri {
	if len(targets) == 0 {
		return triNo
	}
	if !protected {
		return triYes
	}
	unknown := false
	for _, t := range targets {
		if t.dyn {
			unknown = true
			continue
		}
		if protectedPath(t.s, cwd) {
			return triYes
		}
	}
	if unknown {
		return triUnknown
	}
	return triNo
}

func matchRecursiveDelete(c *shellCmd, protected bool) tri {
	if c.kind != cmdRun {
		return triNo
	}
	args := c.args()
	switch prog := c.prog(); prog {
	case "rm", "srm", "wipe":
		o := parseOptions(args, "", nil, rmLong)
		if !c.viaFind && !o.has('r', "recursive") && !o.has('R') {
			if o.dynOpt {
				return triUnknown // an unquoted expansion could be -r
			}
			return triNo
		}
		return targetsVerdict(o.operands, c.cwd, protected)
	case "unlink":
		if c.viaFind {
			return targetsVerdict(args, c.cwd, protected)
		}
	case "rmdir":
		o := parseOptions(args, "", nil, []string{"ignore-fail-on-non-empty", "parents", "verbose", "help", "version"})
		if c.viaFind || o.has('p', "parents") {
			return targetsVerdict(o.operands, c.cwd, protected)
		}
		if o.dynOpt {
			return triUnknown
		}
	case "shred":
		o := parseOptions(args, "nsx", []string{"iterations", "size", "random-source"},
			[]string{"force", "iterations", "random-source", "size", "remove", "verbose", "exact", "zero", "help", "version"})
		return targetsVerdict(o.operands, c.cwd, protected)
	case "find":
		starts, expr := findStarts(args)
		del := false
		for _, w := range expr {
			if w.s == "-delete" {
				del = true
			}
			if w.dyn && w.split {
				return triUnknown
			}
		}
		if !del {
			return triNo
		}
		if len(starts) == 0 {
			starts = []shellWord{{s: "."}}
		}
		return targetsVerdict(findSelected(starts, expr), c.cwd, protected)
	case "git":
		return matchGitClean(args, c.cwd, protected)
	case "rsync":
		o := parseOptions(args, "efTB", []string{"rsh", "filter", "exclude", "include", "temp-dir", "block-size", "rsync-path", "backup-dir", "suffix", "log-file", "password-file", "port", "chmod", "chown", "compare-dest", "copy-dest", "link-dest", "files-from", "exclude-from", "include-from"}, nil)
		deletes := false
		for _, l := range o.long {
			if strings.HasPrefix(l, "del") || l == "remove-source-files" {
				deletes = true
			}
		}
		if !deletes || len(o.operands) < 2 {
			if o.dyn {
				return triUnknown
			}
			return triNo
		}
		return targetsVerdict(o.operands[len(o.operands)-1:], c.cwd, protected)
	}
	return triNo
}

// findSelected narrows find's starting points by its first -name/-iname pattern: find .
// -name '*.pyc' -delete deletes ./…/*.pyc, not the tree. A pattern matching every name
// ('*') narrows nothing.
func findSelected(starts, expr []shellWord) []shellWord {
	for i := 0; i+1 < len(expr); i++ {
		if (expr[i].s == "-name" || expr[i].s == "-iname") && !expr[i+1].dyn {
			pat := expr[i+1].s
			if strings.Trim(pat, "*?") == "" || strings.Trim(pat, "*?") == "." {
				return starts
			}
			out := make([]shellWord, len(starts))
			for k, s := range starts {
				out[k] = s
				if !s.dyn {
					out[k].s = strings.TrimSuffix(s.s, "/") + "/" + pat
				}
			}
			return out
		}
	}
	return starts
}

func matchGitClean(args []shellWord, cwd string, protected bool) tri {
	dir := shellWord{s: "."}
	if cwd != "" {
		dir.s = cwd
	}
	i := 0
	for i < len(args) {
		w := args[i]
		if w.dyn {
			return triUnknown
		}
		switch {
		case w.s == "-C":
			if i+1 < len(args) {
				d := args[i+1]
				if !d.dyn && !strings.HasPrefix(d.s, "/") && !strings.HasPrefix(d.s, homeMark) {
					d.s = dir.s + "/" + d.s
				}
				dir = d
			}
			i += 2
			continue
		case w.s == "-c" || w.s == "--git-dir" || w.s == "--work-tree" || w.s == "--namespace" || w.s == "--exec-path" || w.s == "--config-env":
			i += 2
			continue
		case strings.HasPrefix(w.s, "-"):
			i++
			continue
		}
		break
	}
	if i >= len(args) || args[i].s != "clean" {
		return triNo
	}
	o := parseOptions(args[i+1:], "eX", []string{"exclude"}, []string{"dry-run", "force", "interactive", "quiet", "exclude"})
	if o.has('n', "dry-run") || !o.has('f', "force") {
		if o.dyn {
			return triUnknown
		}
		return triNo
	}
	var targets []shellWord
	for _, p := range o.operands {
		if !p.dyn && !strings.HasPrefix(p.s, "/") {
			p.s = dir.s + "/" + p.s
		}
		targets = append(targets, p)
	}
	if len(targets) == 0 {
		targets = []shellWord{dir}
	}
	return targetsVerdict(targets, "", protected)
}

// protectedPath reports whether a deletion target (relative to cwd, "" = where the call
// runs) is the root, a system directory (anything directly under /, and directly under
// /usr, /var, /etc, /home, /Users, /boot, /System, /Library, /nix), a home directory, the
// working directory or one of its parents — or a glob over one of those.
func protectedPath(p, cwd string) bool {
	if p == "" {
		return false
	}
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, homeMark) && cwd != "" {
		p = cwd + "/" + p
	}
	if h, ok := strings.CutPrefix(p, homeMark); ok {
		user, rest, _ := strings.Cut(h, "/")
		p = "/home/~" + user + "/" + rest
	}
	if k := strings.IndexAny(p, "*?["); k >= 0 {
		dir := p[:strings.LastIndexByte(p[:k], '/')+1]
		seg := p[len(dir):]
		if cut := strings.IndexByte(seg, '/'); cut >= 0 {
			seg = seg[:cut]
		}
		cd := cleanTarget(dir)
		if cd == "/" || systemDir(cd) && !strings.HasPrefix(cd, "/home/") {
			return true
		}
		everything := strings.Trim(seg, "*?") == "" || strings.Trim(seg, "*?") == "."
		return everything && (cd == "/" || systemDir(cd) || cwdWide(cd))
	}
	c := cleanTarget(p)
	return c == "/" || systemDir(c) || cwdWide(c)
}

func cleanTarget(p string) string {
	if p == "" {
		return "."
	}
	return path.Clean(p)
}

// cwdWide: the working directory itself or a parent of it.
func cwdWide(c string) bool {
	return c == "." || strings.Trim(strings.ReplaceAll(c, "..", ""), "/") == ""
}

var systemParents = map[string]bool{"usr": true, "var": true, "etc": true, "home": true, "Users": true,
	"boot": true, "System": true, "Library": true, "nix": true, "lib": true, "opt": true, "srv": true}

func systemDir(c string) bool {
	if !strings.HasPrefix(c, "/") {
		return false
	}
	parts := strings.Split(c[1:], "/")
	switch len(parts) {
	case 1:
		return true
	case 2:
		if parts[0] == "var" && parts[1] == "tmp" {
			return false
		}
		if parts[0] == "home" || parts[0] == "Users" {
			return true
		}
		return systemParents[parts[0]]
	case 3:
		return parts[0] == "usr" && parts[1] == "local"
	}
	return false
}

func isBlockDevice(p string) bool {
	d, ok := strings.CutPrefix(path.Clean(p), "/dev/")
	if !ok {
		return false
	}
	for _, pre := range []string{"sd", "hd", "vd", "xvd"} {
		if rest, ok := strings.CutPrefix(d, pre); ok && rest != "" && rest[0] >= 'a' && rest[0] <= 'z' {
			return true
		}
	}
	for _, pre := range []string{"nvme", "mmcblk", "disk", "rdisk", "md", "dm-", "loop", "sr"} {
		if rest, ok := strings.CutPrefix(d, pre); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			return true
		}
	}
	return strings.HasPrefix(d, "mapper/") || strings.HasPrefix(d, "disk/")
}

func matchBlockDeviceWrite(c *shellCmd, _ bool) tri {
	switch c.kind {
	case cmdWrite:
		if !c.argv[1].dyn && isBlockDevice(c.argv[1].s) {
			return triYes
		}
		return triNo
	case cmdRun:
	default:
		return triNo
	}
	args := c.args()
	switch c.prog() {
	case "dd":
		for _, a := range args {
			if a.dyn {
				return triUnknown
			}
			if of, ok := strings.CutPrefix(a.s, "of="); ok && isBlockDevice(of) {
				return triYes
			}
		}
	case "tee", "cp", "install", "mv", "shred", "pv", "blkdiscard", "cat", "ddrescue", "badblocks":
		for _, a := range args {
			if !a.dyn && isBlockDevice(a.s) {
				if c.prog() == "cat" || c.prog() == "pv" {
					continue // reading a disk is not writing it
				}
				if c.prog() == "badblocks" && !strings.Contains(joinWords(args), "-w") {
					continue
				}
				return triYes
			}
		}
	}
	return triNo
}

func joinWords(ws []shellWord) string {
	s, _ := joinStatic(ws)
	return s
}

func matchMkfs(c *shellCmd, _ bool) tri {
	if c.kind != cmdRun {
		return triNo
	}
	switch p := c.prog(); {
	case p == "mkfs" || strings.HasPrefix(p, "mkfs.") || p == "mke2fs" || p == "wipefs" || p == "mkdosfs" || p == "mkntfs" || p == "mkexfatfs" || strings.HasPrefix(p, "newfs"):
		return triYes
	case p == "mkswap":
		for _, a := range c.args() {
			if !a.dyn && isBlockDevice(a.s) {
				return triYes
			}
		}
	}
	return triNo
}

// matchPermissionsRoot: chmod/chown/chgrp -R on the root, a system or a home directory,
// and chmod making / itself world-writable.
func matchPermissionsRoot(c *shellCmd, _ bool) tri {
	if c.kind != cmdRun {
		return triNo
	}
	prog := c.prog()
	if prog != "chmod" && prog != "chown" && prog != "chgrp" {
		return triNo
	}
	o := parseOptions(c.args(), "", []string{"reference", "from"}, []string{"changes", "quiet", "silent", "verbose", "no-preserve-root", "preserve-root", "reference", "recursive", "dereference", "no-dereference", "from", "help", "version"})
	recursive := o.has('R', "recursive")
	ops := o.operands
	if len(ops) < 2 {
		if o.dyn {
			return triUnknown
		}
		return triNo
	}
	mode, targets := ops[0], ops[1:]
	unknown := o.dyn
	for _, t := range targets {
		if t.dyn {
			unknown = true
			continue
		}
		cl := cleanTarget(t.s)
		if h, ok := strings.CutPrefix(t.s, homeMark); ok {
			cl = cleanTarget("/home/~" + h)
		}
		root := cl == "/" || t.s == "/*"
		if recursive && (root || systemDir(cl) || strings.HasPrefix(cl, "/home/~") && !strings.Contains(cl[6:], "/") || strings.HasPrefix(t.s, "/") && strings.HasSuffix(t.s, "/*") && systemDir(cleanTarget(strings.TrimSuffix(t.s, "/*")))) {
			return triYes
		}
		if prog == "chmod" && root && !mode.dyn && worldWritable(mode.s) {
			return triYes
		}
	}
	if unknown && (recursive || prog == "chmod") {
		return triUnknown
	}
	return triNo
}

func worldWritable(mode string) bool {
	if len(mode) >= 3 && strings.Trim(mode, "01234567") == "" {
		last := mode[len(mode)-1]
		return last == '7' || last == '6' || last == '3' || last == '2'
	}
	return strings.Contains(mode, "o+w") || strings.Contains(mode, "a+w") || strings.Contains(mode, "+rwx") && (strings.HasPrefix(mode, "a") || strings.HasPrefix(mode, "+") || strings.Contains(mode, "o")) || strings.Contains(mode, "a=rwx") || strings.Contains(mode, "o=rwx")
}

func matchShutdown(c *shellCmd, _ bool) tri {
	if c.kind != cmdRun {
		return triNo
	}
	args := c.args()
	switch c.prog() {
	case "shutdown", "reboot", "halt", "poweroff":
		return triYes
	case "init", "telinit":
		if len(args) > 0 && (args[0].s == "0" || args[0].s == "6") {
			return triYes
		}
	case "systemctl":
		for _, a := range args {
			switch a.s {
			case "reboot", "poweroff", "halt", "kexec", "soft-reboot":
				return triYes
			}
		}
	}
	return triNo
}
