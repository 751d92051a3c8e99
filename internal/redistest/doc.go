// Package redistest runs a real redis-server for tests: a child process on 127.0.0.1 and
// a free port, without persistence, killed at cleanup. Without redis-server on PATH the
// test is skipped visibly, or fails when HOOKPROXY_REQUIRE_REDIS is set (CI installs the
// Debian package and sets it, so a missing server never passes as a skip there).
package redistest
