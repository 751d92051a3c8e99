// Package proxy is hookproxy's HTTP side: the server and its routes, the upstream
// transport, streaming, and the enforcement of settled AHP decisions as native HTTP
// (forward, rewrite, refuse, answer with a supplied result). It builds canonical events
// through the mapping translators and settles them through the chain; it never parses AHP
// replies or knows effect rules itself (the chain owns them). What it reads it reads as the other
// side decodes it: content codings are undone first (content_coding.go), and input that
// could reach an upstream outside the examined shapes — a body on a read method, JSON
// under another media type — is examined or refused (request_input.go).
//
// One model request that a subscription selects lives in one lifecycle (lifecycle.go):
// request boundaries, forward, the response mode chosen once (response_mode.go: passed,
// tapped, held, streamed with holds), the answer, the observations after it. The rest of
// the package are its collaborators (docs/design/request-lifecycle.md).
//
// Design: proxy imports chain, mapping and state, never audit or app: what it enforced is
// reported through Auditor, and app turns that into audit lines and metrics.
package proxy
