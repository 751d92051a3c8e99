package gemini

import (
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// Gemini 3 thought signatures survive a removed call. A model turn that called functions
// carries its thoughtSignature on the first functionCall part of the step, and the API
// refuses a later request whose history holds that step without it ("Function call is
// missing a thought_signature"). When tool.before removes the call that carried it, the
// signature moves, unchanged, to the first call kept in the same candidate, or — when no
// call is kept — to the last text part (the note naming the removal), where a turn without
// calls carries its signature. The signature is opaque: it is moved, never made up or
// altered, so the API still validates it.

// partSignature is the raw JSON value of a part's thoughtSignature (either spelling) and
// the member name it used; "" when the part has none.
func partSignature(raw string) (value, key string) {
	p := gjson.Parse(raw)
	for _, k := range [...]string{"thoughtSignature", "thought_signature"} {
		if v := p.Get(k); v.Exists() {
			return v.Raw, k
		}
	}
	return "", ""
}

// removedSignature is the signature of the first call among removed, the raw parts of the
// calls a candidate lost ("" when none carried one).
func removedSignature(removed []string) (value, key string) {
	for _, r := range removed {
		if v, k := partSignature(r); v != "" {
			return v, k
		}
	}
	return "", ""
}

// carrySignature puts sig (spelled key) on the first call among parts, the raw parts of
// one candidate as they go to the client, or when there is none on the last plain text
// part. A part that has a signature of its own keeps it. It reports whether a part took
// the signature (false: no part could carry it).
func carrySignature(parts []string, sig, key string) (bool, error) {
	at := -1
	for i, r := range parts {
		if isCall(gjson.Parse(r)) {
			at = i
			break
		}
	}
	if at < 0 {
		for i := len(parts) - 1; i >= 0; i-- {
			p := gjson.Parse(parts[i])
			if p.Get("text").Exists() && !p.Get("thought").Bool() {
				at = i
				break
			}
		}
	}
	if at < 0 {
		return false, nil
	}
	if v, _ := partSignature(parts[at]); v != "" {
		return true, nil // a later step's own signature: never overwritten
	}
	r, err := mapping.SetRaw(parts[at], key, sig)
	if err != nil {
		return false, err
	}
	parts[at] = r
	return true, nil
}
