package docsync

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is how long README.md may be: what hookproxy is, the commands, pointing an
// agent at it, what the default refuses and a map of docs/; everything else lives in docs/.
const readmeMaxLines = 150

// docFiles lists README.md and every Markdown file under docs/, relative to root, with
// forward slashes.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// proseLines returns the lines of a Markdown document outside fenced code blocks, with
// inline code spans blanked, so a link or heading shown as code is not taken for one.
func proseLines(doc string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			out = append(out, "")
			continue
		}
		if fence {
			out = append(out, "")
			continue
		}
		out = append(out, codeSpan.ReplaceAllString(line, "``"))
	}
	return out
}

var (
	codeSpan    = regexp.MustCompile("`[^`]*`")
	headingLine = regexp.MustCompile(`^#{1,6} +(.+?) *#* *$`)
	mdLink      = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	linkText    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the fragment ids GitHub gives the headings of doc: the heading's text
// (code spans and emphasis reduced to their text) lower-cased, every character that is not
// a letter, digit, space, hyphen or underscore dropped, spaces turned into hyphens, and
// "-1", "-2", ... appended to repeats.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		m := headingLine.FindStringSubmatch(line)
		if fence || m == nil {
			continue
		}
		text := linkText.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// linkProblems reports every relative link of file (a path relative to root) whose target
// is missing, leaves the repository, or names an anchor its Markdown target does not have.
// It also returns the Markdown files the file links to, for reachability.
func linkProblems(root, file string, read func(string) (string, error)) (problems, linked []string) {
	doc, err := read(file)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", file, err)}, nil
	}
	for n, line := range proseLines(doc) {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			where := fmt.Sprintf("%s:%d: link %s", file, n+1, target)
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				if dest == ".." || strings.HasPrefix(dest, "../") || filepath.IsAbs(path) {
					problems = append(problems, where+": leaves the repository")
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					problems = append(problems, where+": no such file")
					continue
				}
			}
			if strings.HasSuffix(dest, ".md") {
				linked = append(linked, dest)
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				problems = append(problems, where+": an anchor into a file that is not Markdown")
				continue
			}
			target, err := read(dest)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			if !anchors(target)[frag] {
				problems = append(problems, fmt.Sprintf("%s: %s has no heading #%s", where, dest, frag))
			}
		}
	}
	return problems, linked
}

// TestDocLinksResolve: every relative link in README.md and docs/ names a file of the
// repository and, where it has an anchor, a heading of that file; and every file of docs/
// is reachable from README.md by following links.
func TestDocLinksResolve(t *testing.T) {
	root := ModuleRoot(t)
	read := func(rel string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		return string(b), err
	}
	files := docFiles(t, root)
	if len(files) < 5 {
		t.Fatalf("found only %v: the walk of docs/ is broken", files)
	}
	links := map[string][]string{}
	for _, f := range files {
		problems, linked := linkProblems(root, f, read)
		for _, p := range problems {
			t.Error(p)
		}
		links[f] = linked
	}
	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, g := range links[f] {
			if !reached[g] {
				reached[g] = true
				queue = append(queue, g)
			}
		}
	}
	for _, f := range files {
		if !reached[f] {
			t.Errorf("%s is not reachable from README.md by its links", f)
		}
	}
}

// TestLinkProblems is the control: a missing file, a missing anchor, an anchor on a file
// that is not Markdown and a link out of the repository are each reported; good links,
// links in code and links to the web are not.
func TestLinkProblems(t *testing.T) {
	root := t.TempDir()
	docs := map[string]string{
		"README.md": "# Title\n\n## Try it: `demo` (now)\n\nSee [a](docs/a.md#second-part), [b](docs/a.md#nope),\n" +
			"[c](docs/missing.md), [d](#try-it-demo-now), [e](go.mod#x), [f](../outside.md), [g](https://example.com/x#y).\n" +
			"`[h](docs/missing-in-code.md)`\n```\n[i](docs/missing-in-fence.md)\n```\n",
		"docs/a.md": "# A\n\n## Second part\n\n## Second part\n\nBack to [the top](../README.md#title) and [again](#second-part-1).\n",
		"go.mod":    "module x\n",
	}
	for name, text := range docs {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		return string(b), err
	}
	problems, linked := linkProblems(root, "README.md", read)
	want := []string{
		"README.md:5: link docs/a.md#nope: docs/a.md has no heading #nope",
		"README.md:6: link docs/missing.md: no such file",
		"README.md:6: link go.mod#x: an anchor into a file that is not Markdown",
		"README.md:6: link ../outside.md: leaves the repository",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(linked, "docs/a.md") {
		t.Errorf("linked %v, want docs/a.md among them", linked)
	}
	if problems, _ := linkProblems(root, "docs/a.md", read); len(problems) != 0 {
		t.Errorf("docs/a.md: %v, want no problems", problems)
	}
}

// TestReadmeIsShort: README.md stays a five-minute read; the rest belongs in docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a file of docs/ and link it", n, readmeMaxLines)
	}
}
