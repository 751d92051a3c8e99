package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/docsync"
)

// The size ceilings of the module's non-test Go code: the largest file and the longest
// function as they were when the ceilings were set, so that a change may shrink them but
// never grow them. Measured with go/parser exactly as sizeOf below counts (every non-test
// .go file outside testdata and hidden directories; a file's lines as token.File counts
// them; a function from its `func` keyword, doc comment excluded, to its closing brace):
// chain/ahp/validate_event.go had 969 lines and internal/jsontext/check.go's check 217.
const (
	maxFileLines = 969
	maxFuncLines = 217
)

// sized is one measured file or function.
type sized struct {
	name  string
	lines int
}

// sizeOf parses every non-test Go file under root and returns the files and the
// function declarations (methods included) with their line counts.
func sizeOf(t *testing.T, root string) (files, funcs []sized) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, sized{rel, fset.File(f.Pos()).LineCount()})
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok {
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				funcs = append(funcs, sized{rel + ": " + fd.Name.Name, n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, funcs
}

// oversized names what exceeds limit.
func oversized(items []sized, limit int) []sized {
	var over []sized
	for _, it := range items {
		if it.lines > limit {
			over = append(over, it)
		}
	}
	return over
}

// TestCodeSizeCeilings fails when a non-test file or function has grown past the
// ceilings: a long file is split by what it holds, a long function by its steps.
func TestCodeSizeCeilings(t *testing.T) {
	files, funcs := sizeOf(t, docsync.ModuleRoot(t))
	if len(files) < 100 || len(funcs) < 1000 {
		t.Fatalf("measured only %d files and %d functions: the walk missed the module", len(files), len(funcs))
	}
	for _, f := range oversized(files, maxFileLines) {
		t.Errorf("%s has %d lines, more than the ceiling of %d: split it by what it holds", f.name, f.lines, maxFileLines)
	}
	for _, f := range oversized(funcs, maxFuncLines) {
		t.Errorf("%s has %d lines, more than the ceiling of %d: split it by its steps", f.name, f.lines, maxFuncLines)
	}
}

// TestCodeSizeCeilingsControl shows the check can fail: a module holding one file a line
// over the file ceiling, and one function a line over the function ceiling, is reported
// on both counts, while a test file of the same size is not measured.
func TestCodeSizeCeilingsControl(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("package big\n\nfunc long() {\n")
	for i := 0; i < maxFuncLines-1; i++ { // with the func line and the brace: one over
		b.WriteString("\t_ = 0\n")
	}
	b.WriteString("}\n")
	for lines := 2 + maxFuncLines + 1; lines < maxFileLines+1; lines++ {
		b.WriteString("\n")
	}
	src := b.String()
	for name, text := range map[string]string{"big.go": src, "big_test.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, funcs := sizeOf(t, dir)
	if over := oversized(files, maxFileLines); len(files) != 1 || len(over) != 1 {
		t.Errorf("files measured %v, over the ceiling %v: want big.go alone, over it", files, over)
	}
	if over := oversized(funcs, maxFuncLines); len(over) != 1 || over[0].lines != maxFuncLines+1 {
		t.Errorf("functions over the ceiling %v: want long, one line over", over)
	}
}
