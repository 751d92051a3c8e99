package mapping

import "strings"

// TextualMediaType reports whether content of media type mt is text a policy must read
// rather than opaque bytes: text/*, JSON and XML (also as +json/+xml suffixes), and the
// script, data and configuration types that are text under an application/ name
// (application/javascript, application/x-yaml, application/sql, ...). Parameters are
// ignored; the comparison is case-insensitive. Inline bytes of such a type that decode as
// UTF-8 are text; a codec that cannot read them names them in a gap.
func TextualMediaType(mt string) bool {
	l := strings.ToLower(mt)
	if i := strings.IndexByte(l, ';'); i >= 0 {
		l = l[:i]
	}
	l = strings.TrimSpace(l)
	top, sub, ok := strings.Cut(l, "/")
	if !ok || top == "" || sub == "" {
		return false
	}
	if top == "text" {
		return true
	}
	if strings.HasSuffix(sub, "+json") || strings.HasSuffix(sub, "+xml") || strings.HasSuffix(sub, "+yaml") {
		return true
	}
	if top != "application" {
		return false
	}
	switch strings.TrimPrefix(sub, "x-") {
	case "json", "ndjson", "jsonl", "json-seq", "xml", "yaml", "toml", "javascript", "ecmascript",
		"typescript", "sql", "sh", "shellscript", "python", "php", "ruby", "perl", "csv",
		"www-form-urlencoded", "graphql", "x509-ca-cert", "pem-file", "tex", "latex":
		return true
	}
	return false
}
