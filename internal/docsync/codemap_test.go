package docsync

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// codeMapFile is the file that holds the code map, relative to the module root.
const codeMapFile = "docs/design/code-map.md"

// codeMapSection is the code map in doc: from its "# Code map" title to the next heading
// of the same level.
func codeMapSection(doc string) (string, bool) {
	const heading = "# Code map\n"
	i := strings.Index("\n"+doc, "\n"+heading)
	if i < 0 {
		return "", false
	}
	rest := doc[i+len(heading):]
	if j := strings.Index(rest, "\n# "); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// modulePackages lists the module's packages as go list ./... would: every directory
// under root holding a .go file, except testdata, vendor, node_modules and names starting
// with "." or "_", which the go command ignores.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for p := range seen {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	return pkgs
}

// codeMapProblems reports the packages the code map does not name (as `path`), and the
// names in its table's first column that are no package of the module.
func codeMapProblems(section string, pkgs []string) (missing, unknown []string) {
	for _, p := range pkgs {
		if !strings.Contains(section, "`"+p+"`") {
			missing = append(missing, p)
		}
	}
	firstCol := regexp.MustCompile(`(?m)^\| ([^|]+) \|`)
	name := regexp.MustCompile("`([^`]+)`")
	for _, row := range firstCol.FindAllStringSubmatch(section, -1) {
		for _, n := range name.FindAllStringSubmatch(row[1], -1) {
			if !slices.Contains(pkgs, n[1]) {
				unknown = append(unknown, n[1])
			}
		}
	}
	return missing, unknown
}

// TestCodeMapNamesEveryPackage keeps the code map true to the tree: every package of
// the module is named in it, and every package its table names exists.
func TestCodeMapNamesEveryPackage(t *testing.T) {
	root := ModuleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(codeMapFile)))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := codeMapSection(string(doc))
	if !ok {
		t.Fatalf(`%s has no "# Code map" title`, codeMapFile)
	}
	pkgs := modulePackages(t, root)
	for _, must := range []string{"proxy", "chain", "app", "cmd/hookproxy/cli"} {
		if !slices.Contains(pkgs, must) { // the walk itself must find the packages
			t.Fatalf("package walk found %v, without %s", pkgs, must)
		}
	}
	missing, unknown := codeMapProblems(section, pkgs)
	for _, p := range missing {
		t.Errorf("the code map (%s) does not name package `%s`", codeMapFile, p)
	}
	for _, p := range unknown {
		t.Errorf("the code map (%s) names `%s`, which is no package of the module", codeMapFile, p)
	}
}

// TestCodeMapProblems is the control: a map that omits a package or names a removed one
// is reported.
func TestCodeMapProblems(t *testing.T) {
	section := "| package | owns |\n|---|---|\n| `proxy`, `internal/wiring` | x |\n| `chain` | y |\n"
	missing, unknown := codeMapProblems(section, []string{"chain", "mapping", "proxy"})
	if !slices.Equal(missing, []string{"mapping"}) || !slices.Equal(unknown, []string{"internal/wiring"}) {
		t.Fatalf("missing %v, unknown %v; want [mapping] and [internal/wiring]", missing, unknown)
	}
}
