// Package jsontext holds the small JSON-text helpers shared by the mappings and the
// policies: the strict one-pass check of client JSON (syntax, nesting depth, duplicate
// keys; check.go) and a string-literal writer that leaves HTML characters as they are.
package jsontext
