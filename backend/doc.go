// Package backend serves hookproxy's built-in policies as one standalone AHP backend, so
// that any AHP harness — not only hookproxy's own proxy — can use them over HTTP or stdio.
//
// The in_process entries of a registration document become the backend. Its answer to a
// hooks/intercept request is computed by hookproxy's own chain, run in-process over those
// entries (registration order, their subscriptions' events, mode, timeoutMs,
// failurePolicy and content selection), and the chain's settlement is then encoded as ONE
// reply. Reusing the chain is what keeps the combined reply valid AHP: every policy sees
// the event with the earlier policies' accepted edits applied (chaining), a
// deny or flow stop short-circuits the rest, and whole-response validation of each policy
// reply happens exactly as in the proxy. How a settlement becomes one reply is documented
// on compose.
//
// Design: it imports chain, never proxy, mapping or policies (the policy factories are
// passed in); `hookproxy backend` (app) puts it behind a listener or on stdio.
package backend
