package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// partSource says where in a native chat message a canonical part came from, which is
// where an edited part goes back to.
type partSource uint8

const (
	srcString       partSource = iota // the message's content string
	srcText                           // a {"type":"text"} entry of a content array
	srcJoined                         // the joined text entries of a tool message
	srcRefusal                        // a {"type":"refusal"} entry of a content array
	srcRefusalField                   // the assistant's "refusal" string
	srcReasoning                      // the assistant's "reasoning_content" / "reasoning" string
	srcFileText                       // a "file" entry whose data URL holds text
	srcAttachment                     // image_url, input_audio, file and unknown entries
	srcAudioOutput                    // the "audio" object of a response message
)

// nativePart is the native origin of one canonical part. It is kept small: a long
// conversation has one per part on every request.
type nativePart struct {
	id    string // the canonical part's id
	raw   string // the array entry's JSON; "" for fields and content strings
	field string // srcReasoning: the field it came from; srcFileText: the file_data path
	// canon is the part as decoded, in a private copy, to tell an unchanged part from an
	// edit. A request's parts point into its private copy of the items (item and part say
	// where; pointInto sets canon); a response's own a copy each (ownedPart).
	canon      *ahp.Part
	inline     *inlineData // attachments with inline bytes, and srcFileText
	item, part int32
	src        partSource
}

// inlineData is what an attachment carried inline.
type inlineData struct {
	data     oaiwire.DataURL // the bytes (AttachmentData); unset for srcFileText
	hasData  bool            // data is set
	fileType string          // srcFileText: the data URL's media type
}

// ownedPart is the private copy of a part decoded outside a request's item list.
type ownedPart struct {
	part  ahp.Part
	store oaiwire.PartStore // what part's pointer fields point to
}

// callKind is the native form of a tool call.
type callKind uint8

const (
	callFunction callKind = iota // tool_calls entry of type "function"
	callCustom                   // tool_calls entry of type "custom" (free-form string input)
	callLegacy                   // deprecated function_call
)

// nativeCall is the native origin of one tool call.
type nativeCall struct {
	id     string
	partID string // the canonical tool_call part
	kind   callKind
	raw    string // the tool_calls entry, or the function_call object
	name   string
	input  string // compact JSON of the canonical input
	text   string // the canonical tool_call part text as decoded
}

// natives maps canonical parts back to native JSON. It is shared by request and response
// state. Calls are found by part id first: call ids are not always unique (some compatible
// servers number their calls per response), part ids are.
//
// Decoding only appends to lists; the maps that look parts and calls up by id are built on
// the first lookup. Most requests are forwarded unchanged and never look anything up, so a
// long conversation does not pay for three maps it will not use. A natives value belongs
// to one request or response and is used by one goroutine at a time.
type natives struct {
	partList []*nativePart
	callList []*nativeCall
	idx      *nativeIndex // nil until the first lookup
	// The decode's small values: strings and text pointers in arena, origin records in
	// slabs. A conversation of hundreds of messages then costs a few allocations per
	// request instead of several per message.
	arena    mapping.Arena
	strict   bool // decoding a body that passed the strict check: no object repeats a key
	partSlab []nativePart
	callSlab []nativeCall
}

type nativeIndex struct {
	parts   map[string]*nativePart
	calls   map[string]*nativeCall // by tool_call part id
	callIDs map[string]*nativeCall // by call id; the last call with that id
}

func newNatives() natives { return newNativesFor(0) }

// newNativesFor sizes the lists for about messages messages.
func newNativesFor(messages int) natives {
	parts := messages + messages/4 + 4 // a message has one part, sometimes two
	return natives{partList: make([]*nativePart, 0, parts), callList: make([]*nativeCall, 0, messages/4),
		partSlab: make([]nativePart, 0, parts), callSlab: make([]nativeCall, 0, max(messages/4, 2))}
}

