package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
var version string

// currentVersion is the link-time version, else the module version recorded in the build
// info (go install module@version), else "dev".
func currentVersion() string {
	if version != "" {
		return version
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
