package ahp

// ExtRedactText is hookproxy's declared extension for taking text out of a message list
// that cannot be replaced whole (AHP-EXT-001; AHP-EDIT-001 forbids a whole-list replace
// when the target holds text withheld by metadata/omit selection or a gap — an encrypted
// reasoning item, an item reference, server-held history, an image). It edits only text
// the subscriber saw, in place, and only to take something out:
//
// A host that supports it offers it per subscription, in the intercept params
// ("extensions": {"hookproxy.redact_text": {"target": "request"}}), at a message-list
// boundary whose target it lets that subscription modify. A reply may then carry
//
//	"extensions": {"hookproxy.redact_text": [
//	  {"message": "m3", "part": "m3.0", "find": "AKIA...", "replace": "[REDACTED:aws_access_key_id:1a2b3c4d]"}]}
//
// and the host replaces every occurrence of find in that one text part of the effective
// target, as if by a modify, before the next interceptor runs. Every entry must name a
// text part the subscriber received whole (body selection, no gap) that holds find, and
// every replace must be a redaction placeholder (RedactionPlaceholder); otherwise the
// reply is invalid as a whole. Nothing else of the list — order, ids, other parts,
// withheld items — can change, so opaque content reaches the provider byte for byte.
const ExtRedactText = "hookproxy.redact_text"

// TextRedaction is one member of the ExtRedactText list.
type TextRedaction struct {
	Message string `json:"message"`
	Part    string `json:"part"`
	Find    string `json:"find"`
	Replace string `json:"replace"`
}

// TextRedactionOffer is the value of the ExtRedactText intercept-params extension: the
// boundary target the redactions apply to.
type TextRedactionOffer struct {
	Target string `json:"target"`
}
