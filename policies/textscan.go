package policies

// Shared text-scanning machinery. Every detector is driven by literal anchors: one pass
// over the text looks up each byte in a 256-entry table, and only where an anchor's first
// byte occurs (normally at the start of a word) is the literal compared and, on a hit, a
// precompiled RE2 expression run over a short window. Running a dozen regular expressions
// over a 32 KiB prompt would cost milliseconds; the anchor pass costs about a nanosecond a
// byte, so text without any candidate pays almost nothing.

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Finding is one detected span of a text: text[Start:End] is the sensitive value.
type Finding struct {
	Start, End int
	Kind       string
	// priority breaks ties between overlapping findings: a specific format (an AWS key id)
	// beats a contextual one (a bearer header) that covers the same bytes.
	priority int
}

// matchFunc examines text at position at, where an anchor literal was found. It appends
// its findings to dst and returns the position where scanning resumes (> at), or 0 when
// nothing was found there. Contextual matchers (a name followed by a value) resume right
// after the name so that the value is still offered to the format matchers.
type matchFunc func(dst []Finding, text string, at int) ([]Finding, int)

type anchor struct {
	lit   string // compared at the candidate position; lower case when fold
	fold  bool   // ASCII case-insensitive comparison
	inner bool   // may match inside a word (no boundary required before it)
	camel bool   // may also start at a lower→upper transition (apiKey, accessToken)
	caps  bool   // may also start inside an upper-case word (PGPASSWORD)
	match matchFunc
	// need, when set, is an ASCII string (compared case-insensitively) that every match
	// contains within needWindow bytes of the anchor: windows without it are not handed
	// to match, and cost only needWindow.
	need string
	// cost is the work a match call may do, in bytes of the anchor pass (work.go): the
	// window it reads, times regexWeight for each regular-expression pass over it. Zero
	// means defaultMatchCost.
	cost int
}

// anchorSet dispatches candidate positions to anchors by first byte. Two filters keep the
// per-byte cost low: second[c] holds the bytes that may follow first byte c in some
// anchor (so the common letters that start no anchor-word are dropped after two table
// lookups), and wordOnly[c] says that every anchor of c needs a word boundary.
type anchorSet struct {
	anchors  []anchor
	isFirst  [256]bool // compact copy of len(first[c]) > 0 for the hot loop
	first    [256][]uint16
	second   [256][4]uint64
	wordOnly [256]bool
}

func (s *anchorSet) add(a anchor) {
	if a.cost == 0 {
		a.cost = defaultMatchCost
	}
	idx := uint16(len(s.anchors))
	s.anchors = append(s.anchors, a)
	firsts := []byte{a.lit[0]}
	if a.fold {
		if u := upperASCII(a.lit[0]); u != a.lit[0] {
			firsts = append(firsts, u)
		}
	}
	for _, c := range firsts {
		if len(s.first[c]) == 0 {
			s.wordOnly[c] = true
		}
		s.first[c] = append(s.first[c], idx)
		s.isFirst[c] = true
		if a.inner || a.camel || a.caps {
			s.wordOnly[c] = false
		}
		if len(a.lit) < 2 {
			s.second[c] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
			continue
		}
		c2 := a.lit[1]
		s.second[c][c2>>6] |= 1 << (c2 & 63)
		if a.fold {
			u := upperASCII(c2)
			s.second[c][u>>6] |= 1 << (u & 63)
		}
	}
}

// needWindow is how far from its anchor an anchor's need is looked for.
const needWindow = 64

// candidateCost is what trying one anchor at a candidate position costs the work meter
// (the boundary tests and the literal comparison), matched or not.
const candidateCost = 8

