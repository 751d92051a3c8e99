// Package approvals holds tool calls for a person's decision: a tool.before that settles
// with permission ask (AHP "ask": require interactive approval; mandatory approval fails
// closed where no approval path exists) becomes a Record, the call waits in the proxy
// until someone approves or denies it on the admin listener or it expires, and the
// decision applies to that one call only (single use, bound by Digest to the route,
// session, tool name, effective input and policy generation).
//
// Design: records live in a Store — Memory for one process, Redis for several replicas,
// where a decision taken on any replica reaches the one holding the call through Redis
// pub/sub (and a slow re-read as a safety net). The package owns the records, the
// waiting, the admin HTTP endpoints (mounted behind admin.Auth), the change feed and the
// notifications; the proxy owns what holding means on the wire (keep-alives, removing a
// denied call).
package approvals
