// Package cli is hookproxy's command line: the subcommands (serve, validate and version,
// the fixed contract, plus backend, demo and fake-model), their flags, usage and exit codes.
// It parses and reports; what a command runs is assembled by app. It is a
// package of its own, not package main, so that any package's test binary can run the
// real command line in a child process (internal/hookproxybin) instead of building it.
package cli
