package main

import (
	"os"

	"github.com/hookproxy/hookproxy/cmd/hookproxy/cli"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
var version string

func main() {
	if version != "" {
		cli.Version = version
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
