// Command loadgen drives hookproxy under load on loopback, for load/run.sh: a
// paced fake model upstream, an AHP backend that never answers, and three clients — many
// concurrent paced streams, a steady-rate soak, and requests against the hanging backend.
// Each client prints one "LOAD ..." summary line and exits non-zero when its bound is
// broken. Every server binds 127.0.0.1; every client run is bounded in time.
package main
