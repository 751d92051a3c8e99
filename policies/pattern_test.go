package policies

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// The prefilter and line-by-line evaluation must never change a result.
func TestPatternAgreesWithRegexp(t *testing.T) {
	exprs := []string{
		`rm -rf`, `(?i)drop\s+table`, `^sudo\b`, `(?m:^)sudo\b`, `foo|bar`, `a+b`, `x*`,
		`(?i)kelvin`, `(?s)begin.*end`, `\bgit push\b`, `(?i)ſecret`, `[a-z]+@[a-z]+\.com$`,
	}
	for _, r := range DefaultDestructive() {
		exprs = append(exprs, r.Pattern)
	}
	words := []string{"rm", "-rf", "/", "~", "*", "sudo", "git", "push", "--force", "origin", "main", "DROP", "drop",
		"TABLE", "table", "\n", "\n", " ", " ", "\t", ";", "&&", "|", "sh", "curl", "x", "foo", "bar", "begin", "end",
		"dd", "of=/dev/sda", ">", "chmod", "777", "mkfs", "reboot", "(", ")", "{", "}", ":", "&", "a", "b",
		"KELVIN", "\u212aelvin", "secret", "SECRET", "bash", "-c", "'", "\"", "psql", "-e", "$HOME", "@", ".com"}
	rng := rand.New(rand.NewSource(1))
	for _, expr := range exprs {
		p, err := compilePattern(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		re := regexp.MustCompile(expr)
		for i := 0; i < 3000; i++ {
			var b strings.Builder
			for n := rng.Intn(24); n > 0; n-- {
				b.WriteString(words[rng.Intn(len(words))])
				if rng.Intn(3) == 0 {
					b.WriteByte(' ')
				}
			}
			s := b.String()
			if got, want := p.match(s), re.MatchString(s); got != want {
				t.Fatalf("pattern %q on %q: fast path %v, regexp %v (lits %v, more %v, lineOnly %v)", expr, s, got, want, p.lits, p.more, p.lineOnly)
			}
		}
	}
}

func TestDestructiveRulesUseFastPath(t *testing.T) {
	for _, r := range DefaultDestructive() {
		if r.Pattern == "" {
			continue // an effect rule: matched on evaluated commands, not text
		}
		p, err := compilePattern(r.Pattern)
		if err != nil {
			t.Fatal(err)
		}
		if p.lits == nil {
			t.Errorf("%s: no required literals", r.Name)
		}
		if !p.lineOnly && r.Name != "sql_drop" {
			t.Errorf("%s: not line-local", r.Name)
		}
		var lits []string
		for _, l := range p.lits {
			lits = append(lits, l.s)
		}
		t.Logf("%-20s lineOnly=%-5v requires one of %q and %d more sets", r.Name, p.lineOnly, lits, len(p.more))
	}
}
