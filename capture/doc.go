// Package capture owns the full-fidelity record of settled boundaries that hookproxy's
// rollout tools work from: the line format (one JSON line per boundary: the canonical
// event exactly as the chain received it, what the host offered, the live settlement
// and, with a shadow chain, the shadow's), the summary of a settlement those lines keep
// (Decision) with the comparison of two of them (Compare: differs, and in a few words
// what would change), the writer of rotated capture files bounded by size and age, and
// their reader.
//
// Nothing in a line is truncated. Credentials are not in events (the proxy never puts
// them there); with redaction on, the event is stored after the default secrets
// redaction (policies.RedactedCopy).
package capture
