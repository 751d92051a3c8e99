package chat

import (
	"fmt"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// EncodeRequest implements mapping.Translator. Unchanged items return the original bytes;
// otherwise only the messages array is rebuilt, unchanged messages keep their original
// JSON, and every other top-level field stays byte-identical.
func (c *Chat) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	st, ok := req.Native.(*chatRequest)
	if !ok {
		return nil, fmt.Errorf("openai chat: request was not decoded by this translator")
	}
	if oaiwire.ItemsEqual(items, st.items) {
		return req.Original, nil
	}
	n := 2
	for _, m := range st.msgs {
		n += len(m.raw) + 1
	}
	buf := make([]byte, 0, n)
	buf = append(buf, '[')
	for i := range items {
		raw, err := st.renderMessage(&items[i], items)
		if err != nil {
			return nil, fmt.Errorf("openai chat: message %s: %w", items[i].ID, err)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, raw...)
	}
	buf = append(buf, ']')
	out, err := sjson.SetRawBytes(req.Original, "messages", buf)
	if err != nil {
		return nil, fmt.Errorf("openai chat: set messages: %w", err)
	}
	return out, nil
}

// renderMessage renders one canonical message natively. An unchanged message keeps its
// original bytes; an edited one is patched from its original (keeping fields such as
// "name"); a new one is built from scratch.
func (st *chatRequest) renderMessage(m *ahp.Message, items []ahp.Message) (string, error) {
	var orig *nativeMessage
	if i, ok := st.byID[m.ID]; ok && st.items[i].Role == m.Role {
		if oaiwire.MessagesEqual(m, &st.items[i]) {
			return st.msgs[i].raw, nil
		}
		orig = &st.msgs[i]
	}
	switch m.Role {
	case ahp.RoleSystem, ahp.RoleDeveloper, ahp.RoleUser:
		base := `{"role":"` + m.Role + `"}`
		if orig != nil {
			base = orig.raw
		}
		var entries []contentEntry
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Category == ahp.CategoryToolCall {
				return "", fmt.Errorf("part %s: a %s message cannot carry a tool call", p.ID, m.Role)
			}
			e, err := st.renderContentPart(p, "text")
			if err != nil {
				return "", err
			}
			entries = append(entries, e)
		}
		return sjson.SetRaw(base, "content", contentJSON(entries, orig != nil && orig.arrayContent, `""`))
	case ahp.RoleAssistant:
		return st.renderAssistant(m, orig)
	case ahp.RoleTool:
		return st.renderTool(m, orig, items)
	}
	return "", fmt.Errorf("unknown role %q", m.Role)
}

func (st *chatRequest) renderAssistant(m *ahp.Message, orig *nativeMessage) (string, error) {
	a, err := st.splitAssistant(m.Parts)
	if err != nil {
		return "", err
	}
	base := `{"role":"assistant"}`
	if orig != nil {
		base = orig.raw
	}
	entries := make([]contentEntry, 0, len(a.content))
	for _, p := range a.content {
		e, err := st.renderContentPart(p, "text")
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	empty := `""`
	if len(a.calls)+len(a.legacy)+len(a.refusal) > 0 {
		empty = "null" // the native shape of a message that only calls tools or refuses
	}
	raw, err := sjson.SetRaw(base, "content", contentJSON(entries, orig != nil && orig.arrayContent, empty))
	if err != nil {
		return "", err
	}
	return applyAssistantFields(raw, &a, false)
}

func (st *chatRequest) renderTool(m *ahp.Message, orig *nativeMessage, items []ahp.Message) (string, error) {
	var callID string
	switch {
	case orig != nil:
		callID = orig.toolCallID
	default:
		// A tool message hookproxy has not seen names its call by its id (the convention
		// DecodeRequest uses), and that call must exist.
		for _, c := range mapping.ToolCalls(items) {
			if c.ID == m.ID {
				callID = c.ID
				break
			}
		}
		if callID == "" && st.callByID(m.ID) != nil {
			callID = m.ID
		}
		if callID == "" {
			return "", fmt.Errorf("new tool message: its id names no tool call")
		}
	}
	var entries []contentEntry
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Category == ahp.CategoryToolCall {
			return "", fmt.Errorf("part %s: a tool message cannot carry a tool call", p.ID)
		}
		e, err := st.renderContentPart(p, "text")
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	if orig != nil && orig.role == "function" {
		// The deprecated function result takes a content string only.
		var text strings.Builder
		for i := range m.Parts {
			if m.Parts[i].Kind != ahp.KindText {
				return "", fmt.Errorf("part %s: a function result carries text only", m.Parts[i].ID)
			}
			text.WriteString(m.Parts[i].TextOf())
		}
		return sjson.SetRaw(orig.raw, "content", mapping.Quote(text.String()))
	}
	base := `{"role":"tool","tool_call_id":` + mapping.Quote(callID) + `}`
	if orig != nil {
		base = orig.raw
	}
	return sjson.SetRaw(base, "content", contentJSON(entries, orig != nil && orig.arrayContent, `""`))
}

// AttachmentData returns the bytes of an attachment part of a decoded request when the
// request carries them inline (a data URL or base64). It is an optional capability beside
// mapping.Translator, for the content upload binding (AHP spec, content-upload.md).
func (c *Chat) AttachmentData(req *mapping.Request, partID string) (mediaType string, data []byte, ok bool) {
	st, isChat := req.Native.(*chatRequest)
	if !isChat {
		return "", nil, false
	}
	np := st.part(partID)
	if np == nil || np.inline == nil || !np.inline.hasData {
		return "", nil, false
	}
	b, ok := np.inline.data.Bytes()
	if !ok {
		return "", nil, false
	}
	return np.canon.MediaType, b, true
}
