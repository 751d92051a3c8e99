package cli

import (
	"fmt"
	"io"
	"runtime/debug"
)

// Version is the version `hookproxy version` prints when set: cmd/hookproxy sets it from
// its link-time main.version (go build -ldflags "-X main.version=v1.2.3"); a test may set
// it directly.
var Version string

// currentVersion is Version, else the module version recorded in the build info (go
// install module@version), else "dev".
func currentVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "hookproxy version: unexpected arguments %q\n", args)
		return 2
	}
	fmt.Fprintf(stdout, "hookproxy %s\n", currentVersion())
	return 0
}
