package gemini

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// EncodeRequest renders the effective canonical list onto the original body. Unchanged
// contents and parts are copied byte for byte.
func (t *Translator) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	st, ok := req.Native.(*requestState)
	if !ok {
		return nil, fmt.Errorf("gemini: request was not decoded by this translator")
	}
	if mapping.MessagesEqual(items, st.items) {
		return req.Original, nil
	}
	obj := st.obj
	// The leading system and developer messages are the system instruction.
	head := 0
	for head < len(items) && (items[head].Role == ahp.RoleSystem || items[head].Role == ahp.RoleDeveloper) {
		head++
	}
	var err error
	switch {
	case head == 1 && st.sysRaw != "" && len(st.items) > 0 && mapping.MessageEqual(&items[0], &st.items[0]):
		// unchanged
	case head == 0:
		if st.sysRaw != "" {
			obj = deleteKey(obj, st.sysKey)
		}
	default:
		var parts []string
		for _, m := range items[:head] {
			for j := range m.Parts {
				r, err := renderPart(&m.Parts[j], st.parts[m.Parts[j].ID])
				if err != nil {
					return nil, err
				}
				parts = append(parts, r)
			}
		}
		if obj, err = mapping.SetRaw(obj, st.sysKey, `{"parts":`+mapping.JoinArray(parts)+`}`); err != nil {
			return nil, err
		}
	}
	contents, err := st.renderContents(items[head:])
	if err != nil {
		return nil, err
	}
	if obj, err = mapping.SetRaw(obj, "contents", contents); err != nil {
		return nil, err
	}
	if st.nested {
		out, err := mapping.SetRaw(string(req.Original), "generateContentRequest", obj)
		return []byte(out), err
	}
	return []byte(obj), nil
}

// group is one native content being rendered.
type group struct {
	model  bool
	origin int // the native content it continues, -1 for none
	parts  []string
}

// renderContents renders the non-system messages as the contents array: an assistant
// message is a model content; consecutive user and tool messages from the same native
// content (or new ones) are one user content again.
func (st *requestState) renderContents(items []ahp.Message) (string, error) {
	var groups []*group
	var cur *group
	for k := range items {
		m := &items[k]
		o, known := st.msgs[m.ID]
		origin := -1
		if known {
			origin = o.content
		}
		switch m.Role {
		case ahp.RoleAssistant:
			cur = &group{model: true, origin: origin}
			groups = append(groups, cur)
		default:
			if cur == nil || cur.model || origin >= 0 && cur.origin >= 0 && cur.origin != origin {
				cur = &group{origin: origin}
				groups = append(groups, cur)
			} else if cur.origin < 0 {
				cur.origin = origin
			}
		}
		switch {
		case m.Role == ahp.RoleSystem || m.Role == ahp.RoleDeveloper:
			// mid-list instructions (injections): a user text part, marked
			tag := m.Role + "-message"
			var b strings.Builder
			for j := range m.Parts {
				if j > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(m.Parts[j].TextOf())
			}
			cur.parts = append(cur.parts, `{"text":`+mapping.Quote("<"+tag+">\n"+b.String()+"\n</"+tag+">")+`}`)
		case m.Role == ahp.RoleTool:
			r, err := st.renderToolResult(m, o, known)
			if err != nil {
				return "", err
			}
			cur.parts = append(cur.parts, r)
		default:
			for j := range m.Parts {
				r, err := renderPart(&m.Parts[j], st.parts[m.Parts[j].ID])
				if err != nil {
					return "", err
				}
				cur.parts = append(cur.parts, r)
			}
		}
	}
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		if g.origin >= 0 && g.origin < len(st.contents) {
			orig := st.contents[g.origin]
			if sameParts(orig, g.parts) {
				out = append(out, orig)
				continue
			}
			if len(g.parts) == 0 {
				continue
			}
			c, err := mapping.SetRaw(orig, "parts", mapping.JoinArray(g.parts))
			if err != nil {
				return "", err
			}
			if g.model != (gjson.Get(orig, "role").String() == "model") {
				role := `"user"`
				if g.model {
					role = `"model"`
				}
				if c, err = mapping.SetRaw(c, "role", role); err != nil {
					return "", err
				}
			}
			out = append(out, c)
			continue
		}
		if len(g.parts) == 0 {
			continue
		}
		role := `"user"`
		if g.model {
			role = `"model"`
		}
		out = append(out, `{"role":`+role+`,"parts":`+mapping.JoinArray(g.parts)+`}`)
	}
	return mapping.JoinArray(out), nil
}

// sameParts reports whether a native content's parts are exactly parts.
func sameParts(content string, parts []string) bool {
	arr := gjson.Get(content, "parts")
	if !arr.Exists() {
		return len(parts) == 0
	}
	i := 0
	same := true
	arr.ForEach(func(_, p gjson.Result) bool {
		if i >= len(parts) || parts[i] != p.Raw {
			same = false
			return false
		}
		i++
		return true
	})
	return same && i == len(parts)
}

// renderToolResult renders a tool message as its functionResponse part: the original part
// when unchanged, else its response replaced by the message's text (a JSON object as it
// is, other text under "output", as Gemini reads a response without output and error
// keys as the whole output).
func (st *requestState) renderToolResult(m *ahp.Message, o msgOrigin, known bool) (string, error) {
	if !known || !o.tool || o.part == nil {
		return "", fmt.Errorf("gemini: tool message %q does not answer a call of this request; Gemini needs the function name", m.ID)
	}
	if len(m.Parts) == 1 && mapping.PartEqual(&m.Parts[0], &o.part.part) {
		return o.part.raw, nil
	}
	var b strings.Builder
	for j := range m.Parts {
		if m.Parts[j].Text != nil {
			b.WriteString(*m.Parts[j].Text)
		}
	}
	text := b.String()
	resp := `{"output":` + mapping.Quote(text) + `}`
	if v := gjson.Parse(text); v.IsObject() && json.Valid([]byte(text)) {
		resp = text
	}
	return mapping.SetRaw(o.part.raw, o.part.key+".response", resp)
}

// deleteKey removes a top-level member of a JSON object.
func deleteKey(obj, key string) string {
	m := mapping.TopMembers(gjson.Parse(obj))
	return m.Without(key)
}
