// Package state is hookproxy's conversation state across requests: the
// settlement records of tool results and prompts, and the injections whose delivery is
// deferred to a later model call. It knows canonical messages but no provider JSON and no
// HTTP. Two stores implement it: Memory (one process, the default) and Redis (shared by
// several replicas).
//
// The state is fail-safe by construction: the proxy treats a tool result or prompt whose
// record a store does not return as new and settles it again. A store that forgets (an
// eviction, a restart, an outage) therefore costs a repeated hook call, never content that
// reaches the model as it was before a policy changed it.
package state
