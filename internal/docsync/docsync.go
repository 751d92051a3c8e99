package docsync

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvUpdate makes Check rewrite the section instead of failing.
const EnvUpdate = "HOOKPROXY_UPDATE_DOCS"

func markers(name string) (begin, end string) {
	return "<!-- generated:" + name + ":begin -->\n", "<!-- generated:" + name + ":end -->"
}

// ModuleRoot returns the directory holding go.mod, walking up from the working directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Replace returns doc with section name's content replaced by content.
func Replace(doc []byte, name, content string) ([]byte, error) {
	begin, end := markers(name)
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("markers %q … %q not found in order", strings.TrimSpace(begin), end)
	}
	if !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.WriteString(content)
	out.Write(doc[j:])
	return out.Bytes(), nil
}

// Section returns the current content of section name.
func Section(doc []byte, name string) (string, error) {
	begin, end := markers(name)
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return "", fmt.Errorf("markers %q … %q not found in order", strings.TrimSpace(begin), end)
	}
	return string(doc[i+len(begin) : j]), nil
}

// Check compares section name of file (a path relative to the module root, such as
// "docs/conformance.md") with content.
func Check(t testing.TB, file, name, content string) {
	t.Helper()
	path := filepath.Join(ModuleRoot(t), filepath.FromSlash(file))
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	got, err := Section(doc, name)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if got == content {
		return
	}
	if os.Getenv(EnvUpdate) == "1" {
		out, err := Replace(doc, name, content)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s section %s rewritten", file, name)
		return
	}
	t.Errorf("%s section %s is out of date (regenerate with %s=1 go test ./... -run %s); want:\n%s", file, name, EnvUpdate, t.Name(), content)
}
