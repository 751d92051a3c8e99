//go:build unix

package transport

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the backend in its own process group, so that killing it also
// kills any helper it started, and a terminal's signals go to the proxy, which then
// manages its backends.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessTree sends SIGKILL to the backend's process group and to the backend itself.
// The caller guarantees the process has not been reaped yet.
func killProcessTree(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}

// killOrphans kills what is left of a reaped backend's process group.
func killOrphans(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
