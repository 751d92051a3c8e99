// Package audit writes hookproxy's decision audit log: one JSON line per settled boundary,
// saying which event was decided, which interceptors ran with what outcome, whether the
// operation was refused (and whether that refusal was an explicit deny or a synthetic
// fail-closed denial), and how the proxy enforced the settlement.
//
// The record is deliberately typed so that it cannot carry credentials:
//   - it has no field for headers, request parameters, native payloads or raw bodies, so
//     there is nowhere for an Authorization or x-api-key header to go;
//   - closed vocabularies (outcome, enforcement, permission, flow, effect types, failure
//     kind and policy, event type) are named string types that encode only their known
//     values; anything else is written as "unknown";
//   - free-text identifiers and reasons are Text, which scrubs credential-shaped values
//     (bearer/basic tokens, "authorization: ...", provider API keys, JWTs) and caps length
//     whenever it is encoded, whatever the caller put in it;
//   - canonical content is written only when the operator enables IncludeContent, and is
//     scrubbed the same way.
//
// Design: proxy reports a settled boundary, app converts it (AuditRecord) and
// writes it here; audit imports neither proxy nor app.
package audit