// index returns the lookup maps, building them on first use.
func (n *natives) index() *nativeIndex {
	if n.idx == nil {
		x := &nativeIndex{parts: make(map[string]*nativePart, len(n.partList)),
			calls: make(map[string]*nativeCall, len(n.callList)), callIDs: make(map[string]*nativeCall, len(n.callList))}
		for _, np := range n.partList {
			x.parts[np.id] = np
		}
		for _, nc := range n.callList {
			x.calls[nc.partID], x.callIDs[nc.id] = nc, nc
		}
		n.idx = x
	}
	return n.idx
}

// part, call and callByID look origins up by part id, tool_call part id and call id.
func (n *natives) part(partID string) *nativePart     { return n.index().parts[partID] }
func (n *natives) call(partID string) *nativeCall     { return n.index().calls[partID] }
func (n *natives) callByID(callID string) *nativeCall { return n.index().callIDs[callID] }

// lastCall is the call added last.
func (n *natives) lastCall() *nativeCall { return n.callList[len(n.callList)-1] }

// newCall returns a zeroed call record from the slab; addCall lists it.
func (n *natives) newCall() *nativeCall {
	if len(n.callSlab) == cap(n.callSlab) {
		n.callSlab = make([]nativeCall, 0, max(2*cap(n.callSlab), 4))
	}
	n.callSlab = append(n.callSlab, nativeCall{})
	return &n.callSlab[len(n.callSlab)-1]
}

// addCall records the origin of a tool_call part.
func (n *natives) addCall(p ahp.Part, id string, nc *nativeCall) {
	nc.id, nc.text, nc.partID = id, p.TextOf(), p.ID
	n.callList = append(n.callList, nc)
	if n.idx != nil {
		n.idx.calls[p.ID], n.idx.callIDs[id] = nc, nc
	}
}

// addPart records the origin of p with a private copy of p.
func (n *natives) addPart(p ahp.Part, np nativePart) {
	own := new(ownedPart)
	own.part = own.store.Clone(p)
	np.canon = &own.part
	n.add(p.ID, np)
}

// addPartAt records the origin of p, part number part of item number item of a request;
// pointInto later points its canon at the request's private copy of the items.
func (n *natives) addPartAt(p ahp.Part, np nativePart, item, part int) {
	np.item, np.part = int32(item), int32(part)
	n.add(p.ID, np)
}

func (n *natives) add(id string, np nativePart) {
	if len(n.partSlab) == cap(n.partSlab) {
		n.partSlab = make([]nativePart, 0, max(2*cap(n.partSlab), 4))
	}
	np.id = id
	n.partSlab = append(n.partSlab, np)
	rec := &n.partSlab[len(n.partSlab)-1]
	n.partList = append(n.partList, rec)
	if n.idx != nil {
		n.idx.parts[id] = rec
	}
}

// pointInto sets the canon of the origins recorded by addPartAt to their parts in items, a
// private copy of the items as decoded. The place is checked: a part found elsewhere (a
// decoder bug, not an input error) is looked up by id instead.
func (n *natives) pointInto(items []ahp.Message) {
	for _, np := range n.partList {
		if np.canon != nil {
			continue
		}
		i, j := int(np.item), int(np.part)
		if i < len(items) && j < len(items[i].Parts) && items[i].Parts[j].ID == np.id {
			np.canon = &items[i].Parts[j]
			continue
		}
		if i < len(items) {
			for k := range items[i].Parts {
				if items[i].Parts[k].ID == np.id {
					np.canon = &items[i].Parts[k]
				}
			}
		}
		if np.canon == nil {
			np.canon = &ahp.Part{ID: np.id} // equal to no effective part: edits render from scratch
		}
	}
}

// unchanged returns the origin of p when p is exactly the part that was decoded.
func (n *natives) unchanged(p *ahp.Part) *nativePart {
	if np := n.part(p.ID); np != nil && oaiwire.PartsEqual(np.canon, p) {
		return np
	}
	return nil
}

// --- tool calls ---

