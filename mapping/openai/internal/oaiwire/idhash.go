package oaiwire

import (
	"hash"
	"unsafe"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// HashCompact writes raw JSON to h without insignificant whitespace, so that ids derived
// from an item do not change when a client re-indents its history.
//
// It is on the path of every message of every request, so it is written for speed: runs
// without whitespace go to the hash in one Write, straight from raw's memory (hash.Hash has
// no WriteString, and io.WriteString would copy each run), and string literals — most of
// a request's bytes — are skipped with a vectorised search for their closing quote
// instead of a byte loop. raw must be valid JSON; other input is hashed as it is, without
// a guarantee about which bytes count.
func HashCompact(h hash.Hash, raw string) {
	start := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			i = jsontext.StringEnd(raw, i)
		case ' ', '\t', '\n', '\r':
			if start < i {
				writeString(h, raw[start:i])
			}
			start = i + 1
		}
	}
	if start < len(raw) {
		writeString(h, raw[start:])
	}
}

// writeString hands s to h without copying it. Hash implementations do not retain or
// modify what they are given.
func writeString(h hash.Hash, s string) {
	if s == "" {
		return
	}
	h.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}
