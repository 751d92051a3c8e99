package ahp

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/hookproxy/hookproxy/internal/jsonpath"
)

// Canonical content (AHP-CONTENT-001, AHP-CONTENT-002): model-visible slots
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
	v.optional(path, m, "id", func(at string, y any) { v.str(at, y, 1) })
	if r, has := m["role"]; has {
		if got, ok := v.enum(jsonpath.Member(path, "role"), r, roles...); ok && role != "" && got != role {
			v.failf(jsonpath.Member(path, "role"), "must be %q in this slot, not %q", role, got)
		}
	}
	v.optional(path, m, "synthesized", func(at string, y any) { v.boolean(at, y) })
	v.optional(path, m, "parts", func(at string, y any) { v.parts(at, y, false) })
}

// messages checks a list of canonical messages.
func (v *validator) messages(path string, x any, role string) {
	arr, ok := v.array(path, x)
	if !ok {
		return
	}
	for i, e := range arr {
		v.message(jsonpath.Index(path, i), e, role)
	}
}

// parts checks a list of bare parts (textOnly: text parts only, e.g. instructions, summary).
func (v *validator) parts(path string, x any, textOnly bool) {
	arr, ok := v.array(path, x)
	if !ok {
		return
	}
	for i, e := range arr {
		v.part(jsonpath.Index(path, i), e, textOnly)
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
	v.str(jsonpath.Member(path, "id"), p["id"], 1)
	kind, kindOK := v.enum(jsonpath.Member(path, "kind"), p["kind"], KindText, KindAttachment)
	sel, selOK := v.enum(jsonpath.Member(path, "selection"), p["selection"], SelectionBody, SelectionMetadata, SelectionOmit)
	if !kindOK || !selOK {
		return
	}
	if textOnly && kind != KindText {
		v.failf(jsonpath.Member(path, "kind"), "must be \"text\" in a text-part list")
		return
	}
	mpath := jsonpath.Member(path, "mediaType")
	if kind == KindText {
		// Text is always inline text/plain; structure is serialized into it.
		v.constant(mpath, p["mediaType"], MediaTypeText)
	} else if mt, ok := v.str(mpath, p["mediaType"], 1); ok && reTextOrJSONMediaType.MatchString(mt) {
		v.failf(mpath, "%q is not allowed as an attachment media type (text and JSON are inline text parts)", mt)
	}
	v.optional(path, p, "category", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, p, "synthesized", func(at string, y any) { v.boolean(at, y) })
	_, hasGap := p["gap"]
	switch {
	case sel == SelectionBody && hasGap:
		// A requested body that could not be supplied: no text, no body ref.
		v.closedPart(path, p, kind, sel, partGap)
		v.gap(jsonpath.Member(path, "gap"), p["gap"])
		v.description(path, p)
	case sel == SelectionBody && kind == KindText:
		v.closedPart(path, p, kind, sel, partTextBody)
		if t, has := p["text"]; !has {
			v.failf(path, "\"text\" is required on a body-selected text part (text is always inline)")
		} else if _, isStr := t.(string); !isStr {
			v.failf(jsonpath.Member(path, "text"), "must be a string, not %s", jsonpath.TypeName(t))
		}
	case sel == SelectionBody:
		v.closedPart(path, p, kind, sel, partAttachBody)
		if b, has := p["body"]; !has {
			v.failf(path, "\"body\" is required on a body-selected attachment (or a gap)")
		} else {
			v.contentReference(jsonpath.Member(path, "body"), b)
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
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if slices.Contains(allowed, k) {
			continue
		}
		switch {
		case (k == "text" || k == "body") && sel != SelectionBody:
			v.failf(jsonpath.Member(path, k), "unknown member of %s: it must not carry content", article(sel+"-selected part"))
		case (k == "text" || k == "body") && slices.Contains(allowed, "gap"):
			v.failf(jsonpath.Member(path, k), "unknown member of a gap part: it must not carry content")
		case k == "text" && kind == KindAttachment:
			v.failf(jsonpath.Member(path, k), "unknown member of an attachment: it carries its bytes by reference, never inline text")
		case k == "body" && kind == KindText:
			v.failf(jsonpath.Member(path, k), "unknown member of a text part: text is always inline, never an upload reference")
		case k == "size" || k == "sha256":
			v.failf(jsonpath.Member(path, k), "unknown member of a body-selected part: size and digest belong to the upload receipt")
		default:
			v.failf(jsonpath.Member(path, k), "unknown member of a %s %s part (closed object)", kind, sel)
		}
	}
}

// description checks the optional size and sha256 of a metadata, omit or gap part.
func (v *validator) description(path string, p map[string]any) {
	if s, has := p["size"]; has {
		// A byte count, held as the int64 of Part.Size.
		sp := jsonpath.Member(path, "size")
		if n, _ := s.(json.Number); v.integer(sp, s, 0) {
			if _, fits := jsonpath.Int64(n); !fits {
				v.failf(sp, "must be at most %d", int64(math.MaxInt64))
			}
		}
	}
	if h, has := p["sha256"]; has {
		if s, ok := v.str(jsonpath.Member(path, "sha256"), h, 0); ok && !reSHA256.MatchString(s) {
			v.failf(jsonpath.Member(path, "sha256"), "must be exactly 64 lowercase hex characters")
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
	v.optional(path, g, "reason", func(at string, y any) { v.str(at, y, 1) })
	v.optional(path, g, "path", func(at string, y any) { v.str(at, y, 1) })
}

// contentReference checks an attachment body {ref}: opaque, receiver-allocated, closed.
func (v *validator) contentReference(path string, x any) {
	r, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, r, "ref")
	for _, k := range slices.Sorted(maps.Keys(r)) {
		switch k {
		case "ref":
			v.str(jsonpath.Member(path, k), r[k], 1)
		case "size", "sha256":
			v.failf(jsonpath.Member(path, k), "is not allowed in a body reference (size and digest belong to the upload receipt)")
		default:
			v.failf(jsonpath.Member(path, k), "is not allowed in a body reference (closed object)")
		}
	}
}

// ValidateContentMessages validates a JSON list of canonical messages (a model-visible
// slot or an effect value such as modify(prompt|request|response|output), inject or
// return at model.request.before). role, when not "", is required of every message.
func ValidateContentMessages(list json.RawMessage, role string) error {
	_, err := ParseContentMessages(list, role)
	return err
}

// ValidateContentParts validates a JSON list of bare parts; textOnly restricts it to text
// parts (modify(instructions|summary), return at context.compact.before).
func ValidateContentParts(list json.RawMessage, textOnly bool) error {
	_, err := ParseContentParts(list, textOnly)
	return err
}

// ParseContentMessages validates list as ValidateContentMessages does and returns it
// decoded. Decoding follows the validated generic tree, so it inherits every rule: exact
// member names, closed objects, no member written twice, sizes that fit an int64.
func ParseContentMessages(list json.RawMessage, role string) ([]Message, error) {
	x, err := validate(list, contentSubject, func(v *validator, x any) { v.messages("$", x, role) })
	if err != nil {
		return nil, err
	}
	items, _ := x.([]any)
	out := make([]Message, len(items))
	for i, e := range items {
		m, _ := e.(map[string]any)
		out[i] = Message{ID: stringOf(m["id"]), Role: stringOf(m["role"]), Parts: partsOf(m["parts"])}
		out[i].Synthesized, _ = m["synthesized"].(bool)
	}
	return out, nil
}

// ParseContentParts validates list as ValidateContentParts does and returns it decoded.
func ParseContentParts(list json.RawMessage, textOnly bool) ([]Part, error) {
	x, err := validate(list, contentSubject, func(v *validator, x any) { v.parts("$", x, textOnly) })
	if err != nil {
		return nil, err
	}
	return partsOf(x), nil
}

// contentSubject names a content list in a ValidationError.
const contentSubject = "canonical content"

// partsOf decodes a validated part list (never nil).
func partsOf(x any) []Part {
	items, _ := x.([]any)
	out := make([]Part, len(items))
	for i, e := range items {
		p, _ := e.(map[string]any)
		part := &out[i]
		part.ID, part.Kind, part.MediaType, part.Selection = stringOf(p["id"]), stringOf(p["kind"]), stringOf(p["mediaType"]), stringOf(p["selection"])
		part.Category, part.SHA256 = stringOf(p["category"]), stringOf(p["sha256"])
		part.Synthesized, _ = p["synthesized"].(bool)
		if t, ok := p["text"].(string); ok {
			part.Text = &t
		}
		if b, ok := p["body"].(map[string]any); ok {
			part.Body = &Ref{Ref: stringOf(b["ref"])}
		}
		if g, ok := p["gap"].(map[string]any); ok {
			part.Gap = &Gap{Reason: stringOf(g["reason"]), Path: stringOf(g["path"])}
		}
		if n, ok := p["size"].(json.Number); ok {
			size, _ := jsonpath.Int64(n)
			part.Size = &size
		}
	}
	return out
}

// stringOf is the string x holds, or "" (absent members of a validated tree).
func stringOf(x any) string {
	s, _ := x.(string)
	return s
}

// article prefixes a noun phrase with "a" or "an".
func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
