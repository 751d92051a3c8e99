package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// The small JSON-writing helpers every codec needs when it renders edits onto a native body.
// Each has one semantics, shared by all codecs; parsing is gjson's and patching sjson's.

// Quote renders s as a JSON string literal the way the providers write text: only what JSON
// requires is escaped (no HTML escapes, U+2028/U+2029 literal), invalid UTF-8 becomes
// \ufffd (jsontext.AppendString).
func Quote(s string) string { return string(jsontext.AppendString(make([]byte, 0, len(s)+2), s)) }

// AppendQuote appends s as Quote renders it.
func AppendQuote(dst []byte, s string) []byte { return jsontext.AppendString(dst, s) }

// SetRaw sets path (sjson syntax; see EscapeKey) in the JSON object obj to the raw JSON value.
func SetRaw(obj, path, raw string) (string, error) {
	out, err := sjson.SetRaw(obj, path, raw)
	if err != nil {
		return "", fmt.Errorf("set %s: %w", path, err)
	}
	return out, nil
}

// EscapeKey escapes an object key for use as one component of an sjson path.
func EscapeKey(k string) string {
	const special = `.*?|#@\!:`
	if !strings.ContainsAny(k, special) {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		if strings.IndexByte(special, k[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(k[i])
	}
	return b.String()
}

// JoinArray renders raw JSON values as an array.
func JoinArray(raws []string) string {
	n := 2
	for _, r := range raws {
		n += len(r) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('[')
	for i, r := range raws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
	}
	b.WriteByte(']')
	return b.String()
}

// Compact returns raw without insignificant whitespace, or an error when raw is not JSON.
func Compact(raw []byte) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// CompactJSON is Compact for text that is usually valid JSON: anything else is returned
// unchanged.
func CompactJSON(s string) string {
	if jsontext.IsCompact(s) { // whitespace inside strings is not insignificant
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

// UnescapeHTML undoes the \u003c, \u003e and \u0026 escapes encoding/json adds (tool inputs
// go through it in ToolCallPart), so that "<" in arguments reads "<" again, as providers
// write it. Escape pairs are consumed whole, so an escaped backslash followed by "u003c"
// stays text. s is valid JSON text, where a backslash only occurs inside strings.
func UnescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteByte(c)
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}