// decodeCall reads one tool_calls entry. fallbackID names a call whose id is missing (only
// tolerated in upstream responses).
func (n *natives) decodeCall(entry gjson.Result, partID, fallbackID string) (ahp.Part, *ahp.Gap, error) {
	if !entry.IsObject() {
		return ahp.Part{}, nil, fmt.Errorf("tool call is not an object")
	}
	var f callFields
	if n.strict {
		n.arena.Pick(entry, callFieldNames[:], f[:]) // one pass over the entry
	} else {
		f = callFields{entry.Get("id"), entry.Get("type"), entry.Get("function"), entry.Get("custom")}
	}
	return n.decodeCallFields(entry, &f, partID, fallbackID)
}

// callFields holds the members of a tool_calls entry named by callFieldNames.
type callFields [4]gjson.Result

// decodeCallFields is decodeCall with the entry's members already read.
func (n *natives) decodeCallFields(entry gjson.Result, f *callFields, partID, fallbackID string) (ahp.Part, *ahp.Gap, error) {
	if !entry.IsObject() {
		return ahp.Part{}, nil, fmt.Errorf("tool call is not an object")
	}
	id := f[0].String()
	if id == "" {
		if fallbackID == "" {
			return ahp.Part{}, nil, fmt.Errorf("tool call without id")
		}
		id = fallbackID
	}
	nc := n.newCall()
	nc.raw = entry.Raw
	var gap *ahp.Gap
	typ := f[1].String()
	if typ == "" {
		typ = "function"
		if f[3].IsObject() {
			typ = "custom"
		}
	}
	var g [2]gjson.Result // name, and input or arguments
	switch typ {
	case "custom":
		nc.kind = callCustom
		n.pick(entry, f[3], "custom", customFieldNames[:], g[:])
		nc.name = g[0].String()
		if in := g[1]; in.Exists() && in.Type != gjson.String {
			return ahp.Part{}, nil, fmt.Errorf("tool call %s: custom.input is not a string", id)
		}
		nc.input = `{"input":` + mapping.Quote(g[1].Str) + `}`
	case "function":
		nc.kind = callFunction
		n.pick(entry, f[2], "function", functionFieldNames[:], g[:])
		nc.name = g[0].String()
		input, ok, err := oaiwire.ParseArguments(g[1])
		if err != nil {
			return ahp.Part{}, nil, fmt.Errorf("tool call %s: %w", id, err)
		}
		if !ok {
			gap = &ahp.Gap{Path: "items", Reason: "tool call " + id + " arguments not a JSON object"}
		}
		nc.input = input
	default:
		return ahp.Part{}, nil, fmt.Errorf("tool call %s: unsupported type %q", id, typ)
	}
	if nc.name == "" {
		return ahp.Part{}, nil, fmt.Errorf("tool call %s without a name", id)
	}
	mapping.NoteCallDecode()
	p := n.toolCallPart(partID, id, nc.name, nc.input)
	n.addCall(p, id, nc)
	return p, gap, nil
}

// pick reads names from obj, the member called field of entry. Strict JSON has one such
// member and obj is read in one pass; otherwise each name is looked up as gjson resolves
// the path field.name, which goes on to a later member of the same name when the first
// lacks the name (upstream JSON is not strict-checked and the streaming assembler reads it
// the same way).
func (n *natives) pick(entry, obj gjson.Result, field string, names []string, out []gjson.Result) {
	if n.strict {
		n.arena.Pick(obj, names, out)
		return
	}
	for j, name := range names {
		out[j] = entry.Get(field + "." + name)
	}
}

// The members of a tool_calls entry, and of its function and custom objects, that
// decodeCall reads.
var (
	callFieldNames     = [...]string{"id", "type", "function", "custom"}
	functionFieldNames = [...]string{"name", "arguments"}
	customFieldNames   = [...]string{"name", "input"}
)

// callType is the type of a tool_calls entry; without "type" it is "custom" when the entry
// has a custom object, else "function".
func callType(entry gjson.Result) string {
	switch typ := entry.Get("type").String(); {
	case typ != "":
		return typ
	case entry.Get("custom").IsObject():
		return "custom"
	}
	return "function"
}

