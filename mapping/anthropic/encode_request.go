package anthropic

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// EncodeRequest renders the effective canonical list onto the original body. Unchanged
// lists return the original bytes; otherwise only changed messages are re-rendered.
func (*Messages) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	if req == nil {
		return nil, errors.New("anthropic: nil request")
	}
	st, ok := req.Native.(*requestState)
	if !ok {
		return nil, errors.New("anthropic: request was not decoded by the anthropic translator")
	}
	if mapping.MessagesEqual(items, st.items) {
		return req.Original, nil
	}
	e := requestEncoder{st: st, items: items}

	lead := 0
	for lead < len(items) && (items[lead].Role == ahp.RoleSystem || items[lead].Role == ahp.RoleDeveloper) {
		if o, _ := e.origin(lead); o != nil && o.native >= 0 {
			break // a system entry of messages stays in messages
		}
		lead++
	}
	out := req.Original
	var err error
	switch sys, action, serr := e.system(items[:lead]); {
	case serr != nil:
		return nil, serr
	case action == systemSet:
		out, err = sjson.SetRawBytes(out, "system", []byte(sys))
	case action == systemDelete:
		out, err = sjson.DeleteBytes(out, "system")
	}
	if err != nil {
		return nil, fmt.Errorf("anthropic: patch system: %w", err)
	}

	msgs, changed, err := e.messages(lead)
	if err != nil {
		return nil, err
	}
	if changed {
		if out, err = sjson.SetRawBytes(out, "messages", []byte(msgs)); err != nil {
			return nil, fmt.Errorf("anthropic: patch messages: %w", err)
		}
	}
	return out, nil
}

type requestEncoder struct {
	st    *requestState
	items []ahp.Message
}

const (
	systemKeep = iota
	systemSet
	systemDelete
)

// origin returns the decoded item with the id of items[k], if any.
func (e *requestEncoder) origin(k int) (*itemOrigin, *ahp.Message) {
	i, ok := e.st.item(e.items[k].ID)
	if !ok {
		return nil, nil
	}
	return &e.st.origins[i], &e.st.items[i]
}

