package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/docsync"
)

// module is the import path every package of the module starts with.
const module = "github.com/hookproxy/hookproxy"

// floor is one layer of the module: its packages and the lower floors they may import.
// A package may always import packages of its own floor (Go itself forbids the cycles).
type floor struct {
	name string
	// pkgs are paths relative to the module root; "dir/..." is dir and everything under
	// it. The longest matching pattern decides a package's floor.
	pkgs []string
	// may are the names of the floors below this one whose packages it may import.
	may []string
	// what says, for the code map mirror, what the floor holds.
	what string
}

// floors is the declared layering, bottom to top. Only the non-test files of a package
// count (what a build of hookproxy links); tests may reach up, e.g. to run the real
// command line, because nothing imports a test.
var floors = []floor{
	{name: "leaves", what: "leaf helpers and test kits; the closed enforcement vocabulary",
		pkgs: []string{"internal/...", "enforcement"}},
	{name: "configuration", what: "the configuration file model",
		pkgs: []string{"config"}, may: []string{"leaves"}},
	{name: "protocol", what: "the AHP wire model, registration, delivery, the conformance claim",
		pkgs: []string{"chain/ahp", "chain/registration", "chain/transport", "conformance"},
		may:  []string{"leaves"}},
	{name: "engine", what: "the interceptor chain, the codecs, the built-in policies, tool-definition pinning, metrics, the admin handler, the memo of work over message lists; none reads the configuration",
		pkgs: []string{"chain", "mapping/...", "policies", "pinning", "metrics", "admin", "internal/listmemo"},
		may:  []string{"leaves", "protocol"}},
	{name: "serving", what: "the proxy and what it is built with from a configuration; the standalone backend; the rollout tools",
		pkgs: []string{"proxy", "approvals", "state", "tracing", "audit", "backend", "capture", "shadow", "replay"},
		may:  []string{"leaves", "configuration", "protocol", "engine"}},
	{name: "assembly", what: "configuration → a running generation",
		pkgs: []string{"app"},
		may:  []string{"leaves", "configuration", "protocol", "engine", "serving"}},
	{name: "commands", what: "the command line",
		pkgs: []string{"cmd/..."},
		may:  []string{"leaves", "configuration", "protocol", "engine", "serving", "assembly"}},
	{name: "harnesses", what: "test-only packages and the load driver; nothing imports them",
		pkgs: []string{"e2e/...", "load/...", "mapping/mappingtest", "mapping/openai/chat/sdkcheck", "mapping/openai/responses/sdkcheck"},
		may:  []string{"leaves", "configuration", "protocol", "engine", "serving", "assembly", "commands"}},
}

// floorOf returns the floor of package p (relative path) by the longest matching pattern.
func floorOf(fs []floor, p string) (*floor, bool) {
	var best *floor
	bestLen := -1
	for i := range fs {
		for _, pat := range fs[i].pkgs {
			dir, tree := strings.CutSuffix(pat, "/...")
			if p == dir || (tree && strings.HasPrefix(p, dir+"/")) {
				if len(pat) > bestLen {
					best, bestLen = &fs[i], len(pat)
				}
			}
		}
	}
	return best, best != nil
}

// violations lists every import of graph (package → the module packages it imports, paths
// relative to the module root) that fs does not allow, and every package fs places on no
// floor.
func violations(fs []floor, graph map[string][]string) []string {
	var out []string
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		from, ok := floorOf(fs, p)
		if !ok {
			out = append(out, fmt.Sprintf("%s is on no floor of the table", p))
			continue
		}
		for _, q := range graph[p] {
			to, ok := floorOf(fs, q)
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s imports %s, which is on no floor of the table", p, q))
			case to != from && !slices.Contains(from.may, to.name):
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): not allowed", p, from.name, q, to.name))
			}
		}
	}
	return out
}

// moduleGraph reads the module's import graph from `go list`: for each package, the module
// packages its non-test files import.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = docsync.ModuleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	return parseGoList(t, out)
}

func parseGoList(t *testing.T, out []byte) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		graph[rel] = nil
		for _, imp := range p.Imports {
			if r, ok := relative(imp); ok {
				graph[rel] = append(graph[rel], r)
			}
		}
	}
	return graph
}

// relative returns the module-relative path of import path p ("" is the module root).
func relative(p string) (string, bool) {
	if p == module {
		return "", true
	}
	return strings.CutPrefix(p, module+"/")
}

// TestImportsFollowTheLayers: no package imports a package its floor may not import, and
// every package of the module is on a floor (a new package is placed deliberately).
func TestImportsFollowTheLayers(t *testing.T) {
	graph := moduleGraph(t)
	// The graph must be the real one: edges known to exist are in it, so an empty or
	// misread graph cannot pass.
	for _, e := range [][2]string{{"app", "proxy"}, {"proxy", "chain"}, {"chain", "chain/ahp"}, {"cmd/hookproxy/cli", "app"}} {
		if !slices.Contains(graph[e[0]], e[1]) {
			t.Fatalf("import graph lacks %s → %s; read %d packages", e[0], e[1], len(graph))
		}
	}
	for _, v := range violations(floors, graph) {
		t.Error(v)
	}
}

// TestViolationsControl is the control: a graph with imports running back up, and a
// package on no floor, is reported; the same graph without them is clean.
func TestViolationsControl(t *testing.T) {
	clean := map[string][]string{
		"app":               {"proxy", "config", "chain"},
		"proxy":             {"chain", "config", "mapping/openai/chat"},
		"chain":             {"chain/ahp", "internal/jsontext"},
		"internal/jsontext": nil,
		"cmd/hookproxy/cli": {"app"},
		"e2e":               {"app", "internal/testsupport"},
	}
	if v := violations(floors, clean); len(v) != 0 {
		t.Fatalf("clean graph reported: %v", v)
	}
	bad := map[string][]string{
		"chain":             {"config"},  // the engine reading the configuration
		"internal/jsontext": {"proxy"},   // a leaf reaching up
		"proxy":             {"app"},     // below the assembly, importing it
		"app":               {"e2e"},     // a harness imported
		"mapping/anthropic": {"mapping"}, // allowed: same floor
		"newpkg":            {"chain"},   // on no floor
	}
	got := violations(floors, bad)
	want := []string{
		"app (assembly) imports e2e (harnesses): not allowed",
		"chain (engine) imports config (configuration): not allowed",
		"internal/jsontext (leaves) imports proxy (serving): not allowed",
		"newpkg is on no floor of the table",
		"proxy (serving) imports app (assembly): not allowed",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// renderFloors is the code map's mirror of the table, top floor first.
func renderFloors(fs []floor) string {
	var b strings.Builder
	b.WriteString("| floor | packages | may import (besides its own floor) |\n|---|---|---|\n")
	for i := len(fs) - 1; i >= 0; i-- {
		f := fs[i]
		var pkgs []string
		for _, p := range f.pkgs {
			pkgs = append(pkgs, "`"+p+"`")
		}
		may := "—"
		if len(f.may) > 0 {
			may = strings.Join(f.may, ", ")
		}
		fmt.Fprintf(&b, "| %s: %s | %s | %s |\n", f.name, f.what, strings.Join(pkgs, ", "), may)
	}
	return b.String()
}

// TestReadmeMirrorsTheLayers keeps the code map's layering table equal to floors
// (HOOKPROXY_UPDATE_DOCS=1 rewrites it).
func TestReadmeMirrorsTheLayers(t *testing.T) {
	docsync.Check(t, "docs/design/code-map.md", "layers", renderFloors(floors))
}