// decodeLegacyCall reads a deprecated function_call object.
func (n *natives) decodeLegacyCall(fc gjson.Result, partID string) (ahp.Part, *ahp.Gap, error) {
	if !fc.IsObject() {
		return ahp.Part{}, nil, fmt.Errorf("function_call is not an object")
	}
	name := fc.Get("name").String()
	if name == "" {
		return ahp.Part{}, nil, fmt.Errorf("function_call without a name")
	}
	args := fc.Get("arguments")
	id := legacyCallID(name, args.String())
	input, ok, err := oaiwire.ParseArguments(args)
	if err != nil {
		return ahp.Part{}, nil, fmt.Errorf("function_call: %w", err)
	}
	var gap *ahp.Gap
	if !ok {
		gap = &ahp.Gap{Path: "items", Reason: "tool call " + id + " arguments not a JSON object"}
	}
	mapping.NoteCallDecode()
	p := n.toolCallPart(partID, id, name, input)
	nc := n.newCall()
	nc.kind, nc.raw, nc.name, nc.input = callLegacy, fc.Raw, name, input
	n.addCall(p, id, nc)
	return p, gap, nil
}

// toolCallPart is mapping.ToolCallPart with its text in the arena.
func (n *natives) toolCallPart(partID, id, name, input string) ahp.Part {
	p, _ := n.arena.ToolCallPart(partID, id, name, input)
	return p
}

// renderCall renders a tool_call part natively. An unchanged call keeps its original JSON;
// an edited one is patched (so unknown fields of the entry survive); a new one is a
// function call. legacy reports that the call belongs in function_call.
func (n *natives) renderCall(p *ahp.Part) (raw string, legacy bool, err error) {
	nc := n.call(p.ID)
	if nc != nil && p.Text != nil && *p.Text == nc.text {
		return nc.raw, nc.kind == callLegacy, nil
	}
	c, ok := mapping.ParseToolCall(p)
	if !ok {
		return "", false, fmt.Errorf("part %s: tool_call text is not a {\"id\",\"name\",\"input\"} object", p.ID)
	}
	if nc == nil || nc.id != c.ID {
		nc = n.callByID(c.ID) // a call moved to another part
	}
	return writeCall(nc, c, p.ID)
}

// writeCall renders call c as the native call nc with c's name and input patched in (nil:
// a new function call); the stream editor renders a judged call with it too.
func writeCall(nc *nativeCall, c mapping.ToolCall, partID string) (raw string, legacy bool, err error) {
	in := strings.TrimSpace(string(c.Input))
	if in == "" {
		in = "{}"
	}
	if !json.Valid([]byte(in)) || !gjson.Parse(in).IsObject() {
		return "", false, fmt.Errorf("part %s: tool call %s input is not a JSON object", partID, c.ID)
	}
	args := oaiwire.NormalizeJSON(in)
	if nc != nil && nc.name == c.Name && nc.input == args {
		return nc.raw, nc.kind == callLegacy, nil
	}
	if nc == nil {
		b := make([]byte, 0, 64+len(c.ID)+len(c.Name)+len(args))
		b = append(b, `{"id":`...)
		b = mapping.AppendQuote(b, c.ID)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = mapping.AppendQuote(b, c.Name)
		b = append(b, `,"arguments":`...)
		b = mapping.AppendQuote(b, args)
		return string(append(b, "}}"...)), false, nil
	}
	switch nc.kind {
	case callCustom:
		s := gjson.Get(args, "input")
		if s.Type != gjson.String {
			return "", false, fmt.Errorf("part %s: custom tool call %s needs input {\"input\": string}", partID, c.ID)
		}
		raw, err = setFields(nc.raw, "custom.name", mapping.Quote(c.Name), "custom.input", mapping.Quote(s.Str))
	case callLegacy:
		raw, err = setFields(nc.raw, "name", mapping.Quote(c.Name), "arguments", mapping.Quote(args))
	default:
		raw, err = setFields(nc.raw, "function.name", mapping.Quote(c.Name), "function.arguments", mapping.Quote(args))
	}
	return raw, nc.kind == callLegacy, err
}

