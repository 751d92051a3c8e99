package responses

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Rendering effective canonical content back onto native items. Each effective message is
// cut into segments: the parts that came from one original native item render onto that
// item (unchanged → its original bytes; edited → patched with sjson, so unknown fields
// survive); parts without a native origin render as new items, or join the item before
// them when it can carry them (a text part after a message item becomes another entry of
// that message).

// segment is one native item to render.
type segment struct {
	item   int      // original native item index; -1 for a new item
	kind   itemKind // of a new item
	role   string   // of a new message item
	callID string   // of a new function_call_output
	parts  []*ahp.Part
}

// renderer renders segments. response selects output items (with ids and status, as the
// API returns them) over input items.
type renderer struct {
	n        *natives
	response bool
	seed     string // seeds the ids of new output items
	created  int    // new output items so far
}

// segments cuts the parts of one effective message. orig is the index of the original
// canonical message the parts may come from (-1 for a new message); callID names the call
// a new tool message answers.
func (r *renderer) segments(orig int, role, callID string, parts []ahp.Part) ([]segment, error) {
	var segs []segment
	var segOf map[int]int
	for i := range parts {
		p := &parts[i]
		if o := r.n.parts[p.ID]; o != nil && o.item >= 0 && orig >= 0 && r.n.items[o.item].msg == orig {
			if k, ok := segOf[o.item]; ok {
				segs[k].parts = append(segs[k].parts, p)
				continue
			}
			if segOf == nil {
				segOf = map[int]int{}
			}
			segOf[o.item] = len(segs)
			segs = append(segs, segment{item: o.item, parts: []*ahp.Part{p}})
			continue
		}
		if len(segs) > 0 && r.absorbs(&segs[len(segs)-1], p) {
			segs[len(segs)-1].parts = append(segs[len(segs)-1].parts, p)
			continue
		}
		if n := r.unusedItem(orig, segOf, p); n >= 0 {
			// An original item of the message that lost its own parts takes the new ones,
			// so that its other native fields survive a whole-message rewrite.
			if segOf == nil {
				segOf = map[int]int{}
			}
			segOf[n] = len(segs)
			segs = append(segs, segment{item: n, parts: []*ahp.Part{p}})
			continue
		}
		s, err := newSegment(role, callID, p)
		if err != nil {
			return nil, err
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// unusedItem returns an original native item of message orig that has no segment yet and
// can carry p, or -1.
func (r *renderer) unusedItem(orig int, used map[int]int, p *ahp.Part) int {
	if orig < 0 {
		return -1
	}
	for n := range r.n.items {
		if _, taken := used[n]; taken || r.n.items[n].msg != orig || r.n.items[n].kind == itemCall {
			continue
		}
		if r.absorbs(&segment{item: n}, p) {
			return n
		}
	}
	return -1
}

// absorbs reports whether a part without a native origin can join segment s.
func (r *renderer) absorbs(s *segment, p *ahp.Part) bool {
	kind, role := s.kind, s.role
	if s.item >= 0 {
		kind, role = r.n.items[s.item].kind, r.n.items[s.item].role
	}
	switch kind {
	case itemMessage:
		if p.Category == ahp.CategoryToolCall {
			return false
		}
		if role == ahp.RoleAssistant {
			return p.Kind == ahp.KindText && p.Category != ahp.CategoryReasoning
		}
		return true
	case itemCallOutput:
		return p.Category != ahp.CategoryToolCall
	case itemReasoning:
		return s.item >= 0 && p.Kind == ahp.KindText && p.Category == ahp.CategoryReasoning
	}
	return false
}

// newSegment starts a new native item for a part without a native origin.
func newSegment(role, callID string, p *ahp.Part) (segment, error) {
	s := segment{item: -1, role: role, callID: callID, parts: []*ahp.Part{p}}
	switch role {
	case ahp.RoleUser, ahp.RoleSystem, ahp.RoleDeveloper:
		if p.Category == ahp.CategoryToolCall {
			return s, fmt.Errorf("part %s: a %s message cannot carry a tool call", p.ID, role)
		}
		s.kind = itemMessage
	case ahp.RoleAssistant:
		switch {
		case p.Category == ahp.CategoryToolCall:
			s.kind = itemCall
		case p.Category == ahp.CategoryReasoning:
			// The provider accepts only reasoning items it produced itself.
			return s, fmt.Errorf("part %s: new reasoning cannot be rendered as a Responses reasoning item", p.ID)
		case p.Kind != ahp.KindText:
			return s, fmt.Errorf("part %s: an assistant message carries text and tool calls only", p.ID)
		default:
			s.kind = itemMessage
		}
	case ahp.RoleTool:
		if p.Category == ahp.CategoryToolCall {
			return s, fmt.Errorf("part %s: a tool message cannot carry a tool call", p.ID)
		}
		if callID == "" {
			return s, fmt.Errorf("part %s: a new tool message must take the id of the tool call it answers", p.ID)
		}
		s.kind = itemCallOutput
	default:
		return s, fmt.Errorf("unknown role %q", role)
	}
	return s, nil
}

// render renders one segment as a native item.
func (r *renderer) render(s *segment) (string, error) {
	if s.item < 0 {
		return r.renderNew(s)
	}
	it := &r.n.items[s.item]
	if r.unchangedItem(s, it) {
		return it.raw, nil
	}
	switch it.kind {
	case itemMessage:
		return r.renderMessage(it.raw, it.role, it.stringBody, s.parts)
	case itemCall:
		return r.renderCall(it.raw, it.typ, s.parts)
	case itemCallOutput:
		switch it.typ {
		case "shell_call_output":
			return r.renderShellOutput(it, s.item, s.parts)
		case "computer_call_output":
			return r.renderScreenshot(it, s.item, s.parts)
		case "mcp_call":
			return r.renderMCPCall(it, s.item, s.parts)
		}
		return r.renderOutput(it, s.item, s.parts)
	case itemReasoning:
		return r.renderReasoning(it.raw, s.item, s.parts)
	}
	return it.raw, nil
}

// unchangedItem reports whether a segment holds exactly the parts decoded from its item.
func (r *renderer) unchangedItem(s *segment, it *nativeItem) bool {
	if len(s.parts) != len(it.parts) {
		return false
	}
	for i, p := range s.parts {
		if p.ID != it.parts[i] || r.n.unchanged(p) == nil {
			return false
		}
	}
	return true
}

// renderNew builds a native item for parts that have none.
func (r *renderer) renderNew(s *segment) (string, error) {
	switch s.kind {
	case itemMessage:
		base := `{"type":"message","role":` + mapping.Quote(s.role) + `}`
		if r.response {
			base = `{"id":` + mapping.Quote(r.newID("msg_")) + `,"type":"message","status":"completed","role":"assistant"}`
		}
		// A new user-side message is written the way clients write one: a content string
		// when it is plain text.
		return r.renderMessage(base, s.role, !r.response && s.role != ahp.RoleAssistant, s.parts)
	case itemCall:
		return r.renderCall("", "function_call", s.parts)
	case itemCallOutput:
		// A new result answers its call in the call's own output type. Only the outputs
		// whose body is a string (or content entries) can be written without inventing
		// native facts (an exit code, a patch status, a screenshot).
		typ := "function_call_output"
		if c := r.n.callIDs[s.callID]; c != nil && c.typ != "function_call" {
			if c.typ != "custom_tool_call" {
				return "", fmt.Errorf("a new tool message answering the %s item %s cannot be rendered", c.typ, s.callID)
			}
			typ = "custom_tool_call_output"
		}
		it := nativeItem{raw: `{"type":"` + typ + `","call_id":` + mapping.Quote(s.callID) + `}`,
			kind: itemCallOutput, typ: typ, stringBody: true, msg: -1, callID: s.callID}
		return r.renderOutput(&it, -1, s.parts)
	}
	return "", fmt.Errorf("cannot render a new item of kind %d", s.kind)
}

// newID returns a deterministic id for a new output item.
func (r *renderer) newID(prefix string) string {
	r.created++
	return hashID(prefix+"hookproxy_", mapping.Quote(r.seed), strconv.Itoa(r.created))
}

// --- messages ---

// contentEntry is one rendered entry of a content array.
type contentEntry struct {
	raw  string
	text *string // set for a plain new text entry, which may collapse into a content string
}

// renderMessage renders a message item from parts by patching base.
func (r *renderer) renderMessage(base, role string, preferString bool, parts []*ahp.Part) (string, error) {
	entries := make([]contentEntry, 0, len(parts))
	for _, p := range parts {
		e, err := r.entry(p, role)
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	var content string
	switch {
	case len(entries) == 0 && preferString:
		content = `""`
	case len(entries) == 1 && entries[0].text != nil && preferString:
		content = mapping.Quote(*entries[0].text)
	default:
		var b strings.Builder
		b.WriteByte('[')
		for i, e := range entries {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(e.raw)
		}
		b.WriteByte(']')
		content = b.String()
	}
	return sjson.SetRaw(base, "content", content)
}

// entry renders a text or attachment part as a content entry.
func (r *renderer) entry(p *ahp.Part, role string) (contentEntry, error) {
	if p.Category == ahp.CategoryToolCall {
		return contentEntry{}, fmt.Errorf("part %s: a message item cannot carry a tool call", p.ID)
	}
	switch p.Kind {
	case ahp.KindAttachment:
		raw, err := r.attachment(p)
		return contentEntry{raw: raw}, err
	case ahp.KindText:
	default:
		return contentEntry{}, fmt.Errorf("part %s: unknown kind %q", p.ID, p.Kind)
	}
	o := r.n.parts[p.ID]
	if o != nil && o.raw != "" && (o.src == srcContentEntry || o.src == srcFileText) && oaiwire.PartsEqual(&o.canon, p) {
		return contentEntry{raw: o.raw}, nil
	}
	if p.Text == nil {
		return contentEntry{}, fmt.Errorf("part %s: a text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
	}
	text := *p.Text
	if o != nil && o.raw != "" && o.canon.Kind == ahp.KindText {
		// An edited entry keeps its other native fields.
		var raw string
		var err error
		switch {
		case o.src == srcFileText:
			raw, err = sjson.SetRaw(o.raw, "file_data", mapping.Quote(oaiwire.EncodeDataURL(o.fileType, text)))
		case o.src == srcContentEntry && o.entry == "refusal":
			raw, err = sjson.SetRaw(o.raw, "refusal", mapping.Quote(text))
		case o.src == srcContentEntry:
			raw, err = sjson.SetRaw(o.raw, "text", mapping.Quote(text))
			// Annotations and logprobs point into the old text.
			for _, f := range [...]string{"annotations", "logprobs"} {
				if err == nil && len(gjson.Get(raw, f).Array()) > 0 {
					raw, err = sjson.SetRaw(raw, f, "[]")
				}
			}
		}
		if err != nil {
			return contentEntry{}, fmt.Errorf("part %s: %w", p.ID, err)
		}
		if raw != "" {
			return contentEntry{raw: raw}, nil
		}
	}
	b := make([]byte, 0, len(text)+64)
	if role == ahp.RoleAssistant {
		b = append(b, `{"type":"output_text","text":`...)
		b = mapping.AppendQuote(b, text)
		b = append(b, `,"annotations":[]`...)
		if r.response {
			b = append(b, `,"logprobs":[]`...)
		}
	} else {
		b = append(b, `{"type":"input_text","text":`...)
		b = mapping.AppendQuote(b, text)
	}
	b = append(b, '}')
	return contentEntry{raw: string(b), text: &text}, nil
}

// attachment returns the original entry of an attachment part. Attachments are immutable
// references (AHP-EDIT-001): only one the body already carried, under the same id and
// media type, can be rendered.
func (r *renderer) attachment(p *ahp.Part) (string, error) {
	o := r.n.parts[p.ID]
	if o == nil || o.raw == "" || o.canon.Kind != ahp.KindAttachment || o.canon.MediaType != p.MediaType ||
		p.SHA256 != "" && o.canon.SHA256 != "" && p.SHA256 != o.canon.SHA256 {
		return "", fmt.Errorf("attachment part %s is not an unchanged original attachment", p.ID)
	}
	return o.raw, nil
}

// --- calls ---

// callArguments is the input of call c as normalized JSON; it must be a JSON object.
func callArguments(c mapping.ToolCall, partID string) (string, error) {
	in := strings.TrimSpace(string(c.Input))
	if in == "" {
		in = "{}"
	}
	if !json.Valid([]byte(in)) || !gjson.Parse(in).IsObject() {
		return "", fmt.Errorf("part %s: tool call %s input is not a JSON object", partID, c.ID)
	}
	return oaiwire.NormalizeJSON(in), nil
}

// patchCallItem renders call c (its input normalized as args) onto base, the call item
// decoded as orig: base itself when nothing changed, else base with c's name, input and
// id written in. The stream editor renders a judged call with it too.
func patchCallItem(base, typ string, orig *callOrigin, c mapping.ToolCall, args, partID string) (string, error) {
	if orig != nil && orig.id == c.ID && orig.name == c.Name && orig.input == args {
		return base, nil // the same call, written differently
	}
	origInput := "{}"
	if orig != nil && orig.typ == typ {
		origInput = orig.input
	}
	// modify(input) goes back onto the native item; its other members stay (tools.go).
	raw, err := writeCall(base, typ, c.Name, origInput, args)
	if err == nil {
		raw, err = sjson.SetRaw(raw, "call_id", mapping.Quote(c.ID))
	}
	if err != nil {
		return "", fmt.Errorf("part %s: tool call %s: %w", partID, c.ID, err)
	}
	return raw, nil
}

// renderCall renders a call item of type typ from its tool_call part. base is the original
// item, "" for a new one (always a function_call).
func (r *renderer) renderCall(base, typ string, parts []*ahp.Part) (string, error) {
	if len(parts) != 1 {
		return "", fmt.Errorf("a %s item carries exactly one tool call, got %d parts", typ, len(parts))
	}
	p := parts[0]
	orig := r.n.calls[p.ID]
	if base != "" && orig != nil && p.Text != nil && *p.Text == orig.text {
		return base, nil
	}
	c, ok := mapping.ParseToolCall(p)
	if !ok {
		return "", fmt.Errorf("part %s: tool_call text is not a {\"id\",\"name\",\"input\"} object", p.ID)
	}
	args, err := callArguments(c, p.ID)
	if err != nil {
		return "", err
	}
	if base != "" {
		return patchCallItem(base, typ, orig, c, args, p.ID)
	}
	b := make([]byte, 0, 96+len(c.ID)+len(c.Name)+len(args))
	if r.response {
		b = append(b, `{"id":`...)
		b = mapping.AppendQuote(b, r.newID("fc_"))
		b = append(b, `,"type":"function_call","status":"completed","arguments":`...)
	} else {
		b = append(b, `{"type":"function_call","arguments":`...)
	}
	b = mapping.AppendQuote(b, args)
	b = append(b, `,"call_id":`...)
	b = mapping.AppendQuote(b, c.ID)
	b = append(b, `,"name":`...)
	b = mapping.AppendQuote(b, c.Name)
	return string(append(b, '}')), nil
}

// --- call outputs ---

// renderOutput renders a function_call_output item (or a custom_tool_call_output,
// apply_patch_call_output or local_shell_call_output, whose output is the same string or
// entries): the text parts joined, and the attachments it keeps. An output that was a string stays a string while it is only text;
// an output array keeps its entries in their order, with the text entries replaced by one
// input_text entry when the text changed.
func (r *renderer) renderOutput(it *nativeItem, item int, parts []*ahp.Part) (string, error) {
	var text strings.Builder
	keep := map[string]bool{}
	var moved []string // attachments from elsewhere in the body
	for _, p := range parts {
		switch {
		case p.Category == ahp.CategoryToolCall:
			return "", fmt.Errorf("part %s: a tool message cannot carry a tool call", p.ID)
		case p.Kind == ahp.KindAttachment:
			raw, err := r.attachment(p)
			if err != nil {
				return "", err
			}
			if o := r.n.parts[p.ID]; o.item == item && o.src == srcOutputEntry {
				keep[p.ID] = true
			} else {
				moved = append(moved, raw)
			}
		case p.Text == nil:
			return "", fmt.Errorf("part %s: a text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
		default:
			text.WriteString(*p.Text)
		}
	}
	t := text.String()
	if it.stringBody && len(moved) == 0 {
		return sjson.SetRaw(it.raw, "output", mapping.Quote(t))
	}
	newText := `{"type":"input_text","text":` + mapping.Quote(t) + `}`
	var entries []string
	if it.stringBody {
		if t != "" {
			entries = append(entries, newText)
		}
	} else {
		origText := ""
		if len(it.parts) > 0 {
			origText = r.n.parts[it.parts[0]].canon.TextOf()
		}
		textDone := false
		j := 0 // index among the original non-text entries
		gjson.Get(it.raw, "output").ForEach(func(_, e gjson.Result) bool {
			if typ := e.Get("type").String(); typ == "input_text" || typ == "output_text" || typ == "text" {
				switch {
				case t == origText:
					entries = append(entries, e.Raw)
				case !textDone:
					entries = append(entries, newText)
				}
				textDone = true
				return true
			}
			j++
			if j < len(it.parts) && keep[it.parts[j]] {
				entries = append(entries, e.Raw)
			}
			return true
		})
		if !textDone && t != "" {
			entries = append([]string{newText}, entries...)
		}
	}
	entries = append(entries, moved...)
	return sjson.SetRaw(it.raw, "output", "["+strings.Join(entries, ",")+"]")
}

// renderShellOutput renders a shell_call_output: its text part's text written onto the
// output chunks (writeShellOutput). Attachments cannot go into shell output.
func (r *renderer) renderShellOutput(it *nativeItem, item int, parts []*ahp.Part) (string, error) {
	var text strings.Builder
	for _, p := range parts {
		switch {
		case p.Category == ahp.CategoryToolCall:
			return "", fmt.Errorf("part %s: a tool message cannot carry a tool call", p.ID)
		case p.Kind != ahp.KindText:
			return "", fmt.Errorf("part %s: a shell_call_output carries text only", p.ID)
		case p.Text == nil:
			return "", fmt.Errorf("part %s: a text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
		}
		text.WriteString(*p.Text)
	}
	if len(parts) == 1 {
		if o := r.n.parts[parts[0].ID]; o != nil && o.item == item && o.src == srcShellOutput && o.canon.TextOf() == text.String() {
			return it.raw, nil
		}
	}
	return writeShellOutput(it.raw, text.String())
}

// renderMCPCall renders an mcp_call input item from its effective parts: the text of the
// part decoded from its error goes back to error, every other text to output; every other
// member of the item stays. It carries text only. An error whose part is gone is cleared:
// what a policy took out must not stay behind in another member.
func (r *renderer) renderMCPCall(it *nativeItem, item int, parts []*ahp.Part) (string, error) {
	var out, errText strings.Builder
	hasErr := false
	for _, p := range parts {
		switch {
		case p.Category == ahp.CategoryToolCall:
			return "", fmt.Errorf("part %s: a tool message cannot carry a tool call", p.ID)
		case p.Kind != ahp.KindText:
			return "", fmt.Errorf("part %s: an mcp_call carries text only", p.ID)
		case p.Text == nil:
			return "", fmt.Errorf("part %s: a text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
		}
		if o := r.n.parts[p.ID]; o != nil && o.item == item && o.src == srcMCPError {
			errText.WriteString(*p.Text)
			hasErr = true
			continue
		}
		out.WriteString(*p.Text)
	}
	raw := it.raw
	var err error
	if o := gjson.Get(raw, "output"); o.Type == gjson.String || out.Len() > 0 {
		if raw, err = sjson.SetRaw(raw, "output", mapping.Quote(out.String())); err != nil {
			return "", err
		}
	}
	switch e := gjson.Get(raw, "error"); {
	case hasErr:
		raw, err = sjson.SetRaw(raw, "error", mapping.Quote(errText.String()))
	case e.Type == gjson.String && e.Str != "":
		raw, err = sjson.SetRaw(raw, "error", "null")
	}
	return raw, err
}

// renderScreenshot renders a computer_call_output, whose output is one screenshot: it
// stays while its attachment part does (attachments are immutable, AHP-EDIT-001), and an
// empty text part beside it (what a rewritten tool result carries) is nothing to write.
// An edited current_url goes back to where it came from; a removed one is removed.
func (r *renderer) renderScreenshot(it *nativeItem, item int, parts []*ahp.Part) (string, error) {
	kept := false
	out := it.raw
	var urls [len(currentURLPaths)]bool
	for _, p := range parts {
		o := r.n.parts[p.ID]
		switch {
		case p.Kind == ahp.KindAttachment && o != nil && o.item == item && o.src == srcScreenshot:
			if _, err := r.attachment(p); err != nil {
				return "", err
			}
			kept = true
		case p.Kind == ahp.KindText && o != nil && o.item == item && o.src == srcCurrentURL && p.Text != nil:
			for i, path := range currentURLPaths {
				if path == o.raw {
					urls[i] = true
				}
			}
			if *p.Text != o.canon.TextOf() {
				var err error
				if out, err = sjson.Set(out, o.raw, *p.Text); err != nil {
					return "", fmt.Errorf("part %s: %w", p.ID, err)
				}
			}
		case p.Kind == ahp.KindText && p.Category != ahp.CategoryToolCall && p.Text != nil && *p.Text == "":
		default:
			return "", fmt.Errorf("part %s: a computer_call_output carries its screenshot and current_url only", p.ID)
		}
	}
	if !kept {
		return "", fmt.Errorf("a computer_call_output cannot lose its screenshot")
	}
	for i, path := range currentURLPaths {
		if !urls[i] && gjson.Get(out, path).Exists() && gjson.Get(out, path).Type == gjson.String {
			var err error
			if out, err = sjson.Delete(out, path); err != nil {
				return "", err
			}
		}
	}
	return out, nil
}

// --- reasoning ---

// renderReasoning renders a reasoning item: edited summary and content texts are patched,
// reasoning text without an origin joins the summary, and the encrypted content stays only
// while its metadata part does — it can be removed, never edited.
func (r *renderer) renderReasoning(base string, item int, parts []*ahp.Part) (string, error) {
	var summary, content []string
	keepEnc := false
	for _, p := range parts {
		o := r.n.parts[p.ID]
		if o != nil && o.item != item {
			o = nil // a part moved here from another item is new to this one
		}
		if o != nil && o.src == srcEncrypted {
			if !oaiwire.PartsEqual(&o.canon, p) {
				return "", fmt.Errorf("part %s: encrypted reasoning cannot be edited", p.ID)
			}
			keepEnc = true
			continue
		}
		if p.Kind != ahp.KindText || p.Category != ahp.CategoryReasoning || p.Text == nil {
			return "", fmt.Errorf("part %s: a reasoning item carries reasoning text only", p.ID)
		}
		entry := `{"type":"summary_text","text":` + mapping.Quote(*p.Text) + `}`
		if o != nil {
			entry = o.raw
			if *p.Text != o.canon.TextOf() {
				var err error
				if entry, err = sjson.SetRaw(o.raw, "text", mapping.Quote(*p.Text)); err != nil {
					return "", fmt.Errorf("part %s: %w", p.ID, err)
				}
			}
			if o.src == srcReasoningText {
				content = append(content, entry)
				continue
			}
		}
		summary = append(summary, entry)
	}
	raw, err := sjson.SetRaw(base, "summary", "["+strings.Join(summary, ",")+"]")
	if err == nil && (len(content) > 0 || gjson.Get(base, "content").IsArray()) {
		raw, err = sjson.SetRaw(raw, "content", "["+strings.Join(content, ",")+"]")
	}
	if err == nil && !keepEnc && gjson.Get(base, "encrypted_content").Type == gjson.String {
		raw, err = sjson.Delete(raw, "encrypted_content")
	}
	return raw, err
}
