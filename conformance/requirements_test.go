package conformance

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/ahptest"
	"github.com/hookproxy/hookproxy/internal/docsync"
)

// requirement is one entry of ahp/spec/draft/requirements.json.
type requirement struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Level   string `json:"level"`
	Profile string `json:"profile"`
	Section string `json:"section"`
}

var requirementID = regexp.MustCompile(`AHP-[A-Z]+-[0-9]{3}`)

// evidence is where the repository names each requirement id: the non-test files that
// implement it (an id comment beside the code) and the test functions that exercise it
// (an id in the test's doc comment or body).
type evidence struct {
	code  map[string][]string // id -> files
	tests map[string][]string // id -> package.TestName
}

// scan reads every Go file of the module.
func scan(t *testing.T, root string) evidence {
	ev := evidence{code: map[string][]string{}, tests: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(path, "_test.go") {
			for _, id := range unique(requirementID.FindAllString(string(src), -1)) {
				ev.code[id] = append(ev.code[id], rel)
			}
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("%s: %v", rel, err)
		}
		pkg := filepath.Base(filepath.Dir(rel))
		if filepath.Dir(rel) == "." {
			pkg = "."
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !(strings.HasPrefix(fn.Name.Name, "Test") || strings.HasPrefix(fn.Name.Name, "Fuzz")) {
				continue
			}
			start := fn.Pos()
			if fn.Doc != nil {
				start = fn.Doc.Pos()
			}
			text := string(src[fset.Position(start).Offset:fset.Position(fn.End()).Offset])
			for _, id := range unique(requirementID.FindAllString(text, -1)) {
				ev.tests[id] = append(ev.tests[id], pkg+"."+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func unique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func loadRequirements(t *testing.T) []requirement {
	data, err := os.ReadFile(filepath.Join(ahptest.AHPDir(t), "spec", "draft", "requirements.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Requirements []requirement `json:"requirements"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Requirements
}

// TestRequirementTable regenerates the requirement table of docs/conformance.md from
// requirements.json and the repository's id comments and checks it against that file (AHP-CORE-001: the claim names
// role, bindings and profiles; AHP-CORE-002: base plus at least one capability profile).
// Every active requirement of a claimed profile must have code and a test that names it:
// a claim without either fails here rather than being printed.
func TestRequirementTable(t *testing.T) {
	claimed := map[string]bool{}
	for _, c := range []Claim{Harness(), Backend()} {
		if !slices.Contains(c.Profiles, ProfileBase) || len(c.Profiles) < 2 {
			t.Errorf("%s claim %v: a claim is the base profile plus at least one capability profile", c.Role, c.Profiles)
		}
		for _, b := range c.Bindings {
			if !slices.Contains(c.Profiles, b) {
				t.Errorf("%s claim: binding %s without its binding profile", c.Role, b)
			}
		}
		for _, p := range c.Profiles {
			claimed[p] = true
		}
	}
	reqs := loadRequirements(t)
	ev := scan(t, docsync.ModuleRoot(t))

	var b strings.Builder
	b.WriteString("| Requirement | Level | Profile | Enforced in | Exercised by |\n|---|---|---|---|---|\n")
	seen := map[string]bool{}
	for _, r := range reqs {
		seen[r.ID] = true
		if !claimed[r.Profile] || r.Status != "active" {
			continue
		}
		code, tests := ev.code[r.ID], ev.tests[r.ID]
		if len(code) == 0 {
			t.Errorf("%s (%s, %s) is claimed but no code names it", r.ID, r.Profile, r.Section)
		}
		if len(tests) == 0 {
			t.Errorf("%s (%s, %s) is claimed but no test names it", r.ID, r.Profile, r.Section)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.ID, r.Level, r.Profile, codeList(code), codeList(tests))
	}
	// Ids in the code that the draft does not define are typos or stale.
	var stray []string
	for id := range ev.code {
		if !seen[id] {
			stray = append(stray, id)
		}
	}
	for id := range ev.tests {
		if !seen[id] {
			stray = append(stray, id)
		}
	}
	sort.Strings(stray)
	for _, id := range unique(stray) {
		t.Errorf("%s is named in the code but is not a requirement of requirements.json", id)
	}
	docsync.Check(t, "docs/conformance.md", "requirements", b.String())
}

func codeList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}