// system renders the leading system/developer messages as the top-level system prompt.
func (e *requestEncoder) system(sys []ahp.Message) (string, int, error) {
	hadSystem := e.st.system >= 0
	if len(sys) == 0 {
		if hadSystem {
			return "", systemDelete, nil
		}
		return "", systemKeep, nil
	}
	if len(sys) == 1 && hadSystem && mapping.MessageEqual(&sys[0], &e.st.items[e.st.system]) {
		return "", systemKeep, nil
	}
	if len(sys) == 1 && (!hadSystem || e.st.systemString) && len(sys[0].Parts) == 1 {
		if p := &sys[0].Parts[0]; p.Kind == ahp.KindText && p.Text != nil && p.Category == "" {
			return mapping.Quote(*p.Text), systemSet, nil
		}
	}
	var blocks []string
	for i := range sys {
		for j := range sys[i].Parts {
			p := &sys[i].Parts[j]
			if p.Kind != ahp.KindText || p.Category == ahp.CategoryToolCall || p.Category == ahp.CategoryReasoning {
				return "", 0, fmt.Errorf("anthropic: part %s: the system prompt holds only text", p.ID)
			}
			o := e.st.part(p.ID)
			if o != nil && o.typ != blockText {
				o = nil // the system prompt takes only text blocks: render the text anew
			}
			b, ok, err := renderPart(p, o)
			if err != nil {
				return "", 0, err
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
	}
	return mapping.JoinArray(blocks), systemSet, nil
}

// group is one native message to render: consecutive canonical items with one native role.
type group struct {
	role  string
	src   int   // native message of the first original item, -1 when all are new
	last  int   // native message of the last original item, -1 when none
	items []int // indices into requestEncoder.items
}

// canonicalRole maps a native message role to the canonical one; other is true for a role
// other than user and assistant. system and developer keep their meaning; an unknown role
// is read as user text (with a gap), since that is how a model would take it.
func canonicalRole(native string) (role string, other bool) {
	switch native {
	case ahp.RoleUser, ahp.RoleAssistant:
		return native, false
	case ahp.RoleSystem, ahp.RoleDeveloper:
		return native, true
	}
	return ahp.RoleUser, true
}

func nativeRole(role string) (string, error) {
	switch role {
	case ahp.RoleAssistant:
		return ahp.RoleAssistant, nil
	case ahp.RoleUser, ahp.RoleTool, ahp.RoleSystem, ahp.RoleDeveloper:
		return ahp.RoleUser, nil
	}
	return "", fmt.Errorf("anthropic: unknown canonical role %q", role)
}

// messages renders items[lead:] as the native messages array. changed is false when the
// result is the original array.
func (e *requestEncoder) messages(lead int) (string, bool, error) {
	var groups []group
	for k := lead; k < len(e.items); k++ {
		role, err := nativeRole(e.items[k].Role)
		if err != nil {
			return "", false, err
		}
		src := -1
		if o, _ := e.origin(k); o != nil {
			src = o.native
			if src >= 0 && e.st.messages[src].role != "" {
				role = e.st.messages[src].role // a "system" entry stays one
			}
		}
		// Items that came from one native message regroup into it ([tool, tool, user]).
		if n := len(groups); n > 0 && src >= 0 && groups[n-1].role == role && groups[n-1].last == src {
			groups[n-1].items = append(groups[n-1].items, k)
			continue
		}
		groups = append(groups, group{role: role, src: src, last: src, items: []int{k}})
	}

	// Roles must alternate: merge adjacent same-role messages, except two originals that
	// were already adjacent in the client's body.
	merged := groups[:0]
	for _, g := range groups {
		if n := len(merged); n > 0 && merged[n-1].role == g.role {
			prev := &merged[n-1]
			if !(prev.last >= 0 && g.src >= 0 && g.src == prev.last+1) {
				prev.items = append(prev.items, g.items...)
				if prev.src < 0 {
					prev.src = g.src
				}
				if g.last >= 0 {
					prev.last = g.last
				}
				continue
			}
		}
		merged = append(merged, g)
	}

	out := make([]string, len(merged))
	aligned := len(merged) == len(e.st.messages) // message i renders onto native message i
	same := aligned
	for i := range merged {
		raw, original, err := e.group(&merged[i])
		if err != nil {
			return "", false, err
		}
		out[i] = raw
		aligned = aligned && merged[i].src == i && e.st.messages[i].start >= 0
		same = same && original && merged[i].src == i
	}
	if same {
		return "", false, nil
	}
	if aligned {
		// Splice the changed messages into the original array, so even the whitespace
		// between untouched messages survives.
		var b strings.Builder
		b.Grow(len(e.st.array))
		prev := 0
		for i, nm := range e.st.messages {
			if out[i] == nm.raw {
				continue
			}
			b.WriteString(e.st.array[prev:nm.start])
			b.WriteString(out[i])
			prev = nm.end
		}
		b.WriteString(e.st.array[prev:])
		return b.String(), true, nil
	}
	return mapping.JoinArray(out), true, nil
}

// group renders one native message. original is true when it is a client message, whole
// and unchanged (its raw JSON is returned).
func (e *requestEncoder) group(g *group) (string, bool, error) {
	if g.src >= 0 && e.isOriginal(g) {
		return e.st.messages[g.src].raw, true, nil
	}
	var blocks []string
	for _, k := range g.items {
		bs, err := e.item(k)
		if err != nil {
			return "", false, err
		}
		blocks = append(blocks, bs...)
	}
	template := `{"role":"user","content":[]}`
	content := mapping.JoinArray(blocks)
	if g.src >= 0 {
		template = e.st.messages[g.src].raw
		// A string message whose text changed stays a string.
		if len(g.items) == 1 {
			it := &e.items[g.items[0]]
			if o, _ := e.origin(g.items[0]); o != nil && o.stringContent && len(it.Parts) == 1 &&
				(it.Role == ahp.RoleUser || it.Role == ahp.RoleAssistant) {
				if p := &it.Parts[0]; p.Kind == ahp.KindText && p.Text != nil && p.Category == "" {
					content = mapping.Quote(*p.Text)
				}
			}
		}
	}
	out, err := mapping.SetRaw(template, "content", content)
	if err != nil {
		return "", false, err
	}
	if gjson.Get(out, "role").String() != g.role {
		if out, err = mapping.SetRaw(out, "role", mapping.Quote(g.role)); err != nil {
			return "", false, err
		}
	}
	return out, false, nil
}

// isOriginal reports whether g is exactly the items decoded from native message g.src,
// in order and unchanged.
func (e *requestEncoder) isOriginal(g *group) bool {
	nm := &e.st.messages[g.src]
	if nm.count != len(g.items) {
		return false
	}
	for n, k := range g.items {
		i, ok := e.st.item(e.items[k].ID)
		if !ok || i != nm.first+n || !mapping.MessageEqual(&e.items[k], &e.st.items[i]) {
			return false
		}
	}
	return true
}

// item renders one canonical item as native content blocks.
func (e *requestEncoder) item(k int) ([]string, error) {
	it := &e.items[k]
	o, was := e.origin(k)
	if o != nil && o.native >= 0 && mapping.MessageEqual(it, was) {
		return o.blocks, nil
	}
	switch it.Role {
	case ahp.RoleTool:
		b, err := e.toolResult(it, o, was)
		if err != nil {
			return nil, err
		}
		return []string{b}, nil
	case ahp.RoleSystem, ahp.RoleDeveloper:
		if o != nil && o.native >= 0 && e.st.messages[o.native].role != "" {
			break // a native system entry of messages: its blocks render as they are
		}
		b, err := wrapInstruction(it)
		if err != nil {
			return nil, err
		}
		return []string{b}, nil
	}
	var blocks []string
	for j := range it.Parts {
		p := &it.Parts[j]
		b, ok, err := renderPart(p, e.st.part(p.ID))
		if err != nil {
			return nil, err
		}
		if ok {
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

// partIndex is the index of the part with the given id in m, or -1.
func partIndex(m *ahp.Message, id string) int {
	for n := range m.Parts {
		if m.Parts[n].ID == id {
			return n
		}
	}
	return -1
}

// wrapInstruction renders a system or developer message that is not part of the leading
// system prompt (an injection mid-conversation) as a clearly delimited user text block.
// Appending it to the top-level system prompt instead would move it out of its position
// and invalidate the provider's prompt cache for the whole conversation.
func wrapInstruction(m *ahp.Message) (string, error) {
	tag := m.Role + "-message"
	var texts []string
	for j := range m.Parts {
		p := &m.Parts[j]
		if p.Kind != ahp.KindText || p.Text == nil {
			return "", fmt.Errorf("anthropic: part %s: a %s message can only carry inline text", p.ID, m.Role)
		}
		texts = append(texts, *p.Text)
	}
	text := "<" + tag + ">\n" + strings.Join(texts, "\n") + "\n</" + tag + ">"
	return `{"type":"text","text":` + mapping.Quote(text) + `}`, nil
}

// toolResult renders a role-tool message onto its original tool_result block: tool_use_id,
// is_error, cache_control and unknown fields stay; only content is replaced.
func (e *requestEncoder) toolResult(it *ahp.Message, o *itemOrigin, was *ahp.Message) (string, error) {
	if o == nil || o.tool == nil {
		return "", fmt.Errorf("anthropic: tool message %s: no native tool_result to render it onto", it.ID)
	}
	t := o.tool
	var origText *string
	for j := range was.Parts {
		if was.Parts[j].ID == t.textPart {
			origText = was.Parts[j].Text
		}
	}

	// A string (or absent) content whose only text changed stays a string.
	if t.form != contentArray && len(it.Parts) == 1 {
		if p := &it.Parts[0]; p.Kind == ahp.KindText && p.Text != nil && p.Category != ahp.CategoryToolCall && p.Category != ahp.CategoryReasoning {
			if p.ID == t.textPart && mapping.PtrEqual(p.Text, origText) {
				return t.block, nil
			}
			return mapping.SetRaw(t.block, "content", mapping.Quote(*p.Text))
		}
	}

	// keptAt[n] is set when part n of the original message is present with its original
	// block; inOrder stays true while those parts keep their original relative order.
	var subs []string
	keptAt := make([]bool, len(was.Parts))
	inOrder, last := true, -1
	textRaw := "" // the edited text block, when it keeps its place
	keep := func(n int) {
		keptAt[n] = true
		inOrder = inOrder && n > last
		last = n
	}
	for j := range it.Parts {
		p := &it.Parts[j]
		if p.ID == t.textPart && (p.Text == nil || mapping.PtrEqual(p.Text, origText)) {
			subs = t.appendTextBlocks(subs)
			keep(0)
			continue
		}
		o := e.st.part(p.ID)
		if p.Kind == ahp.KindText && p.Text != nil && (p.Category == ahp.CategoryToolResult || p.Category == "") && o != nil && o.raw == "" {
			if p.ID == t.textPart && len(t.textBlocks) == 1 && *p.Text != "" {
				// One text block, edited (a redaction beside an image): it keeps its
				// place and its other members.
				b, err := mapping.SetRaw(t.textBlocks[0], "text", mapping.Quote(*p.Text))
				if err != nil {
					return "", err
				}
				subs = append(subs, b)
				textRaw = b
				keep(0)
				continue
			}
			// The joined result text, changed: one new text block replaces the originals.
			if *p.Text != "" {
				subs = append(subs, `{"type":"text","text":`+mapping.Quote(*p.Text)+`}`)
			}
			inOrder = false
			continue
		}
		b, ok, err := renderPart(p, o)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		subs = append(subs, b)
		n := partIndex(was, p.ID)
		if o == nil || b != o.raw || n <= 0 {
			inOrder = false
		} else {
			keep(n)
		}
	}
	if inOrder && keptAt[0] {
		// Only removals: keep the client's block order, text blocks where they were.
		subs = subs[:0]
		for _, sb := range t.order {
			switch {
			case sb.part == 0 && textRaw != "":
				subs = append(subs, textRaw)
			case keptAt[sb.part]:
				subs = append(subs, sb.raw)
			}
		}
	}
	return mapping.SetRaw(t.block, "content", mapping.JoinArray(subs))
}