// setFields sets raw JSON values at paths (path, value, path, value, ...).
func setFields(raw string, kv ...string) (string, error) {
	var err error
	for i := 0; i+1 < len(kv); i += 2 {
		if raw, err = sjson.SetRaw(raw, kv[i], kv[i+1]); err != nil {
			return "", fmt.Errorf("set %s: %w", kv[i], err)
		}
	}
	return raw, nil
}

// deleteIfPresent removes key from the object raw when it is there.
func deleteIfPresent(raw, key string) (string, error) {
	if !gjson.Get(raw, key).Exists() {
		return raw, nil
	}
	return sjson.Delete(raw, key)
}

// --- content arrays ---

// contentEntry is one rendered native content entry.
type contentEntry struct {
	raw  string
	text *string // set when the entry is plain text that may collapse into a content string
}

// renderContentPart renders a text or attachment part as a native content entry; a new text
// entry gets type textType ("text" in Chat Completions, "input_text"/"output_text" in
// Responses).
func (n *natives) renderContentPart(p *ahp.Part, textType string) (contentEntry, error) {
	switch p.Kind {
	case ahp.KindAttachment:
		// Attachments are immutable references (AHP-EDIT-001): only an attachment the
		// request already carried, under the same id, can be rendered back.
		np := n.part(p.ID)
		if np == nil || np.src != srcAttachment || np.canon.MediaType != p.MediaType ||
			p.SHA256 != "" && np.canon.SHA256 != "" && p.SHA256 != np.canon.SHA256 {
			return contentEntry{}, fmt.Errorf("attachment part %s is not an unchanged original attachment", p.ID)
		}
		return contentEntry{raw: np.raw}, nil
	case ahp.KindText:
	default:
		return contentEntry{}, fmt.Errorf("part %s: unknown kind %q", p.ID, p.Kind)
	}
	if np := n.unchanged(p); np != nil && np.raw != "" {
		return contentEntry{raw: np.raw}, nil
	}
	if p.Text == nil {
		return contentEntry{}, fmt.Errorf("part %s: text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
	}
	text := *p.Text
	if np := n.part(p.ID); np != nil && np.raw != "" {
		// An edited entry keeps its other native fields (cache_control, ...).
		var raw string
		var err error
		switch np.src {
		case srcText:
			raw, err = sjson.SetRaw(np.raw, "text", mapping.Quote(text))
		case srcRefusal:
			raw, err = sjson.SetRaw(np.raw, "refusal", mapping.Quote(text))
		case srcFileText:
			raw, err = sjson.SetRaw(np.raw, np.field, mapping.Quote(oaiwire.EncodeDataURL(np.inline.fileType, text)))
		}
		if err != nil {
			return contentEntry{}, fmt.Errorf("part %s: %w", p.ID, err)
		}
		if raw != "" {
			return contentEntry{raw: raw}, nil
		}
	}
	return contentEntry{raw: textEntry(textType, text), text: &text}, nil
}

// textEntry renders a new text content entry of the given type.
func textEntry(textType, text string) string {
	b := make([]byte, 0, len(text)+48)
	b = append(b, `{"type":`...)
	b = mapping.AppendQuote(b, textType)
	b = append(b, `,"text":`...)
	b = mapping.AppendQuote(b, text)
	if textType == "output_text" {
		b = append(b, `,"annotations":[]`...)
	}
	return string(append(b, '}'))
}

// contentJSON renders entries as a content value: a string when there is one plain text
// entry and the original message did not use an array, else an array; empty when there
// are no entries.
func contentJSON(entries []contentEntry, preferArray bool, empty string) string {
	if len(entries) == 0 {
		return empty
	}
	if len(entries) == 1 && entries[0].text != nil && !preferArray {
		return mapping.Quote(*entries[0].text)
	}
	n := 2
	for _, e := range entries {
		n += len(e.raw) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('[')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.raw)
	}
	b.WriteByte(']')
	return b.String()
}

