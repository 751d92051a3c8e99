package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"testing"
)

// EnvStdioBackend, when set, makes the test binary act as a stdio AHP backend running the
// script it names (see scripts) instead of running tests. EnvStdioRecord names the file the
// backend appends every frame it receives to.
//
// The proxy starts stdio backends with PATH and HOME only (chain/transport minimalEnv), so
// the registration cannot set these variables for the child; it passes the same two values
// in argv after stdioBackendArg instead. The variables remain for running the backend by
// hand: HOOKPROXY_E2E_STDIO_BACKEND=deny-request ./e2e.test
const (
	EnvStdioBackend = "HOOKPROXY_E2E_STDIO_BACKEND"
	EnvStdioRecord  = "HOOKPROXY_E2E_STDIO_RECORD"
	stdioBackendArg = "-hookproxy.e2e.stdio-backend"
)

func TestMain(m *testing.M) {
	if script, record, ok := stdioBackendMode(); ok {
		os.Exit(runStdioBackend(script, record))
	}
	os.Exit(m.Run())
}

// stdioBackendMode reports whether this process was started as a stdio backend.
func stdioBackendMode() (script, record string, ok bool) {
	if len(os.Args) >= 3 && os.Args[1] == stdioBackendArg {
		if len(os.Args) >= 4 {
			record = os.Args[3]
		}
		return os.Args[2], record, true
	}
	if s := os.Getenv(EnvStdioBackend); s != "" {
		return s, os.Getenv(EnvStdioRecord), true
	}
	return "", "", false
}

// runStdioBackend is a tiny line-oriented AHP backend (AHP-STDIO-001): one JSON-RPC object
// per line on stdin; hooks/intercept gets one reply line on stdout with the script's
// effects, notifications get none. It exits 0 at EOF, which is how a persistent backend is
// told to stop. Diagnostics go to stderr only: stdout carries protocol frames exclusively.
func runStdioBackend(scriptName, record string) int {
	sc, ok := scripts[scriptName]
	if !ok {
		fmt.Fprintf(os.Stderr, "e2e stdio backend: unknown script %q\n", scriptName)
		return 2
	}
	var rec *os.File
	if record != "" {
		f, err := os.OpenFile(record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e stdio backend: %v\n", err)
			return 2
		}
		defer f.Close()
		rec = f
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if line = bytes.TrimRight(line, "\r\n"); len(line) > 0 {
			if rec != nil {
				// One write per frame with O_APPEND keeps frames whole for the reader.
				_, _ = rec.Write(append(append([]byte(nil), line...), '\n'))
			}
			reply, rerr := replyTo(line, sc)
			if rerr != nil {
				fmt.Fprintf(os.Stderr, "e2e stdio backend: %v\n", rerr)
				return 3
			}
			if reply != nil {
				out.Write(reply)
				out.WriteByte('\n')
				if ferr := out.Flush(); ferr != nil {
					return 0 // the proxy closed our stdout: nothing more to do
				}
			}
		}
		if err != nil {
			return 0
		}
	}
}
