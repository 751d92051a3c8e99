package mapping

import "bytes"

// CallScreen is implemented by translators that can clear a complete response body of
// tool calls from its bytes alone, without decoding it. The proxy uses it when the only
// response-side subscription is tool.before: a response without a call builds no event,
// so decoding it would be work no settlement needs.
type CallScreen interface {
	// NoToolCalls reports that body is JSON the codec's strict check accepts and that
	// DecodeResponse could find no tool call in it. It may answer false for a body without
	// calls (the proxy then decodes it as usual); it never answers true for a body with one.
	NoToolCalls(body []byte) bool
}

// MayHold reports whether any of tokens (ASCII key names or type values) can stand in the
// decoded text of the JSON body: true when one of them stands in it literally, or when the
// body has a \u escape anywhere, which could spell one (escapes are rare in provider output,
// so the screen stays exact where it matters and cheap everywhere else).
func MayHold(body []byte, tokens ...string) bool {
	if bytes.Contains(body, []byte(`\u`)) {
		return true
	}
	for _, t := range tokens {
		if bytes.Contains(body, []byte(t)) {
			return true
		}
	}
	return false
}
