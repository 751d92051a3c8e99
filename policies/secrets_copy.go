package policies

import (
	"encoding/json"
	"sync"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// RedactedCopy returns a copy of ev with every credential the default secrets policy
// detects replaced by its [REDACTED:<kind>:<8 hex>] placeholder: in text parts, in every
// string of tool.input, params and native. It is what a capture of traffic stores, so
// that a capture is not a second copy of the secrets the chain took out. ev is not
// modified; an event with nothing to redact comes back as an equal copy.
func RedactedCopy(ev *ahp.Event) *ahp.Event {
	if ev == nil {
		return nil
	}
	d := defaultSecretScanner()
	out := *ev
	if ev.Items != nil {
		out.Items = make([]ahp.Message, len(ev.Items))
		var scratch []Finding
		for i, m := range ev.Items {
			if m.BarePart != nil {
				bp := *m.BarePart
				if bp.Text != nil {
					part, _ := m.AsPart()
					scratch = d.scanText(scratch[:0], *bp.Text)
					if len(scratch) > 0 {
						t := redactPartText(&part, scratch, d, redactPlaceholder)
						bp.Text = &t
					}
				}
				m.BarePart = &bp
			}
			if m.Parts != nil {
				parts := make([]ahp.Part, len(m.Parts))
				for j, part := range m.Parts {
					if part.Text != nil {
						scratch = d.scanText(scratch[:0], *part.Text)
						if len(scratch) > 0 || part.Category == ahp.CategoryToolCall {
							t := redactPartText(&part, scratch, d, redactPlaceholder)
							part.Text = &t
						}
					}
					parts[j] = part
				}
				m.Parts = parts
			}
			out.Items[i] = m
		}
	}
	if ev.Tool != nil {
		t := *ev.Tool
		t.Input = redactedJSON(t.Input, d)
		out.Tool = &t
	}
	out.Params = redactedJSON(ev.Params, d)
	out.Native = redactedJSON(ev.Native, d)
	return &out
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

// redactedJSON rewrites every string of a JSON value through the scanner; a value that is
// not JSON is scanned as text and, when it holds a finding, replaced by the redacted text
// encoded as a JSON string so that nothing detected survives.
func redactedJSON(raw json.RawMessage, d *secretScanner) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	v, err := parseJSON(raw)
	if err != nil {
		fs := d.scanText(nil, string(raw))
		if len(fs) == 0 {
			return raw
		}
		b, _ := json.Marshal(applyFindings(string(raw), fs, redactPlaceholder))
		return b
	}
	var scratch []Finding
	changed := v.rewriteStrings("", func(key, s string) (string, bool) {
		scratch = d.scanField(scratch[:0], key, s)
		if len(scratch) == 0 {
			return s, false
		}
		return applyFindings(s, scratch, redactPlaceholder), true
	})
	if !changed {
		return raw
	}
	return v.appendJSON(nil)
}
