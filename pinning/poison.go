package pinning

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"

	"github.com/hookproxy/hookproxy/policies"
)

// Poison kinds besides the injection detector's own (policies.InjectionKinds: instructions
// addressed to the model, chat-template role markers, Unicode tag characters, zero-width
// and bidirectional controls).
const (
	// PoisonHiddenTag is markup that hides text from a human reader or dresses it up as an
	// instruction channel: <IMPORTANT>, <system>, <instructions>, <hidden>, <secret>, HTML
	// comments. Tool-poisoning write-ups put the payload in exactly these.
	PoisonHiddenTag = "hidden_tag"
	// PoisonConcealment asks the model to keep something from the user ("without telling
	// the user", "do not mention this to the user", "the user must not know").
	PoisonConcealment = "concealment"
	// PoisonSensitivePath names a credential file a tool has no business reading (SSH
	// private keys, an agent's MCP configuration with its tokens).
	PoisonSensitivePath = "sensitive_path"
)

var (
	reHiddenTag = regexp.MustCompile(`(?i)<!--|</?\s*(?:important|system|instructions?|hidden|secret|admin|sudo)\s*>`)
	// Concealment phrasings not covered by the injection detector's "do not tell the user".
	reConcealment = regexp.MustCompile(`(?i)\bwithout\s+(?:telling|informing|notifying|alerting|asking)\s+the\s+user\b` +
		`|\b(?:do\s+not|don'?t|never)\s+(?:mention|reveal|disclose|show|explain)\s+(?:this|it|that|anything)(?:\s+\w+){0,3}\s+to\s+the\s+user\b` +
		`|\b(?:do\s+not|don'?t|never)\s+(?:mention|reveal|disclose)\s+(?:that\s+you|this\s+(?:instruction|step|note)|these\s+instructions)\b` +
		`|\bthe\s+user\s+(?:must|should|does|need)\s*(?:not|n't)\s+(?:know|see|notice|be\s+told|find\s+out)\b` +
		`|\b(?:hide|conceal|keep)\s+(?:this|it|that)(?:\s+\w+){0,2}\s+from\s+the\s+user\b`)
	reSensitivePath = regexp.MustCompile(`~/\.ssh\b|\bid_(?:rsa|ed25519|ecdsa)\b|~/\.(?:cursor|codeium|claude)/[\w./-]*\.json\b|\bmcp\.json\b`)
)

// Scan returns the poison kinds found in a tool's description and in every string of its
// input schema (parameter descriptions carry payloads as well), sorted and without
// duplicates; nil when the definition is clean.
func Scan(t Tool) []string {
	var kinds []string
	scanText := func(s string) {
		for _, f := range policies.DetectInjection(s) {
			kinds = append(kinds, f.Kind)
		}
		if reHiddenTag.MatchString(s) {
			kinds = append(kinds, PoisonHiddenTag)
		}
		if reConcealment.MatchString(s) {
			kinds = append(kinds, PoisonConcealment)
		}
		if reSensitivePath.MatchString(s) {
			kinds = append(kinds, PoisonSensitivePath)
		}
	}
	scanText(t.Description)
	if len(bytes.TrimSpace(t.Schema)) > 0 {
		var v any
		if json.Unmarshal(t.Schema, &v) == nil {
			walkStrings(v, scanText)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// walkStrings calls f with every string in v (object keys too: a property name is read by
// the model as much as its description).
func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	}
}
