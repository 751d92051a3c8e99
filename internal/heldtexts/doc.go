// Package heldtexts remembers the SHA-256 of texts the process keeps from one request to
// the next, by the text's address and length. A coding agent re-sends its whole history on
// every request; where a decoder returns the same string for a text it decoded before (the
// values of long escaped JSON strings, mapping's knownLiterals), the request's digest memo
// (chain/transport.TextDigests) recognises that text by a lookup of 16 bytes instead of
// hashing and comparing the whole text. What a user derives from the text can be noted on
// it under the user's key (Text.Note): a scanner's result (policies), a settlement unit's
// frame and fingerprint (proxy), so that a text re-sent unchanged is found once per
// request and what is known about it comes with it.
//
// Exactness: an entry holds the string itself, so the memory its key names stays allocated
// to that text, immutable, while the entry exists; no other text can then have the same
// address and length. Only strings that own their memory and are never written again may
// be held (not a view of a reused buffer, and not a substring of a request body, which the
// entry would keep alive).
//
// Bounded like the other memos of what earlier requests carried (internal/twogen): at most
// heldBytes (texts and entries) in two generations per shard, what is in use surviving;
// Stats reports what is held for the metrics. It imports nothing of the module but twogen.
package heldtexts
