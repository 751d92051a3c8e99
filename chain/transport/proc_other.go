//go:build !unix

package transport

import (
	"os"
	"os/exec"
)

// setProcessGroup is a no-op where process groups are not available.
func setProcessGroup(*exec.Cmd) {}

// killProcessTree kills the backend process itself; descendants are not tracked here.
func killProcessTree(p *os.Process) { _ = p.Kill() }

// killOrphans is a no-op where process groups are not available.
func killOrphans(int) {}
