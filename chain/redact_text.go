package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// hookproxy.redact_text (ahp.ExtRedactText): in-place redaction of visible text in a
// message list that cannot be replaced whole. AHP-EDIT-001 forbids a whole-list replace
// over a target holding withheld text (metadata/omit parts, gaps); this extension grants
// less than a replace, not more: it can only substitute a redaction placeholder for text
// the subscriber received whole, inside the one part that holds it. Message and part ids,
// order, roles, every other part and every withheld item stay as they are, so what the
// subscriber never saw passes unchanged. The host offers it per call (Intercept's ext);
// the chain offers it only to a subscription whose advertisement lets it modify the
// boundary's message-list target, and applies it like a modify: serially, chained, and
// atomically with the rest of the reply — one entry it cannot apply rejects the reply.

// textRedactionOffer is the intercept-params extension value for target. The values are
// encoded once per boundary target (the targets are ahp.EventBounds'); receivers read
// them, and an in-process policy that is not a reader gets a copy.
func textRedactionOffer(target string) map[string]json.RawMessage {
	b, ok := redactionOffers[target]
	if !ok {
		b, _ = json.Marshal(ahp.TextRedactionOffer{Target: target})
	}
	return map[string]json.RawMessage{ahp.ExtRedactText: b}
}

var redactionOffers = func() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage)
	for _, b := range ahp.EventBounds {
		if _, ok := m[b.Target]; !ok && b.Target != "" {
			m[b.Target], _ = json.Marshal(ahp.TextRedactionOffer{Target: b.Target})
		}
	}
	return m
}()

// canModify reports whether caps let the subscriber modify target at all.
func canModify(caps *ahp.Capabilities, target string) bool {
	if caps == nil || !slices.Contains(caps.Effects, ahp.EffectModify) {
		return false
	}
	ops, ok := caps.Modify[target]
	return ok && (ops.Replace || ops.Merge)
}

// applyTextRedactions applies the reply's hookproxy.redact_text list, when it carries one,
// to the staged value of the list target: view is the event the subscriber received, eff
// the effective event before this reply. The reply's own modify effects come first (they
// are staged already); the redactions then edit that value.
func applyTextRedactions(staged *Staged, view, eff *ahp.Event, loc targetLoc, target string) error {
	raw, ok := staged.Extensions[ahp.ExtRedactText]
	if !ok {
		return nil
	}
	var reds []ahp.TextRedaction
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&reds); err != nil {
		return invalidf("extensions.%s: %v", ahp.ExtRedactText, err)
	}
	if dec.More() {
		return invalidf("extensions.%s: trailing data", ahp.ExtRedactText)
	}
	cur, ok := staged.values[target]
	if !ok {
		cur = currentValue(eff, loc)
	}
	msgs := cur.msgs
	copied := map[int]bool{} // messages whose parts were copied (copy on first write)
	changed := false
	for i, r := range reds {
		if err := checkTextRedaction(view, r); err != nil {
			return invalidf("extensions.%s[%d]: %v", ahp.ExtRedactText, i, err)
		}
		mi := slices.IndexFunc(msgs, func(m ahp.Message) bool { return m.ID == r.Message })
		if mi < 0 {
			return invalidf("extensions.%s[%d]: message %q is not in the effective list", ahp.ExtRedactText, i, r.Message)
		}
		pi := slices.IndexFunc(msgs[mi].Parts, func(p ahp.Part) bool { return p.ID == r.Part })
		if pi < 0 || msgs[mi].Parts[pi].Kind != ahp.KindText || msgs[mi].Parts[pi].Text == nil {
			return invalidf("extensions.%s[%d]: part %q of message %q is not a text part of the effective list", ahp.ExtRedactText, i, r.Part, r.Message)
		}
		text := *msgs[mi].Parts[pi].Text
		if !strings.Contains(text, r.Find) {
			continue // an earlier entry took it out already
		}
		edited := strings.ReplaceAll(text, r.Find, r.Replace)
		if msgs[mi].Parts[pi].Category == ahp.CategoryToolCall && !json.Valid([]byte(edited)) {
			// A tool_call part holds serialized JSON the codecs parse back into arguments.
			return invalidf("extensions.%s[%d]: the redacted tool_call part is no longer JSON", ahp.ExtRedactText, i)
		}
		if !changed {
			// The current list may be shared with an earlier effective event: copy it.
			msgs = slices.Clone(msgs)
			changed = true
		}
		if !copied[mi] {
			msgs[mi].Parts = slices.Clone(msgs[mi].Parts)
			copied[mi] = true
		}
		msgs[mi].Parts[pi].Text = &edited
	}
	if !changed {
		return nil
	}
	if staged.values == nil {
		staged.values = make(map[string]*value, 1)
	}
	staged.values[target] = &value{kind: kindMessages, present: true, msgs: msgs}
	if !staged.Changed {
		staged.Changed = true
		// As for a modify: approval and a supplied result are bound to the old value.
		staged.State.Candidate = nil
		if staged.State.Permission == ahp.PermissionAllow {
			staged.State.Permission = ahp.PermissionNone
		}
	}
	return nil
}

// checkTextRedaction checks one entry against the subscriber's view: a placeholder
// replacement, and a find inside a text part the subscriber received whole.
func checkTextRedaction(view *ahp.Event, r ahp.TextRedaction) error {
	switch {
	case r.Find == "":
		return fmt.Errorf("find is empty")
	case !ahp.RedactionPlaceholder.MatchString(r.Replace):
		return fmt.Errorf("replace is not a redaction placeholder ([REDACTED...]): the extension can take text out, never put text in")
	}
	for mi := range view.Items {
		m := &view.Items[mi]
		if m.ID != r.Message {
			continue
		}
		for pi := range m.Parts {
			p := &m.Parts[pi]
			if p.ID != r.Part {
				continue
			}
			if p.Kind != ahp.KindText || p.Text == nil || p.Selection != ahp.SelectionBody || p.Gap != nil {
				return fmt.Errorf("part %q of message %q is not a text part this subscriber received whole", r.Part, r.Message)
			}
			if !strings.Contains(*p.Text, r.Find) {
				return fmt.Errorf("part %q of message %q does not hold the text to find", r.Part, r.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("no part %q of message %q in the event this subscriber received", r.Part, r.Message)
}