// scan runs every anchor over text and appends the findings to dst. It charges m for the
// pass and for every match call's cost, checking m every meterStep units; when m stops
// the call, scan returns what it found so far and the caller must not take it for a
// complete result (m.stopped).
func (s *anchorSet) scan(m *meter, dst []Finding, text string) []Finding {
	n := len(text)
	// work is what was done since the last charge: the pass from mark to i, plus the
	// match calls' costs in matched. One comparison per candidate position, outside next.
	mark, matched := 0, 0
	for i := 0; i < n; i++ {
		if i = s.next(text, i); i >= n {
			break
		}
		if i-mark+matched >= meterStep {
			if !m.charge(i - mark + matched) {
				return dst
			}
			mark, matched = i, 0
		}
		c := text[i]
		cands := s.first[c]
		matched += candidateCost * len(cands)
		boundary := wordBoundaryBefore(text, i)
		for _, k := range cands {
			a := &s.anchors[k]
			if !boundary && !a.inner &&
				!(a.camel && isUpperASCII(c) && isLowerASCII(text[i-1])) &&
				!(a.caps && isUpperASCII(c) && isUpperASCII(text[i-1])) {
				continue
			}
			if !hasLiteral(text[i:], a.lit, a.fold) {
				continue
			}
			if a.need != "" && !containsFold(window(text, i, needWindow), a.need) {
				matched += needWindow
				continue
			}
			var next int
			matched += a.cost
			dst, next = a.match(dst, text, i)
			if next > i {
				i = next - 1
				break
			}
		}
	}
	m.charge(n - mark + matched)
	return dst
}

// next returns the first candidate position in text from i on (len(text) when there is
// none): a byte that starts an anchor, followed by a byte that may come second in one, at a
// word boundary unless one of its anchors may start inside a word. A quarter to a third of
// the bytes of agent text start some anchor (common letters, digits), so all three tests
// stay inside this loop rather than costing a trip through scan's candidate code for each.
//
// This byte loop is the largest part of a clean scan, and its speed hangs on where the linker
// puts it: measured on the policy benchmarks, the same machine code ran 10-27% slower when
// an unrelated change moved it 32 bytes and its 28 bytes then straddled a 64-byte line.
// next is its own function so that the loop's offset in it does not move when
// scan changes: it sits at bytes 9-37, inside one line when next starts on a 64-byte
// boundary (as when this was measured, and always with -ldflags=-funcalign=64) and across two
// when next starts 32 bytes past one. Go cannot align one function, so a benchmark gate on
// the scanning policies should compare builds with the same placement. The indexes are
// unsigned and bounded by len(text), so the loop has no bounds check.
//
//go:noinline
func (s *anchorSet) next(text string, i int) int {
	isFirst := &s.isFirst
	for j := uint(i); j < uint(len(text)); j++ {
		c := text[j]
		if !isFirst[c] {
			continue
		}
		if j+1 < uint(len(text)) {
			if c2 := text[j+1]; s.second[c][c2>>6]&(1<<(c2&63)) == 0 {
				continue
			}
		}
		if s.wordOnly[c] && !wordBoundaryBefore(text, int(j)) {
			continue
		}
		return int(j)
	}
	return len(text)
}

// wordBoundaryBefore reports whether position i starts a word: the previous byte is not an
// ASCII letter or digit, or it is the letter of a JSON/C escape (\n, \t, \r), which is how
// a line break looks inside serialized text such as a tool_call part.
func wordBoundaryBefore(text string, i int) bool {
	if i == 0 || !isAlnumASCII(text[i-1]) {
		return true
	}
	if i >= 2 && text[i-2] == '\\' {
		switch text[i-1] {
		case 'n', 't', 'r':
			return true
		}
	}
	return false
}

func hasLiteral(s, lit string, fold bool) bool {
	if len(s) < len(lit) {
		return false
	}
	if !fold {
		return s[:len(lit)] == lit
	}
	for j := 0; j < len(lit); j++ {
		if lowerASCII(s[j]) != lit[j] {
			return false
		}
	}
	return true
}

