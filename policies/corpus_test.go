package policies

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The precision corpus: testdata/corpus/<detector>/{positive,negative}.txt.
//
// Format, one case per line; blank lines and lines starting with '#' are ignored:
//
//	positive.txt:  <kind>[,<kind>...] TAB <text>
//	negative.txt:  <text>
//
// In <text>, ⟦ and ⟧ mark the exact span(s) a detector must report (optional), and the
// escapes \n, \t, \\ and \u{XXXX} stand for a line break, a tab, a backslash and any
// code point. For the destructive corpus the kind is the rule name, and a text starting
// with '{' is the tool input itself; other texts are wrapped as {"command": text}.
//
// Every positive must be reported with exactly the listed kinds (and spans, when marked);
// no negative may be reported at all.

const (
	markOpen  = "⟦"
	markClose = "⟧"
)

type corpusCase struct {
	file  string
	line  int
	kinds []string
	text  string
	spans [][2]int
}

func (c corpusCase) String() string { return fmt.Sprintf("%s:%d", c.file, c.line) }

func readCorpus(t *testing.T, detector, name string, positive bool) []corpusCase {
	t.Helper()
	file := filepath.Join("testdata", "corpus", detector, name)
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("corpus: %v", err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := corpusCase{file: file, line: n}
		if positive {
			kinds, text, ok := strings.Cut(line, "\t")
			if !ok {
				t.Fatalf("%s:%d: positive case needs <kind> TAB <text>", file, n)
			}
			c.kinds = strings.Split(kinds, ",")
			line = text
		}
		text, spans, err := decodeCorpusText(line)
		if err != nil {
			t.Fatalf("%s:%d: %v", file, n, err)
		}
		c.text, c.spans = text, spans
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no cases", file)
	}
	return out
}

// decodeCorpusText resolves escapes and span markers.
func decodeCorpusText(s string) (string, [][2]int, error) {
	var b strings.Builder
	var spans [][2]int
	open := -1
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], markOpen):
			if open >= 0 {
				return "", nil, fmt.Errorf("nested %s", markOpen)
			}
			open = b.Len()
			i += len(markOpen)
		case strings.HasPrefix(s[i:], markClose):
			if open < 0 {
				return "", nil, fmt.Errorf("%s without %s", markClose, markOpen)
			}
			spans = append(spans, [2]int{open, b.Len()})
			open = -1
			i += len(markClose)
		case s[i] == '\\' && i+1 < len(s):
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i += 2
			case 't':
				b.WriteByte('\t')
				i += 2
			case '\\':
				b.WriteByte('\\')
				i += 2
			case 'u':
				end := strings.IndexByte(s[i:], '}')
				if !strings.HasPrefix(s[i+2:], "{") || end < 0 {
					return "", nil, fmt.Errorf("bad \\u{...} escape at %d", i)
				}
				v, err := strconv.ParseUint(s[i+3:i+end], 16, 32)
				if err != nil {
					return "", nil, fmt.Errorf("bad \\u{...} escape at %d: %v", i, err)
				}
				b.WriteRune(rune(v))
				i += end + 1
			default:
				b.WriteByte('\\')
				i++
			}
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	if open >= 0 {
		return "", nil, fmt.Errorf("unclosed %s", markOpen)
	}
	return b.String(), spans, nil
}

func mustSecrets(t testing.TB) *Secrets {
	p, err := NewSecrets(SecretsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPII(t testing.TB) *PII {
	p, err := NewPII(PIIConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustInjection(t testing.TB) *Injection {
	p, err := NewInjection(InjectionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCorpusTextDetectors(t *testing.T) {
	detectors := []struct {
		name string
		det  detector
	}{
		{"secrets", mustSecrets(t).scan},
		{"pii", mustPII(t).scan},
		{"injection", mustInjection(t).scan},
	}
	for _, d := range detectors {
		t.Run(d.name, func(t *testing.T) {
			pos := readCorpus(t, d.name, "positive.txt", true)
			neg := readCorpus(t, d.name, "negative.txt", false)
			caught, clean := 0, 0
			for _, c := range pos {
				fs := d.det.scanText(nil, c.text)
				if msg := checkPositive(c, fs); msg != "" {
					t.Errorf("%s: %s\n\ttext: %q\n\tgot:  %s", c, msg, c.text, describeFindings(c.text, fs))
					continue
				}
				caught++
			}
			for _, c := range neg {
				fs := d.det.scanText(nil, c.text)
				if len(fs) > 0 {
					t.Errorf("%s: false positive\n\ttext: %q\n\tgot:  %s", c, c.text, describeFindings(c.text, fs))
					continue
				}
				clean++
			}
			t.Logf("corpus %s: %d/%d positives caught, %d/%d negatives clean", d.name, caught, len(pos), clean, len(neg))
		})
	}
}

func checkPositive(c corpusCase, fs []Finding) string {
	if len(fs) == 0 {
		return "not detected"
	}
	var got []string
	for _, f := range fs {
		if !slices.Contains(c.kinds, f.Kind) {
			return fmt.Sprintf("unexpected kind %s (want %s)", f.Kind, strings.Join(c.kinds, ","))
		}
		if !slices.Contains(got, f.Kind) {
			got = append(got, f.Kind)
		}
	}
	for _, k := range c.kinds {
		if !slices.Contains(got, k) {
			return "kind " + k + " not detected"
		}
	}
	if len(c.spans) > 0 {
		if len(fs) != len(c.spans) {
			return fmt.Sprintf("%d findings, want %d marked spans", len(fs), len(c.spans))
		}
		for i, f := range fs {
			if f.Start != c.spans[i][0] || f.End != c.spans[i][1] {
				return fmt.Sprintf("finding %d is %q, want %q", i, c.text[f.Start:f.End], c.text[c.spans[i][0]:c.spans[i][1]])
			}
		}
	}
	return ""
}

func describeFindings(text string, fs []Finding) string {
	if len(fs) == 0 {
		return "nothing"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%s %q", f.Kind, text[f.Start:f.End])
	}
	return strings.Join(parts, "; ")
}

func TestCorpusDestructive(t *testing.T) {
	p, err := NewTools(ToolsConfig{Destructive: true})
	if err != nil {
		t.Fatal(err)
	}
	input := func(text string) json.RawMessage {
		if strings.HasPrefix(text, "{") {
			return json.RawMessage(text)
		}
		b, _ := json.Marshal(map[string]string{"command": text})
		return b
	}
	pos := readCorpus(t, "destructive", "positive.txt", true)
	neg := readCorpus(t, "destructive", "negative.txt", false)
	caught, clean := 0, 0
	for _, c := range pos {
		rule, denied := p.ruleFor("Bash", input(c.text))
		switch {
		case !denied:
			t.Errorf("%s: not denied: %q", c, c.text)
		case !slices.Contains(c.kinds, rule):
			t.Errorf("%s: denied by %s, want %s: %q", c, rule, strings.Join(c.kinds, ","), c.text)
		default:
			caught++
		}
	}
	for _, c := range neg {
		if rule, denied := p.ruleFor("Bash", input(c.text)); denied {
			t.Errorf("%s: false positive (rule %s): %q", c, rule, c.text)
			continue
		}
		clean++
	}
	t.Logf("corpus destructive: %d/%d positives caught, %d/%d negatives clean", caught, len(pos), clean, len(neg))
}

// ruleFor reports which rule denies a call (the corpus tests name the rule they expect).
func (p *Tools) ruleFor(name string, input json.RawMessage) (string, bool) {
	v := p.evaluate(context.Background(), name, input)
	return v.rule, v.denied
}
