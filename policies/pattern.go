package policies

// Fast evaluation of configured RE2 patterns. Go's regexp has no lazy DFA: an unanchored
// search with a complex pattern runs the NFA at every position, tens of nanoseconds a
// byte, so nine command patterns over a 4 KiB file write would take milliseconds. Two
// facts read once from the pattern's syntax tree make that cheap without changing any
// result:
//
//   - required literals: sets of strings such that every match contains one string of
//     each set. A string missing a set cannot match and is skipped after a few
//     memchr-speed searches.
//   - line-local: the pattern cannot consume '\n' and uses no \A/\z-style text anchors
//     (^ and $ in multi-line mode are fine). Every match then lies inside one line, so
//     only the lines that hold a required literal are handed to the regexp.

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// pattern is a compiled configured expression.
type pattern struct {
	re *regexp.Regexp
	// lits is the most selective requirement (used to find candidate lines); more holds
	// further requirements that must all be met too (checked before running re).
	lits     []literal // nil: no usable requirement, always run re
	more     [][]literal
	lineOnly bool
}

type literal struct {
	s    string
	fold bool // case-insensitive; s is lower-case ASCII
}

func compilePattern(expr string) (*pattern, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	p := &pattern{re: re}
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return p, nil // compiled above, so this does not happen; no prefilter then
	}
	tree = tree.Simplify()
	sets := requirements(tree)
	best := -1
	for i, set := range sets {
		set = slices.Compact(set)
		slices.SortFunc(set, func(a, b literal) int { return strings.Compare(a.s, b.s) })
		set = slices.Compact(set)
		sets[i] = set
		if len(set) > 16 {
			continue
		}
		if best < 0 || shortest(set) > shortest(sets[best]) {
			best = i
		}
	}
	if best >= 0 {
		p.lits = sets[best]
		for i, set := range sets {
			if i != best && len(set) <= 16 {
				p.more = append(p.more, set)
			}
		}
	}
	p.lineOnly = p.lits != nil && lineLocal(tree)
	return p, nil
}

// requirements returns sets of literals such that every match of re contains at least
// one literal of each set. nil means nothing is known.
func requirements(re *syntax.Regexp) [][]literal {
	switch re.Op {
	case syntax.OpLiteral:
		fold := re.Flags&syntax.FoldCase != 0
		s := string(re.Rune)
		if fold {
			// Unicode folding maps k and s to non-ASCII runes (K, ſ); only plain ASCII
			// letters without such partners are folded here.
			for _, r := range re.Rune {
				if r >= utf8.RuneSelf || r == 'k' || r == 'K' || r == 's' || r == 'S' {
					return nil
				}
			}
			s = strings.ToLower(s)
		}
		return [][]literal{{{s: s, fold: fold}}}
	case syntax.OpCapture, syntax.OpPlus:
		return requirements(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requirements(re.Sub[0])
		}
	case syntax.OpConcat:
		// Every part must match, so every part's requirements hold.
		var out [][]literal
		for _, sub := range re.Sub {
			out = append(out, requirements(sub)...)
		}
		return out
	case syntax.OpAlternate:
		// A match goes through one branch: one literal from each branch's most selective
		// set; every branch needs one.
		var set []literal
		for _, sub := range re.Sub {
			sets := requirements(sub)
			if len(sets) == 0 {
				return nil
			}
			b := sets[0]
			for _, s := range sets[1:] {
				if shortest(s) > shortest(b) {
					b = s
				}
			}
			set = append(set, b...)
		}
		return [][]literal{set}
	}
	return nil
}

func shortest(lits []literal) int {
	m := -1
	for _, l := range lits {
		if m < 0 || len(l.s) < m {
			m = len(l.s)
		}
	}
	return m
}

// lineLocal reports whether no match of re can contain '\n' or depend on the start or
// end of the whole text.
func lineLocal(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpAnyChar:
		return false
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return false
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return false
			}
		}
	}
	for _, sub := range re.Sub {
		if !lineLocal(sub) {
			return false
		}
	}
	return true
}

// match reports whether the pattern matches s.
func (p *pattern) match(s string) bool {
	if p.lits == nil {
		return p.re.MatchString(s)
	}
	if !p.lineOnly {
		return p.meets(s) && p.re.MatchString(s)
	}
	// Visit each line that holds a required literal once, in order.
	var next [16]int
	for i, l := range p.lits {
		next[i] = l.index(s)
	}
	pos := 0
	for {
		at := -1
		for i, l := range p.lits {
			if next[i] >= 0 && next[i] < pos {
				if k := l.index(s[pos:]); k >= 0 {
					next[i] = pos + k
				} else {
					next[i] = -1
				}
			}
			if next[i] >= 0 && (at < 0 || next[i] < at) {
				at = next[i]
			}
		}
		if at < 0 {
			return false
		}
		start := strings.LastIndexByte(s[:at], '\n') + 1
		end := len(s)
		if k := strings.IndexByte(s[at:], '\n'); k >= 0 {
			end = at + k
		}
		if line := s[start:end]; p.meets(line) && p.re.MatchString(line) {
			return true
		}
		pos = end + 1
		if pos >= len(s) {
			return false
		}
	}
}

// meets reports whether s holds a literal of every requirement set.
func (p *pattern) meets(s string) bool {
	if !anyLiteral(s, p.lits) {
		return false
	}
	for _, set := range p.more {
		if !anyLiteral(s, set) {
			return false
		}
	}
	return true
}

func anyLiteral(s string, set []literal) bool {
	for _, l := range set {
		if l.index(s) >= 0 {
			return true
		}
	}
	return false
}

// index finds the literal in s (ASCII case-insensitively when fold).
func (l literal) index(s string) int {
	if !l.fold {
		return strings.Index(s, l.s)
	}
	if l.s == "" {
		return 0
	}
	first, upper := l.s[0], upperASCII(l.s[0])
	for i := 0; i+len(l.s) <= len(s); {
		k := indexEitherByte(s[i:len(s)-len(l.s)+1], first, upper)
		if k < 0 {
			return -1
		}
		i += k
		if hasLiteral(s[i:], l.s, true) {
			return i
		}
		i++
	}
	return -1
}

func indexEitherByte(s string, a, b byte) int {
	i := strings.IndexByte(s, a)
	if a == b {
		return i
	}
	j := strings.IndexByte(s, b)
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	case i < j:
		return i
	}
	return j
}
