// Package admin is the handler of hookproxy's admin listener: liveness, readiness,
// Prometheus metrics and AHP capability discovery (hooks/capabilities), and the bearer-token
// guard (auth.go) in front of the endpoints that change state. It is meant for a
// separate, private listener (config key admin), never the proxy listener.
//
// Design: it serves what app hands it (a readiness func, the metrics handler);
// it holds no state of its own and never sees proxy traffic.
package admin
