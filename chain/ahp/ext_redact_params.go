package ahp

import "regexp"

// ExtRedactParams is hookproxy's one declared result extension (AHP-EXT-001: reverse-DNS,
// and core behaviour depends on it only where the host says so). AHP has no modify
// target for an event's opaque params (tool descriptions, metadata,
// user, prompt variables, ...), yet the model reads those strings. A reply to
// model.request.before may carry
//
//	"extensions": {"hookproxy.redact_params": [{"find": "sk-live-...", "replace": "[REDACTED:api_key:1a2b3c4d]"}]}
//
// and the host then replaces every occurrence of each find in every string of the
// request's params before forwarding. It can only take text out: each replace must be a
// redaction placeholder (RedactionPlaceholder), so the extension cannot smuggle new
// content to the model, and the effects of the same reply are settled as usual.
const ExtRedactParams = "hookproxy.redact_params"

// ParamsRedaction is one member of the ExtRedactParams list.
type ParamsRedaction struct {
	Find    string `json:"find"`
	Replace string `json:"replace"`
}

// RedactionPlaceholder is the form a ParamsRedaction.Replace must have:
// [REDACTED], [REDACTED:<kind>] or [REDACTED:<kind>:<hex digest>].
var RedactionPlaceholder = regexp.MustCompile(`^\[REDACTED(?::[a-z0-9_.-]{1,64}(?::[0-9a-f]{4,64})?)?\]$`)
