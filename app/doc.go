// Package app is hookproxy's one assembly: every command that runs something builds it
// here, from a configuration, so there is one answer to "what runs when hookproxy runs".
//
//   - serve (Run, Serve): a configuration generation — the interceptor chain, the proxy
//     server, the audit writer — plus the process-wide parts built once (metrics, tracing,
//     the state store), the proxy and admin listeners, SIGINT/SIGTERM and SIGHUP, reload
//     on demand or on a file change with refcounted generations (a request finishes on the
//     generation it started on), readiness, and graceful shutdown.
//   - demo (Demo): the same Run, from the embedded default, in front of an imitation model.
//   - backend (NewBackend, ServeBackendHTTP, ServeBackendStdio): the built-in policies of a
//     registration as one standalone AHP backend.
//
// It is the top floor of the library: it imports the packages it wires (config, chain,
// policies, proxy, state, audit, metrics, tracing, admin, backend) and only
// cmd/hookproxy/cli and the end-to-end suites import it (internal/layers checks this).
//
// Boundaries turns each settled boundary the proxy reports into an audit line, metrics and
// log lines; it sits here, above proxy and audit, so that neither imports the other.
// Flags, usage and exit codes are cmd/hookproxy/cli's; tests run Run on loopback without
// a process of their own.
package app
