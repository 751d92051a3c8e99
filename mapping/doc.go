// Package mapping translates native model-API and tool-endpoint JSON to and from canonical
// AHP content. Each native API has its own subpackage (openai/chat, openai/responses,
// anthropic, gemini, mcp) implementing Translator; this package holds the shapes they
// share and the stream-editing contract.
//
// The canonical message list is the single source of truth for edits: the proxy settles a
// boundary, takes the effective canonical list, and asks the translator to render it back
// onto the original native body. Translators patch only what changed (gjson to read, sjson
// to write), so unknown native fields and unchanged messages survive byte for byte.
//
// Design: mapping never calls a backend and never speaks HTTP; proxy drives a translator,
// chain settles the events it produced.
package mapping
