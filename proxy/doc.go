// Package proxy is hookproxy's HTTP side: the server and its routes, the upstream
// transport, streaming, and the enforcement of settled AHP decisions as native HTTP
// (forward, rewrite, refuse, answer with a supplied result). It builds canonical events
// through the mapping translators and settles them through the chain; it never parses AHP
// replies or knows effect rules itself (DESIGN §1).
//
// Design: proxy imports chain, mapping and state, never audit or app: what it enforced is
// reported through Auditor, and internal/app turns that into audit lines and metrics.
package proxy
