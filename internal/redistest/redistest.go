package redistest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv makes a missing redis-server a failure instead of a skip.
const RequireEnv = "HOOKPROXY_REQUIRE_REDIS"

// Server is one redis-server child process.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	bin  string
	args []string
	t    testing.TB

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *bytes.Buffer
}

// URL is the redis:// URL of the server's database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Start starts redis-server on a free loopback port and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t)
}

// StartWith is Start with more redis-server arguments (--requirepass, TLS settings);
// "{port}" in them is the server's port. With "--tls-port", "{port}" the port is the TLS
// one and no plain port is opened.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("redis-server is not on PATH and %s is set: install the redis-server package", RequireEnv)
		}
		t.Skip("SKIP: redis-server is not on PATH (apt-get install redis-server); set " + RequireEnv + "=1 to make this a failure")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, bin: bin, args: args, t: t}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again on the same port (after Stop, or a kill).
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatalf("redis-server on %s is already running", s.Addr)
	}
	var stderr bytes.Buffer
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no",
		"--loglevel", "warning"}
	for _, a := range s.args {
		args = append(args, strings.ReplaceAll(a, "{port}", strconv.Itoa(s.Port)))
	}
	if slices.Contains(s.args, "--tls-port") {
		args[1] = "0" // the port is the TLS one
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond); err == nil {
			if slices.Contains(s.args, "--tls-port") {
				// Readiness only: the test's client checks the certificate.
				c = tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
			}
			ok := ping(c)
			_ = c.Close()
			if ok {
				break
			}
		}
		select {
		case <-done:
			s.t.Fatalf("redis-server exited at start: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			s.t.Fatalf("redis-server on %s did not answer within 10s: %s", s.Addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd, s.done, s.stderr = cmd, done, &stderr
}

// Stop kills the server (an outage: no shutdown handshake) and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// ping sends PING and expects an answer: +PONG, or -NOAUTH with --requirepass.
func ping(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, "PING\r\n"); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := c.Read(buf)
	return bytes.HasPrefix(buf[:n], []byte("+PONG")) || bytes.HasPrefix(buf[:n], []byte("-NOAUTH"))
}
