package oaiwire

import (
	"hash"
	"strings"
	"unsafe"
)

// HashCompact writes raw JSON to h without insignificant whitespace, so that ids derived
// from an item do not change when a client re-indents its history (SPEC-DIGEST §15.4).
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
			i = stringEnd(raw, i)
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

// stringEnd returns the index of the quote that closes the string literal opening at
// s[open], or len(s)-1 when it is unterminated. A quote is the closing one when an even
// number of backslashes precedes it.
func stringEnd(s string, open int) int {
	for i := open + 1; i < len(s); {
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			return len(s) - 1
		}
		q += i
		bs := 0
		for j := q - 1; j > open && s[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 0 {
			return q
		}
		i = q + 1
	}
	return len(s) - 1
}

// writeString hands s to h without copying it. Hash implementations do not retain or
// modify what they are given.
func writeString(h hash.Hash, s string) {
	if s == "" {
		return
	}
	h.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}
