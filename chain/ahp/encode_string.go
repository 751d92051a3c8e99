package ahp

import "github.com/hookproxy/hookproxy/internal/jsontext"

// appendJSONString appends s as a JSON string literal exactly as encoding/json writes a
// string with HTML escaping off: quote and backslash escaped; \b, \f, \n, \r and \t in
// short form and the other control characters as \u00XX; invalid UTF-8 replaced by \ufffd;
// U+2028 and U+2029 escaped; everything else, <, > and & included, as it is. The writer is
// the word-at-a-time one the codecs use (jsontext), in encoding/json's form.
func appendJSONString(dst []byte, s string) []byte { return jsontext.AppendStringGo(dst, s) }
