package hookproxybin

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Name is the file name of the link Path makes; a process started under that name is
// hookproxy.
const Name = "hookproxy"

// Main is the command line's entry point (cli.Main).
type Main func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// RunIfInvoked runs main with the process's arguments and exits with its code when this
// process was started through a link made by Path; otherwise it returns at once. Call
// it first in TestMain.
func RunIfInvoked(main Main) {
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") != Name {
		return
	}
	os.Exit(main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Path returns the path of a hookproxy binary for child processes of the test: a
// symbolic link named hookproxy, in a temporary directory of t, to the running test
// binary, whose TestMain must call RunIfInvoked.
func Path(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("hookproxybin: the test binary: %v", err)
	}
	link := filepath.Join(t.TempDir(), Name)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatalf("hookproxybin: %v", err)
	}
	return link
}
