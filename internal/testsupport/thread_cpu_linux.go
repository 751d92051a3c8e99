package testsupport

import (
	"syscall"
	"time"
	"unsafe"
)

// ThreadCPU is the CPU time the calling thread has used. A benchmark that locks its
// goroutine to its thread (runtime.LockOSThread) measures its own work with it, which on a
// machine shared with other work is steadier than wall time (0 where unsupported).
func ThreadCPU() time.Duration {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