func isAlnumASCII(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isDigitASCII(c byte) bool { return c >= '0' && c <= '9' }
func isUpperASCII(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLowerASCII(c byte) bool { return c >= 'a' && c <= 'z' }
func isLetterASCII(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upperASCII(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// window returns text[at:at+n], clipped to the text.
func window(text string, at, n int) string {
	end := at + n
	if end > len(text) || end < 0 {
		end = len(text)
	}
	return text[at:end]
}

// shannonEntropy is the Shannon entropy of s in bits per byte.
func shannonEntropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c == 0 {
			continue
		}
		p := float64(c) / n
		h -= p * math.Log2(p)
	}
	return h
}

// finishScan is the last step of every scanner's scan: the findings appended to dst from
// start on, less those of disabled kinds and allow-listed values, without overlaps.
func finishScan(dst []Finding, start int, text string, kinds kindSet, allow allowList) []Finding {
	fs := dst[start:]
	fs = kinds.filter(fs)
	fs = allow.filter(text, fs)
	fs = resolveOverlaps(fs)
	return dst[:start+len(fs)]
}

// resolveOverlaps sorts findings by position and removes overlaps, keeping the finding of
// higher priority (then the longer one, then the earlier one).
func resolveOverlaps(fs []Finding) []Finding {
	if len(fs) < 2 {
		return fs
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return (b.End - b.Start) - (a.End - a.Start)
	})
	out := fs[:1]
	for _, f := range fs[1:] {
		last := &out[len(out)-1]
		if f.Start >= last.End {
			out = append(out, f)
			continue
		}
		// Sorted by start, so f cannot overlap anything kept before last.
		if f.priority > last.priority || (f.priority == last.priority && f.End-f.Start > last.End-last.Start) {
			*last = f
		}
	}
	return out
}

// placeholder is the redaction marker of a value: "[REDACTED:<kind>:<8 hex>]", where the
// hex digits are the start of sha256(value), so that audit records of the same secret
// still correlate without revealing it.
func placeholder(kind, value string) string {
	sum := sha256.Sum256([]byte(value))
	return "[REDACTED:" + kind + ":" + hex.EncodeToString(sum[:4]) + "]"
}

// applyFindings rebuilds text with every finding replaced by repl(finding, value).
// findings must be sorted and non-overlapping.
func applyFindings(text string, fs []Finding, repl func(f Finding, value string) string) string {
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, f := range fs {
		b.WriteString(text[last:f.Start])
		b.WriteString(repl(f, text[f.Start:f.End]))
		last = f.End
	}
	b.WriteString(text[last:])
	return b.String()
}

// redactPlaceholder is the replacement used by the secrets and pii policies.
func redactPlaceholder(f Finding, value string) string { return placeholder(f.Kind, value) }

// allowList exempts detected values matching any of a set of user regexes.
type allowList []*regexp.Regexp

func compileAllow(patterns []string, path string) (allowList, error) {
	out := make(allowList, 0, len(patterns))
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, configErrorf("%s[%d]: invalid regular expression: %v", path, i, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// filter drops the findings whose value matches an allow pattern (in place).
func (a allowList) filter(text string, fs []Finding) []Finding {
	if len(a) == 0 {
		return fs
	}
	out := fs[:0]
	for _, f := range fs {
		v := text[f.Start:f.End]
		allowed := false
		for _, re := range a {
			if re.MatchString(v) {
				allowed = true
				break
			}
		}
		if !allowed {
			out = append(out, f)
		}
	}
	return out
}

// kindSet is an enabled-kinds filter; nil enables everything.
type kindSet map[string]bool

func newKindSet(kinds []string, known []string, path string) (kindSet, error) {
	if kinds == nil {
		return nil, nil
	}
	set := make(kindSet, len(kinds))
	for i, k := range kinds {
		if !slices.Contains(known, k) {
			return nil, configErrorf("%s[%d]: unknown kind %q (known: %s)", path, i, k, strings.Join(known, ", "))
		}
		set[k] = true
	}
	return set, nil
}

func (s kindSet) enabled(kind string) bool { return s == nil || s[kind] }

// filter drops the findings of disabled kinds (in place).
func (s kindSet) filter(fs []Finding) []Finding {
	if s == nil {
		return fs
	}
	out := fs[:0]
	for _, f := range fs {
		if s[f.Kind] {
			out = append(out, f)
		}
	}
	return out
}
