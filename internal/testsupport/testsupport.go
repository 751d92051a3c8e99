// Package testsupport holds the small helpers several packages' tests share: a buffer a
// child process (or a logger) writes while the test reads it, a free loopback address, and
// a time bound that stretches under the race detector. It is imported by tests only.
package testsupport

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// LockedBuffer is an io.Writer safe for concurrent writes and reads.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FreeAddr returns a loopback address whose port was free a moment ago, for
// configurations that need a fixed one (listen and admin must differ, so both cannot be
// 127.0.0.1:0).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
