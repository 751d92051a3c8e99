package policies

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// CaptureMarker is what RedactedCopy puts in place of a credential of kind: distinct
// from the policy's own [REDACTED:<kind>:<8 hex>] placeholders, so that a replay can tell
// the secrets the capture took out (and stand a made-up credential of the same kind in
// for each, StandInCopy) from placeholders the traffic already carried.
func CaptureMarker(kind string) string { return "[CAPTURE-REDACTED-" + kind + "]" }

// RedactedCopy returns a copy of ev with every credential the default secrets policy
// detects replaced by CaptureMarker(kind): in text parts, in every string of tool.input,
// params and native. It is what a capture of traffic stores, so that a capture is not a
// second copy of the secrets the chain took out. ev is not modified; an event with
// nothing to redact comes back as an equal copy.
func RedactedCopy(ev *ahp.Event) *ahp.Event {
	return rewriteCopy(ev, func(text string, field bool, key string) (string, bool) {
		d := defaultSecretScanner()
		var fs []Finding
		if field {
			fs = d.scanField(nil, key, text)
		} else {
			fs = d.scanText(nil, text)
		}
		if len(fs) == 0 {
			return text, false
		}
		return applyFindings(text, fs, func(f Finding, _ string) string { return CaptureMarker(f.Kind) }), true
	})
}

// captureMarkerPattern finds CaptureMarker texts.
var captureMarkerPattern = regexp.MustCompile(`\[CAPTURE-REDACTED-([a-z0-9_]+)\]`)

// StandInCopy undoes RedactedCopy for a replay: each CaptureMarker becomes a made-up
// credential of its kind (secretStandIns) that the secrets policy detects as that kind in
// the same place, so a redacting policy re-settles a captured event as it settled the
// original. ev is not modified.
func StandInCopy(ev *ahp.Event) *ahp.Event {
	return rewriteCopy(ev, func(text string, _ bool, _ string) (string, bool) {
		if !strings.Contains(text, "[CAPTURE-REDACTED-") {
			return text, false
		}
		return captureMarkerPattern.ReplaceAllStringFunc(text, func(m string) string {
			kind := captureMarkerPattern.FindStringSubmatch(m)[1]
			if v, ok := secretStandIns[kind]; ok {
				return v
			}
			return m
		}), true
	})
}

// secretStandIns are made-up credentials, one per kind, each shaped so the secrets
// policy reports it as that kind wherever the original was found (checked against the
// detector's corpus by TestStandInsAreDetectedAsTheirKind).
var secretStandIns = map[string]string{
	SecretOpenAIKey:          "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",
	SecretAnthropicKey:       "sk-ant-api03-Ty4Qwb8DwkNhFdnXsiVpzz63FfkCzJr4i0B3JrTAwR4y9ojfljoQoaF1LlqsajAIxNKu8iS2G8NPRVdD53X83RZJzzzzgAA",
	SecretAWSAccessKeyID:     "AKIA4ZDMEN2KHVDGAJ8G",
	SecretAWSSecretAccessKey: "UdjAWtGSU8po/799NksnRH9ucAUsdMlHUvTCQCyE",
	SecretGitHubToken:        "ghp_0zVZomHFwUbbYrEqmSM9wCZ7Uw9xfogoEmvn",
	SecretSlackToken:         "xoxb-799075116372-6516761222029-5DZPjN0MEQ7wjJJibaZUPgHV",
	SecretSlackWebhook:       "https://hooks.slack.com/services/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",
	SecretGoogleAPIKey:       "AIzajljENUhJduRHHJEYXg4JdpmrcXgGCJbW56e",
	SecretStripeKey:          "sk_live_CuNGMGmSrCGIZEG8pSH4487q",
	SecretPrivateKey:         "-----BEGIN RSA PRIVATE KEY-----\nz5r1pY4OjE2jBMptUsGr7CmY+uCu3ZR1zTOlUcR64cXQLioDnkHIfxIq2HZt/PlJ\n-----END RSA PRIVATE KEY-----",
	SecretJWT:                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzdGFuZGluIiwiaWF0IjoxNzE2MjM5MDIyfQ.dZSlB5er8bOfZqfM2oeq3hDavJA76rNicHTp8hkqXk4",
	SecretBearerToken:        "dZSlB5er8bOfZqfM2oeq3hDavJA76rNicHTp8hkq",
	SecretBasicAuth:          "c3RhbmRpbjpaeDchcVIyI2tMbTk=",
	SecretURLPassword:        "Zx7-qR2wLm9",
	SecretGitLabToken:        "glpat-cabUGJmGEp7CgQ0PBQFI",
	SecretHuggingFaceToken:   "hf_14zGtSnovm14TUOizwd1iaeOV4qBkdfQ1y",
	SecretGeneric:            "x7Kq2Vp9Lm4Tz8Rw",
}

// rewriteCopy copies ev with fn applied to every text part (a tool_call part's JSON
// strings one by one) and every string of tool.input, params and native. fn gets the
// text, whether it is a JSON string value, and its member name.
func rewriteCopy(ev *ahp.Event, fn func(text string, field bool, key string) (string, bool)) *ahp.Event {
	if ev == nil {
		return nil
	}
	text := func(category string, t *string) *string {
		if t == nil {
			return nil
		}
		if category == ahp.CategoryToolCall {
			if out, ok := rewriteJSON(json.RawMessage(*t), fn); ok {
				s := string(out)
				return &s
			}
		}
		if s, ok := fn(*t, false, ""); ok {
			return &s
		}
		return t
	}
	out := *ev
	if ev.Items != nil {
		out.Items = make([]ahp.Message, len(ev.Items))
		for i, m := range ev.Items {
			if m.BarePart != nil {
				bp := *m.BarePart
				bp.Text = text(bp.Category, bp.Text)
				m.BarePart = &bp
			}
			if m.Parts != nil {
				parts := make([]ahp.Part, len(m.Parts))
				for j, part := range m.Parts {
					part.Text = text(part.Category, part.Text)
					parts[j] = part
				}
				m.Parts = parts
			}
			out.Items[i] = m
		}
	}
	raw := func(v json.RawMessage) json.RawMessage {
		if len(v) == 0 {
			return v
		}
		if r, ok := rewriteJSON(v, fn); ok {
			return r
		}
		// Not JSON: rewritten as text, and written back as a JSON string when changed so
		// that nothing detected survives.
		if s, ok := fn(string(v), false, ""); ok {
			b, _ := json.Marshal(s)
			return b
		}
		return v
	}
	if ev.Tool != nil {
		t := *ev.Tool
		t.Input = raw(t.Input)
		out.Tool = &t
	}
	out.Params = raw(ev.Params)
	out.Native = raw(ev.Native)
	return &out
}

// rewriteJSON applies fn to every string value of a JSON document; false when raw is not
// JSON.
func rewriteJSON(raw json.RawMessage, fn func(text string, field bool, key string) (string, bool)) (json.RawMessage, bool) {
	v, err := parseJSON(raw)
	if err != nil {
		return nil, false
	}
	if !v.rewriteStrings("", func(key, s string) (string, bool) { return fn(s, true, key) }) {
		return raw, true
	}
	return v.appendJSON(nil), true
}

// defaultSecretScanner is the scanner of the secrets policy's default configuration,
// built once (a scanner is safe for concurrent use, as the policy's own is).
var defaultSecretScanner = sync.OnceValue(func() *secretScanner {
	p, err := NewSecrets(SecretsConfig{})
	if err != nil { // the zero configuration is the documented default, always valid
		panic(err)
	}
	return p.scan
})
