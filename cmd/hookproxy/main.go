package main

import (
	"io"
	"os"

	"github.com/hookproxy/hookproxy/cmd/hookproxy/cli"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
var version string

func main() {
	os.Exit(hookproxy(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// hookproxy runs the command line with the link-time version, if any.
func hookproxy(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if version != "" {
		cli.Version = version
	}
	return cli.Main(args, stdin, stdout, stderr)
}
