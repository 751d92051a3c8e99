package cli

import (
	"io"
	"os"
	"testing"

	"github.com/hookproxy/hookproxy/internal/hookproxybin"
)

// TestMain makes this test binary the hookproxy binary of the tests that start one as a
// child process (hookproxyBinary), with the version a link-time -X main.version would set.
func TestMain(m *testing.M) {
	hookproxybin.RunIfInvoked(func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		Version = testVersion
		return Main(args, stdin, stdout, stderr)
	})
	os.Exit(m.Run())
}

// hookproxyBinary returns a hookproxy binary: this test binary, started under the name
// hookproxy (TestMain), so no go build is needed.
func hookproxyBinary(t *testing.T) string {
	t.Helper()
	return hookproxybin.Path(t)
}

// run is Main on the process's standard input.
func run(args []string, stdout, stderr io.Writer) int {
	return Main(args, os.Stdin, stdout, stderr)
}
