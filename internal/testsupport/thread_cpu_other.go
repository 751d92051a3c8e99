//go:build !linux

package testsupport

import "time"

// ThreadCPU is the CPU time the calling thread has used; 0 on this system.
func ThreadCPU() time.Duration { return 0 }
