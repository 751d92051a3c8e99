// Package admin is the handler of hookproxy's admin listener: liveness, readiness,
// Prometheus metrics and AHP capability discovery (hooks/capabilities), the bearer-token
// guard (auth.go) in front of the endpoints that change state, and the console at /ui/
// (console.go: server-rendered pages and one embedded script, behind the same guard). It is
// meant for a separate, private listener (config key admin), never the proxy listener.
//
// Design: it serves what app hands it (a readiness func, the metrics handler, the
// protected routes, the console's Window of recent decisions). The Window is the only
// state it keeps, and it is fed by app with decisions already scrubbed: admin never sees
// proxy traffic, and the console calls the protected API in-process rather than owning
// approvals itself.
package admin
