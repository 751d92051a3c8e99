package ahp

import (
	"encoding/json"
	"strings"
)

// Canonical content (SPEC-DIGEST §4; AHP-CONTENT-001, AHP-CONTENT-002): model-visible slots
// hold closed messages {id, role, parts, synthesized?}; generic slots hold bare parts; a
// part is one of eight closed variants chosen by kind × selection (× gap).

var roles = []string{RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool}

// message checks one canonical message. role, when not "", is the only role the slot admits
// (user.message.inbound ⇒ user, user.message.outbound ⇒ assistant).
func (v *validator) message(path string, x any, role string) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, "id", "role", "parts")
	v.closed(path, m, "id", "role", "parts", "synthesized")
	if id, has := m["id"]; has {
		v.str(member(path, "id"), id, 1)
	}
	if r, has := m["role"]; has {
		if got, ok := v.enum(member(path, "role"), r, roles...); ok && role != "" && got != role {
			v.failf(member(path, "role"), "must be %q in this slot, not %q", role, got)
		}
	}
	if s, has := m["synthesized"]; has {
		v.boolean(member(path, "synthesized"), s)
	}
	if p, has := m["parts"]; has {
		v.parts(member(path, "parts"), p, false)
	}
}

// messages checks a list of canonical messages.
func (v *validator) messages(path string, x any, role string) {
	arr, ok := v.array(path, x)
	if !ok {
		return
	}
	for i, e := range arr {
		v.message(index(path, i), e, role)
	}
}

// parts checks a list of bare parts (textOnly: text parts only, e.g. instructions, summary).
func (v *validator) parts(path string, x any, textOnly bool) {
	arr, ok := v.array(path, x)
	if !ok {
		return
	}
	for i, e := range arr {
		v.part(index(path, i), e, textOnly)
	}
}

// Members each part variant admits (closed objects; content-item.schema.json).
var (
	partTextBody    = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "text"}
	partAttachBody  = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "body"}
	partGap         = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "gap", "size", "sha256"}
	partDescription = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "size", "sha256"}
)

// part checks one part against its variant.
func (v *validator) part(path string, x any, textOnly bool) {
	p, ok := v.object(path, x)
	if !ok {
		return
	}
	if !v.required(path, p, "id", "kind", "mediaType", "selection") {
		return
	}
	v.str(member(path, "id"), p["id"], 1)
	kind, kindOK := v.enum(member(path, "kind"), p["kind"], KindText, KindAttachment)
	sel, selOK := v.enum(member(path, "selection"), p["selection"], SelectionBody, SelectionMetadata, SelectionOmit)
	if !kindOK || !selOK {
		return
	}
	if textOnly && kind != KindText {
		v.failf(member(path, "kind"), "must be \"text\" in a text-part list")
		return
	}
	mpath := member(path, "mediaType")
	if kind == KindText {
		// Text is always inline text/plain; structure is serialized into it.
		v.constant(mpath, p["mediaType"], MediaTypeText)
	} else if mt, ok := v.str(mpath, p["mediaType"], 1); ok && reTextOrJSONMediaType.MatchString(mt) {
		v.failf(mpath, "%q cannot be an attachment media type (text and JSON are inline text parts)", mt)
	}
	if c, has := p["category"]; has {
		v.str(member(path, "category"), c, 1)
	}
	if s, has := p["synthesized"]; has {
		v.boolean(member(path, "synthesized"), s)
	}
	_, hasGap := p["gap"]
	switch {
	case sel == SelectionBody && hasGap:
		// A requested body that could not be supplied: no text, no body ref.
		v.closedPart(path, p, kind, sel, partGap)
		v.gap(member(path, "gap"), p["gap"])
		v.description(path, p)
	case sel == SelectionBody && kind == KindText:
		v.closedPart(path, p, kind, sel, partTextBody)
		if t, has := p["text"]; !has {
			v.failf(path, "\"text\" is required on a body-selected text part (text is always inline)")
		} else if _, isStr := t.(string); !isStr {
			v.failf(member(path, "text"), "must be a string, not %s", jsonType(t))
		}
	case sel == SelectionBody:
		v.closedPart(path, p, kind, sel, partAttachBody)
		if b, has := p["body"]; !has {
			v.failf(path, "\"body\" is required on a body-selected attachment (or a gap)")
		} else {
			v.contentReference(member(path, "body"), b)
		}
	default:
		// metadata and omit views never carry content (AHP-CONTENT-002).
		v.closedPart(path, p, kind, sel, partDescription)
		v.description(path, p)
	}
}

