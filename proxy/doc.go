// Package proxy is hookproxy's HTTP side: the server and its routes, the upstream
// transport, streaming, and the enforcement of settled AHP decisions as native HTTP
// (forward, rewrite, refuse, answer with a supplied result). It builds canonical events
// through the mapping translators and settles them through the chain; it never parses AHP
// replies or knows effect rules itself (the chain owns them). What it reads it reads as the other
// side decodes it: content codings are undone first (content_coding.go), and input that
// could reach an upstream outside the examined shapes — a body on a read method, JSON
// under another media type — is examined or refused (request_input.go).
//
// Design: proxy imports chain, mapping and state, never audit or app: what it enforced is
// reported through Auditor, and app turns that into audit lines and metrics.
package proxy