// --- assistant messages ---

// assistantParts sorts the parts of an assistant message by native destination.
type assistantParts struct {
	reasoning      []string
	reasoningField string
	refusal        []string
	calls          []string
	legacy         []string
	content        []*ahp.Part // text and attachment parts, in order
}

func (n *natives) splitAssistant(parts []ahp.Part) (assistantParts, error) {
	var a assistantParts
	for i := range parts {
		p := &parts[i]
		if p.Category == ahp.CategoryToolCall {
			raw, legacy, err := n.renderCall(p)
			if err != nil {
				return a, err
			}
			if legacy {
				a.legacy = append(a.legacy, raw)
			} else {
				a.calls = append(a.calls, raw)
			}
			continue
		}
		np := n.part(p.ID)
		if p.Kind == ahp.KindText && (p.Category == ahp.CategoryReasoning || np != nil && np.src == srcRefusalField) {
			if p.Text == nil {
				return a, fmt.Errorf("part %s: text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
			}
			if p.Category == ahp.CategoryReasoning {
				a.reasoning = append(a.reasoning, *p.Text)
				if np != nil && np.src == srcReasoning && a.reasoningField == "" {
					a.reasoningField = np.field
				}
			} else {
				a.refusal = append(a.refusal, *p.Text)
			}
			continue
		}
		a.content = append(a.content, p)
	}
	if len(a.legacy) > 1 {
		return a, fmt.Errorf("an assistant message holds at most one deprecated function_call, got %d", len(a.legacy))
	}
	return a, nil
}

// applyAssistantFields writes reasoning, refusal and tool calls onto an assistant message.
// nullRefusal keeps an emptied refusal as null (the response shape) instead of deleting it.
func applyAssistantFields(raw string, a *assistantParts, nullRefusal bool) (string, error) {
	var err error
	if len(a.reasoning) > 0 {
		field := a.reasoningField
		if field == "" {
			field = "reasoning_content"
		}
		text := mapping.Quote(strings.Join(a.reasoning, ""))
		if raw, err = sjson.SetRaw(raw, field, text); err != nil {
			return "", err
		}
		// Servers that send both spellings get both updated, so neither goes stale.
		for _, other := range []string{"reasoning_content", "reasoning"} {
			if other != field && gjson.Get(raw, other).Type == gjson.String {
				if raw, err = sjson.SetRaw(raw, other, text); err != nil {
					return "", err
				}
			}
		}
	} else {
		for _, f := range []string{"reasoning_content", "reasoning"} {
			if gjson.Get(raw, f).Type == gjson.String {
				if raw, err = sjson.Delete(raw, f); err != nil {
					return "", err
				}
			}
		}
	}
	switch {
	case len(a.refusal) > 0:
		raw, err = sjson.SetRaw(raw, "refusal", mapping.Quote(strings.Join(a.refusal, "\n\n")))
	case nullRefusal:
		raw, err = sjson.SetRaw(raw, "refusal", "null")
	case gjson.Get(raw, "refusal").Type == gjson.String:
		raw, err = sjson.Delete(raw, "refusal") // an explicit null stays as the client wrote it
	}
	if err != nil {
		return "", err
	}
	if len(a.calls) > 0 {
		raw, err = sjson.SetRaw(raw, "tool_calls", "["+strings.Join(a.calls, ",")+"]")
	} else {
		raw, err = deleteIfPresent(raw, "tool_calls")
	}
	if err != nil {
		return "", err
	}
	if len(a.legacy) > 0 {
		raw, err = sjson.SetRaw(raw, "function_call", a.legacy[0])
	} else {
		raw, err = deleteIfPresent(raw, "function_call")
	}
	return raw, err
}