// closedPart reports members the variant does not admit, with the reason that matters to a
// reader: content leaking into a view that must not carry it.
func (v *validator) closedPart(path string, p map[string]any, kind, sel string, allowed []string) {
	for _, k := range sortedKeys(p) {
		if contains(allowed, k) {
			continue
		}
		switch {
		case (k == "text" || k == "body") && sel != SelectionBody:
			v.failf(member(path, k), "%s must not carry content", article(sel+"-selected part"))
		case (k == "text" || k == "body") && contains(allowed, "gap"):
			v.failf(member(path, k), "a gap part must not carry content")
		case k == "text" && kind == KindAttachment:
			v.failf(member(path, k), "an attachment carries its bytes by reference, never inline text")
		case k == "body" && kind == KindText:
			v.failf(member(path, k), "text is always inline, never an upload reference")
		case k == "size" || k == "sha256":
			v.failf(member(path, k), "is not allowed on a body-selected part (size and digest belong to the upload receipt)")
		default:
			v.failf(member(path, k), "is not allowed on a %s %s part (closed object)", kind, sel)
		}
	}
}

// description checks the optional size and sha256 of a metadata, omit or gap part.
func (v *validator) description(path string, p map[string]any) {
	if s, has := p["size"]; has {
		v.integer(member(path, "size"), s, 0)
	}
	if h, has := p["sha256"]; has {
		if s, ok := v.str(member(path, "sha256"), h, 0); ok && !reSHA256.MatchString(s) {
			v.failf(member(path, "sha256"), "must be exactly 64 lowercase hex characters")
		}
	}
}

// gap checks a part gap {reason, path?}.
func (v *validator) gap(path string, x any) {
	g, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, g, "reason")
	v.closed(path, g, "reason", "path")
	if r, has := g["reason"]; has {
		v.str(member(path, "reason"), r, 1)
	}
	if p, has := g["path"]; has {
		v.str(member(path, "path"), p, 1)
	}
}

// contentReference checks an attachment body {ref}: opaque, receiver-allocated, closed.
func (v *validator) contentReference(path string, x any) {
	r, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, r, "ref")
	for _, k := range sortedKeys(r) {
		switch k {
		case "ref":
			v.str(member(path, k), r[k], 1)
		case "size", "sha256":
			v.failf(member(path, k), "is not allowed in a body reference (size and digest belong to the upload receipt)")
		default:
			v.failf(member(path, k), "is not allowed in a body reference (closed object)")
		}
	}
}

// ValidateContentMessages validates a JSON list of canonical messages (a model-visible
// slot or an effect value such as modify(prompt|request|response|output), inject or
// return at model.request.before). role, when not "", is required of every message.
func ValidateContentMessages(list json.RawMessage, role string) error {
	x, err := decodeFrame(list)
	if err != nil {
		return &ValidationError{Violations: []Violation{{Path: "$", Message: err.Error()}}}
	}
	v := &validator{}
	v.messages("$", x, role)
	return v.err()
}

// ValidateContentParts validates a JSON list of bare parts; textOnly restricts it to text
// parts (modify(instructions|summary), return at context.compact.before).
func ValidateContentParts(list json.RawMessage, textOnly bool) error {
	x, err := decodeFrame(list)
	if err != nil {
		return &ValidationError{Violations: []Violation{{Path: "$", Message: err.Error()}}}
	}
	v := &validator{}
	v.parts("$", x, textOnly)
	return v.err()
}

// article prefixes a noun phrase with "a" or "an".
func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
