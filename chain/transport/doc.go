// Package transport delivers AHP JSON-RPC messages to one backend: over HTTP, over stdio
// (persistent or per-event processes) or to an in-process interceptor. A transport moves
// frames; it never interprets effects. Validation and staging of replies belong to chain.
package transport
