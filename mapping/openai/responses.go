package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// ResponsesToolPath is the event path of tool calls seen through the Responses API.
const ResponsesToolPath = "hookproxy.openai.responses"

// Gap reasons of the Responses API.
const (
	gapServerHistory = "earlier context held by provider"
	gapServerPrompt  = "prompt template held by provider"
)

// Responses translates the OpenAI Responses API (POST /v1/responses). Like Chat it is
// stateless; per-request state lives in mapping.Request.Native and mapping.Response.Native.
//
// Request: "instructions" is a system message first in Items; every input item is one
// canonical message (message → its role; function_call and custom_tool_call → an
// assistant message with one tool_call part; function_call_output and
// custom_tool_call_output → a tool message; reasoning → an assistant message with reasoning
// parts). Other item types (hosted tool calls, item_reference, ...) are kept in place
// untouched and named in a gap. Server-held history (previous_response_id, conversation,
// a stored prompt) is a gap {path:"items", reason:"earlier context held by provider"}.
//
// Response: the whole output is one assistant message (id = response id) whose parts keep
// the native order: reasoning, text and refusals, tool calls. The finish reason is the
// response status ("completed"), or the incomplete_details reason when incomplete.
type Responses struct{}

var _ mapping.Translator = (*Responses)(nil)

// NewResponses returns the Responses API translator.
func NewResponses() *Responses { return &Responses{} }

// Provider implements mapping.Translator.
func (*Responses) Provider() string { return Provider }

// ToolPath implements mapping.Translator.
func (*Responses) ToolPath() string { return ResponsesToolPath }

// TerminalFinishReason implements mapping.Translator: a Responses turn that ended normally
// has status "completed".
func (*Responses) TerminalFinishReason() string { return "completed" }

// ErrorBody implements mapping.Translator; the Responses API uses the same error envelope
// as Chat Completions.
func (*Responses) ErrorBody(status int, errType, code, message string) []byte {
	return errorBody(errType, code, message)
}

// Input item kinds the canonical view represents.
const (
	kindMessage      = "message"
	kindFunctionCall = "function_call"
	kindCustomCall   = "custom_tool_call"
	kindFunctionOut  = "function_call_output"
	kindCustomOut    = "custom_tool_call_output"
	kindReasoning    = "reasoning"
)

// responsesRequest is the private state of a decoded Responses request.
type responsesRequest struct {
	natives
	entries     []inputEntry
	items       []ahp.Message // a private copy of Request.Items as decoded
	byID        map[string]int
	itemEntry   []int // items index -> entries index; -1 for the instructions
	inputString bool  // "input" was a plain string
}

// inputEntry is one original native input item.
type inputEntry struct {
	raw          string
	kind         string // one of the kind constants, "" for an item kept opaque
	role         string // message role
	arrayContent bool
	callID       string // outputs: the call they answer
}

// DecodeRequest implements mapping.Translator.
func (r *Responses) DecodeRequest(body []byte) (*mapping.Request, error) {
	s := string(body)
	if err := checkClientJSON(body, s); err != nil {
		return nil, &mapping.BadRequest{Reason: err.Error()}
	}
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, &mapping.BadRequest{Reason: "body is not a JSON object"}
	}
	params, err := sjson.Delete(s, "input")
	if err == nil {
		params, err = deleteIfPresent(params, "instructions")
	}
	if err != nil {
		return nil, &mapping.BadRequest{Reason: "cannot separate params: " + err.Error()}
	}
	req := &mapping.Request{
		Model:       root.Get("model").String(),
		Stream:      root.Get("stream").Type == gjson.True,
		Params:      json.RawMessage(params),
		PromptStart: -1,
		SessionHint: responsesSessionHint(root),
		Original:    body,
	}
	st := &responsesRequest{natives: newNatives(), byID: map[string]int{}}
	d := responsesDecoder{st: st, req: req, used: map[string]bool{}}
	if v := root.Get("previous_response_id"); v.Type == gjson.String && v.Str != "" || root.Get("conversation").Exists() && root.Get("conversation").Type != gjson.Null {
		req.Gaps = append(req.Gaps, ahp.Gap{Path: "items", Reason: gapServerHistory})
	}
	if p := root.Get("prompt"); p.IsObject() {
		req.Gaps = append(req.Gaps, ahp.Gap{Path: "items", Reason: gapServerPrompt})
	}
	if in := root.Get("instructions"); in.Exists() && in.Type != gjson.Null {
		if in.Type != gjson.String {
			return nil, &mapping.BadRequest{Reason: "instructions is not a string"}
		}
		id := d.uniqueID(messageID(-1, "instructions", in.Raw), -1)
		p := ahp.TextPart(partID(id, 0), in.Str)
		st.addPart(p, nativePart{src: srcString})
		d.add(ahp.Message{ID: id, Role: ahp.RoleSystem, Parts: []ahp.Part{p}, Synthesized: true}, -1)
	}
	switch input := root.Get("input"); {
	case input.Type == gjson.String:
		st.inputString = true
		raw := `{"role":"user","content":` + input.Raw + `}`
		st.entries = append(st.entries, inputEntry{raw: raw, kind: kindMessage, role: ahp.RoleUser})
		id := d.uniqueID(messageID(0, ahp.RoleUser, raw), 0)
		p := ahp.TextPart(partID(id, 0), input.Str)
		st.addPart(p, nativePart{src: srcString})
		d.add(ahp.Message{ID: id, Role: ahp.RoleUser, Parts: []ahp.Part{p}, Synthesized: true}, 0)
	case input.IsArray():
		var derr error
		input.ForEach(func(_, it gjson.Result) bool {
			derr = d.item(len(st.entries), it)
			return derr == nil
		})
		if derr != nil {
			return nil, &mapping.BadRequest{Reason: derr.Error()}
		}
	case !input.Exists() || input.Type == gjson.Null:
		// A request may rely entirely on server-held context (previous_response_id, prompt).
	default:
		return nil, &mapping.BadRequest{Reason: "input is neither a string nor an array"}
	}
	for i := len(req.Items) - 1; i >= 0 && req.Items[i].Role == ahp.RoleUser && st.itemEntry[i] >= 0 &&
		st.entries[st.itemEntry[i]].kind == kindMessage; i-- {
		req.PromptStart = i
	}
	st.items = cloneItems(req.Items)
	req.Native = st
	return req, nil
}

// responsesSessionHint picks the conversation id, else the fields Chat uses.
func responsesSessionHint(root gjson.Result) string {
	if c := root.Get("conversation"); c.Type == gjson.String && c.Str != "" {
		return c.Str
	} else if id := c.Get("id"); id.Type == gjson.String && id.Str != "" {
		return id.Str
	}
	return sessionHint(root)
}

// responsesDecoder carries the decode of one Responses request.
type responsesDecoder struct {
	st   *responsesRequest
	req  *mapping.Request
	used map[string]bool
	// calls seen so far, for joining outputs to their calls.
	callNames  map[string]string
	callInputs map[string]json.RawMessage
}

func (d *responsesDecoder) uniqueID(id string, index int) string {
	for d.used[id] {
		id += "~" + strconv.Itoa(index)
	}
	d.used[id] = true
	return id
}

// add appends a canonical message that came from entries[entry] (-1: instructions).
func (d *responsesDecoder) add(m ahp.Message, entry int) {
	if m.Parts == nil {
		m.Parts = []ahp.Part{}
	}
	d.st.byID[m.ID] = len(d.req.Items)
	d.st.itemEntry = append(d.st.itemEntry, entry)
	d.req.Items = append(d.req.Items, m)
}

// itemID is the message id of an input item: its native id when it has a fresh one,
// else a derived id.
func (d *responsesDecoder) itemID(i int, it gjson.Result, kind string) (string, bool) {
	if id := it.Get("id"); id.Type == gjson.String && id.Str != "" && !d.used[id.Str] {
		d.used[id.Str] = true
		return id.Str, false
	}
	return d.uniqueID(messageID(i, kind, it.Raw), i), true
}

func (d *responsesDecoder) item(i int, it gjson.Result) error {
	where := "input[" + strconv.Itoa(i) + "]"
	if !it.IsObject() {
		return fmt.Errorf("%s is not an object", where)
	}
	e := inputEntry{raw: it.Raw, kind: it.Get("type").String()}
	if e.kind == "" && it.Get("role").Exists() {
		e.kind = kindMessage // an EasyInputMessage may omit its type
	}
	d.st.entries = append(d.st.entries, e)
	entry := &d.st.entries[len(d.st.entries)-1]
	switch e.kind {
	case kindMessage:
		role := it.Get("role")
		switch role.Str {
		case ahp.RoleSystem, ahp.RoleDeveloper, ahp.RoleUser, ahp.RoleAssistant:
		default:
			return fmt.Errorf("%s: unknown message role %q", where, role.Str)
		}
		id, synth := d.itemID(i, it, role.Str)
		entry.role = role.Str
		textType := "input_text"
		if role.Str == ahp.RoleAssistant {
			textType = "output_text"
		}
		parts, array, err := d.content(it.Get("content"), id, nil, where, textType)
		if err != nil {
			return err
		}
		entry.arrayContent = array
		d.add(ahp.Message{ID: id, Role: role.Str, Parts: parts, Synthesized: synth}, i)
	case kindFunctionCall, kindCustomCall:
		id, synth := d.itemID(i, it, e.kind)
		p, gap, err := d.st.decodeResponsesCall(it, partID(id, 0), "")
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if gap != nil {
			d.req.Gaps = append(d.req.Gaps, *gap)
		}
		nc := d.st.calls[p.ID]
		if d.callNames == nil {
			d.callNames, d.callInputs = map[string]string{}, map[string]json.RawMessage{}
		}
		d.callNames[nc.id], d.callInputs[nc.id] = nc.name, json.RawMessage(nc.input)
		d.add(ahp.Message{ID: id, Role: ahp.RoleAssistant, Parts: []ahp.Part{p}, Synthesized: synth}, i)
	case kindFunctionOut, kindCustomOut:
		callID := it.Get("call_id")
		if callID.Type != gjson.String || callID.Str == "" {
			return fmt.Errorf("%s: %s without call_id", where, e.kind)
		}
		entry.callID = callID.Str
		id, synth := d.itemID(i, it, e.kind)
		if synth && !d.used[callID.Str] {
			// Like Chat, an output without a native id is named after its call.
			delete(d.used, id)
			id = d.uniqueID(callID.Str, i)
		}
		parts, array, err := d.output(it.Get("output"), id, where)
		if err != nil {
			return err
		}
		entry.arrayContent = array
		idx := len(d.req.Items)
		d.add(ahp.Message{ID: id, Role: ahp.RoleTool, Parts: parts, Synthesized: true}, i)
		tr := mapping.ToolResult{CallID: callID.Str, ItemIndex: idx}
		if name, ok := d.callNames[callID.Str]; ok {
			tr.ToolName, tr.Input, tr.CallFound = name, d.callInputs[callID.Str], true
		}
		d.req.ToolResults = append(d.req.ToolResults, tr)
	case kindReasoning:
		id, synth := d.itemID(i, it, e.kind)
		parts := d.st.decodeReasoning(it, id, nil)
		d.add(ahp.Message{ID: id, Role: ahp.RoleAssistant, Parts: parts, Synthesized: synth}, i)
	default:
		// Kept in place byte for byte; the canonical view cannot carry it.
		entry.kind = ""
		typ := e.kind
		if typ == "" {
			typ = "(untyped)"
		}
		d.req.Gaps = append(d.req.Gaps, ahp.Gap{Path: "items", Reason: fmt.Sprintf("%s: input item type %q not represented", where, typ)})
	}
	return nil
}

// content decodes a message content value (string or array of content parts).
func (d *responsesDecoder) content(v gjson.Result, msgID string, parts []ahp.Part, where, textType string) ([]ahp.Part, bool, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return parts, false, nil
	case v.Type == gjson.String:
		p := ahp.TextPart(partID(msgID, len(parts)), v.Str)
		d.st.addPart(p, nativePart{src: srcString})
		return append(parts, p), false, nil
	case !v.IsArray():
		return nil, false, fmt.Errorf("%s: content is neither a string nor an array", where)
	}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		var p ahp.Part
		var gap *ahp.Gap
		p, gap, err = d.st.responsesEntry(e, partID(msgID, len(parts)))
		if err != nil {
			err = fmt.Errorf("%s: %w", where, err)
			return false
		}
		if gap != nil {
			d.req.Gaps = append(d.req.Gaps, *gap)
		}
		parts = append(parts, p)
		return true
	})
	return parts, true, err
}

// output decodes a function/custom call output: a string, or content parts whose text is
// joined into one tool_result part (attachments follow it), as in Chat.
func (d *responsesDecoder) output(v gjson.Result, msgID, where string) ([]ahp.Part, bool, error) {
	if v.Type == gjson.String || !v.Exists() || v.Type == gjson.Null {
		p := textPart(partID(msgID, 0), v.Str, ahp.CategoryToolResult)
		d.st.addPart(p, nativePart{src: srcString})
		return []ahp.Part{p}, false, nil
	}
	if !v.IsArray() {
		return nil, false, fmt.Errorf("%s: output is neither a string nor an array", where)
	}
	var text strings.Builder
	parts := []ahp.Part{{}}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		if t := e.Get("type").String(); e.IsObject() && (t == "input_text" || t == "output_text" || t == "text") {
			text.WriteString(e.Get("text").String())
			return true
		}
		var p ahp.Part
		var gap *ahp.Gap
		p, gap, err = d.st.responsesEntry(e, partID(msgID, len(parts)))
		if err != nil {
			err = fmt.Errorf("%s: %w", where, err)
			return false
		}
		if gap != nil {
			d.req.Gaps = append(d.req.Gaps, *gap)
		}
		parts = append(parts, p)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	parts[0] = textPart(partID(msgID, 0), text.String(), ahp.CategoryToolResult)
	d.st.addPart(parts[0], nativePart{src: srcJoined})
	return parts, true, nil
}

// responsesEntry decodes one content part of a Responses message.
func (n *natives) responsesEntry(e gjson.Result, id string) (ahp.Part, *ahp.Gap, error) {
	if !e.IsObject() {
		return ahp.Part{}, nil, fmt.Errorf("content part is not an object")
	}
	np := nativePart{raw: e.Raw, src: srcAttachment}
	var p ahp.Part
	var gap *ahp.Gap
	switch typ := e.Get("type").String(); typ {
	case "input_text", "output_text", "text", "summary_text", "reasoning_text":
		t := e.Get("text")
		if t.Type != gjson.String {
			return ahp.Part{}, nil, fmt.Errorf("%s part without text string", typ)
		}
		p, np.src = ahp.TextPart(id, t.Str), srcText
	case "refusal":
		t := e.Get("refusal")
		if t.Type != gjson.String {
			return ahp.Part{}, nil, fmt.Errorf("refusal part without refusal string")
		}
		p, np.src = ahp.TextPart(id, t.Str), srcRefusal
	case "input_image":
		switch u, fid := e.Get("image_url"), e.Get("file_id"); {
		case u.Type == gjson.String && u.Str != "":
			p = imagePart(id, u.Str, &np)
		case fid.Type == gjson.String && fid.Str != "":
			p = gapAttachment(id, "image/*", gapProviderID)
		default:
			return ahp.Part{}, nil, fmt.Errorf("input_image part without image_url or file_id")
		}
	case "input_file":
		var err error
		if p, err = filePart(e, id, "", &np); err != nil {
			return ahp.Part{}, nil, err
		}
	case "input_audio":
		data := e.Get("input_audio.data")
		if data.Type != gjson.String {
			return ahp.Part{}, nil, fmt.Errorf("input_audio part without data")
		}
		p = audioPart(id, data.Str, e.Get("input_audio.format").String(), &np)
	default:
		p = ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaOctetStream, Selection: ahp.SelectionMetadata}
		gap = &ahp.Gap{Path: "items", Reason: fmt.Sprintf("part %s: content part type %q not represented", id, typ)}
	}
	n.addPart(p, np)
	return p, gap, nil
}

// decodeResponsesCall reads a function_call or custom_tool_call item. The call id is the
// item's call_id, which outputs refer to; fallbackID names a call without one (tolerated in
// upstream responses only).
func (n *natives) decodeResponsesCall(it gjson.Result, partID, fallbackID string) (ahp.Part, *ahp.Gap, error) {
	id := it.Get("call_id").String()
	if id == "" {
		if fallbackID == "" {
			return ahp.Part{}, nil, fmt.Errorf("tool call without call_id")
		}
		id = fallbackID
	}
	nc := nativeCall{raw: it.Raw, name: it.Get("name").String()}
	var gap *ahp.Gap
	if it.Get("type").String() == kindCustomCall {
		in := it.Get("input")
		if in.Exists() && in.Type != gjson.String {
			return ahp.Part{}, nil, fmt.Errorf("tool call %s: input is not a string", id)
		}
		nc.kind, nc.input = callCustom, `{"input":`+jsonString(in.Str)+`}`
	} else {
		input, ok := parseArguments(it.Get("arguments"))
		if !ok {
			gap = &ahp.Gap{Path: "items", Reason: "tool call " + id + " arguments not a JSON object"}
		}
		nc.kind, nc.input = callFunction, input
	}
	if nc.name == "" {
		return ahp.Part{}, nil, fmt.Errorf("tool call %s without a name", id)
	}
	p := mapping.ToolCallPart(partID, mapping.ToolCall{ID: id, Name: nc.name, Input: json.RawMessage(nc.input)})
	n.addCall(p, id, &nc)
	return p, gap, nil
}

// decodeReasoning turns a reasoning item into reasoning parts: summary texts, then
// reasoning texts, then encrypted content as a metadata part (its text is not readable,
// and none is invented).
func (n *natives) decodeReasoning(it gjson.Result, msgID string, parts []ahp.Part) []ahp.Part {
	for _, field := range []string{"summary", "content"} {
		it.Get(field).ForEach(func(_, e gjson.Result) bool {
			t := e.Get("text")
			if !e.IsObject() || t.Type != gjson.String {
				return true
			}
			p := textPart(partID(msgID, len(parts)), t.Str, ahp.CategoryReasoning)
			n.addPart(p, nativePart{src: srcText, raw: e.Raw, field: field})
			parts = append(parts, p)
			return true
		})
	}
	if enc := it.Get("encrypted_content"); enc.Type == gjson.String && enc.Str != "" {
		p := ahp.Part{ID: partID(msgID, len(parts)), Kind: ahp.KindText, MediaType: ahp.MediaTypeText,
			Selection: ahp.SelectionMetadata, Category: ahp.CategoryReasoning}
		n.addPart(p, nativePart{src: srcReasoning, field: "encrypted_content"})
		parts = append(parts, p)
	}
	return parts
}

// EncodeRequest implements mapping.Translator. Unchanged items return the original bytes;
// otherwise "input" (and "instructions") are rebuilt: unchanged items keep their original
// JSON, items the canonical view does not carry stay where they were, and every other
// top-level field stays byte-identical.
func (r *Responses) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	st, ok := req.Native.(*responsesRequest)
	if !ok {
		return nil, fmt.Errorf("openai responses: request was not decoded by this translator")
	}
	if itemsEqual(items, st.items) {
		return req.Original, nil
	}
	out := string(req.Original)
	var instructions *ahp.Message
	var rendered []string
	nextOpaque := 0 // opaque entries before this index are placed
	placeOpaque := func(upTo int) {
		for ; nextOpaque < upTo && nextOpaque < len(st.entries); nextOpaque++ {
			if st.entries[nextOpaque].kind == "" {
				rendered = append(rendered, st.entries[nextOpaque].raw)
			}
		}
	}
	for i := range items {
		m := &items[i]
		idx, known := st.byID[m.ID]
		if known && st.itemEntry[idx] < 0 {
			instructions = m
			continue
		}
		if known {
			// Opaque items keep their place before the original item that followed them.
			placeOpaque(st.itemEntry[idx])
		}
		raws, err := st.renderItem(m, idx, known, items)
		if err != nil {
			return nil, fmt.Errorf("openai responses: message %s: %w", m.ID, err)
		}
		rendered = append(rendered, raws...)
	}
	placeOpaque(len(st.entries))

	var err error
	if instructions != nil {
		idx := st.byID[instructions.ID]
		if !messagesEqual(instructions, &st.items[idx]) {
			var text strings.Builder
			for _, p := range instructions.Parts {
				if p.Kind != ahp.KindText || p.Text == nil {
					return nil, fmt.Errorf("openai responses: instructions carry text only (part %s)", p.ID)
				}
				text.WriteString(*p.Text)
			}
			out, err = sjson.SetRaw(out, "instructions", jsonString(text.String()))
		}
	} else if len(st.itemEntry) > 0 && st.itemEntry[0] < 0 {
		out, err = sjson.Delete(out, "instructions") // a hook removed the system prompt
	}
	if err != nil {
		return nil, fmt.Errorf("openai responses: instructions: %w", err)
	}
	input := "[" + strings.Join(rendered, ",") + "]"
	if st.inputString && len(rendered) == 1 {
		// A plain-string prompt stays a string while it is one plain user text.
		if r := gjson.Parse(rendered[0]); r.Get("role").Str == ahp.RoleUser && r.Get("content").Type == gjson.String &&
			len(r.Map()) == 2 {
			input = r.Get("content").Raw
		}
	}
	if out, err = sjson.SetRaw(out, "input", input); err != nil {
		return nil, fmt.Errorf("openai responses: set input: %w", err)
	}
	return []byte(out), nil
}

// renderItem renders one canonical message as native input items (an assistant message
// may need several: reasoning, message, calls).
func (st *responsesRequest) renderItem(m *ahp.Message, idx int, known bool, items []ahp.Message) ([]string, error) {
	var orig *inputEntry
	if known && st.items[idx].Role == m.Role {
		e := &st.entries[st.itemEntry[idx]]
		if messagesEqual(m, &st.items[idx]) {
			return []string{e.raw}, nil
		}
		orig = e
	}
	switch m.Role {
	case ahp.RoleSystem, ahp.RoleDeveloper, ahp.RoleUser:
		raw, err := st.renderMessageItem(m.Role, m.Parts, orig, "input_text")
		return []string{raw}, err
	case ahp.RoleAssistant:
		return st.renderAssistantItems(m, orig)
	case ahp.RoleTool:
		raw, err := st.renderOutputItem(m, orig, items)
		return []string{raw}, err
	}
	return nil, fmt.Errorf("unknown role %q", m.Role)
}

// renderMessageItem renders text and attachment parts as a message item, patching the
// original message item when there is one.
func (st *responsesRequest) renderMessageItem(role string, parts []ahp.Part, orig *inputEntry, textType string) (string, error) {
	var entries []contentEntry
	for i := range parts {
		p := &parts[i]
		if p.Category == ahp.CategoryToolCall {
			return "", fmt.Errorf("part %s: a %s message cannot carry a tool call", p.ID, role)
		}
		e, err := st.renderContentPart(p, textType)
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	base := `{"type":"message","role":` + jsonString(role) + `}`
	preferArray := false
	if orig != nil && orig.kind == kindMessage {
		base, preferArray = orig.raw, orig.arrayContent
	}
	return sjson.SetRaw(base, "content", contentJSON(entries, preferArray, `""`))
}

// renderAssistantItems renders an assistant message: a reasoning item, a message item and
// one item per tool call, each present only when the message has such parts.
func (st *responsesRequest) renderAssistantItems(m *ahp.Message, orig *inputEntry) ([]string, error) {
	var reasoning, content, calls []ahp.Part
	for _, p := range m.Parts {
		switch {
		case p.Category == ahp.CategoryToolCall:
			calls = append(calls, p)
		case p.Category == ahp.CategoryReasoning:
			reasoning = append(reasoning, p)
		default:
			content = append(content, p)
		}
	}
	var out []string
	if len(reasoning) > 0 {
		var base string
		if orig != nil && orig.kind == kindReasoning {
			base = orig.raw
		}
		raw, err := st.renderReasoning(base, reasoning)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	if len(content) > 0 {
		var o *inputEntry
		if orig != nil && orig.kind == kindMessage {
			o = orig
		}
		raw, err := st.renderMessageItem(ahp.RoleAssistant, content, o, "output_text")
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	for i := range calls {
		raw, err := st.renderResponsesCall(&calls[i], "")
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// renderResponsesCall renders a tool_call part as a function_call or custom_tool_call item.
// extra is appended to a new item (the status field of response output items).
func (n *natives) renderResponsesCall(p *ahp.Part, extra string) (string, error) {
	nc := n.calls[p.ID]
	if nc != nil && p.Text != nil && *p.Text == nc.text {
		return nc.raw, nil
	}
	c, ok := mapping.ParseToolCall(p)
	if !ok {
		return "", fmt.Errorf("part %s: tool_call text is not a {\"id\",\"name\",\"input\"} object", p.ID)
	}
	in := strings.TrimSpace(string(c.Input))
	if in == "" {
		in = "{}"
	}
	if !json.Valid([]byte(in)) || !gjson.Parse(in).IsObject() {
		return "", fmt.Errorf("part %s: tool call %s input is not a JSON object", p.ID, c.ID)
	}
	args := normalizeJSON(in)
	if nc == nil || nc.id != c.ID {
		nc = n.callIDs[c.ID]
	}
	if nc != nil && nc.name == c.Name && nc.input == args {
		return nc.raw, nil
	}
	if nc == nil {
		return `{"type":"function_call","call_id":` + jsonString(c.ID) + `,"name":` + jsonString(c.Name) +
			`,"arguments":` + jsonString(args) + extra + `}`, nil
	}
	if nc.kind == callCustom {
		s := gjson.Get(args, "input")
		if s.Type != gjson.String {
			return "", fmt.Errorf("part %s: custom tool call %s needs input {\"input\": string}", p.ID, c.ID)
		}
		return setFields(nc.raw, "name", jsonString(c.Name), "input", jsonString(s.Str))
	}
	return setFields(nc.raw, "name", jsonString(c.Name), "arguments", jsonString(args))
}

// renderReasoning patches (or, without base, refuses to create) a reasoning item from its
// reasoning parts. Reasoning items carry provider ids and signatures, so hookproxy can edit
// and drop their text but not invent one.
func (n *natives) renderReasoning(base string, parts []ahp.Part) (string, error) {
	if base == "" {
		return "", fmt.Errorf("part %s: a reasoning item cannot be created", parts[0].ID)
	}
	fields := map[string][]string{"summary": nil, "content": nil}
	keepEncrypted := false
	for i := range parts {
		p := &parts[i]
		np := n.parts[p.ID]
		switch {
		case np != nil && np.field == "encrypted_content":
			if n.unchanged(p) == nil {
				return "", fmt.Errorf("part %s: encrypted reasoning cannot be edited", p.ID)
			}
			keepEncrypted = true
		case p.Text == nil:
			return "", fmt.Errorf("part %s: text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
		case np != nil && np.raw != "":
			raw, err := sjson.SetRaw(np.raw, "text", jsonString(*p.Text))
			if err != nil {
				return "", err
			}
			fields[np.field] = append(fields[np.field], raw)
		default:
			fields["summary"] = append(fields["summary"], textEntry("summary_text", *p.Text))
		}
	}
	raw := base
	var err error
	for _, f := range []string{"summary", "content"} {
		switch {
		case len(fields[f]) > 0:
			raw, err = sjson.SetRaw(raw, f, "["+strings.Join(fields[f], ",")+"]")
		case f == "summary":
			raw, err = sjson.SetRaw(raw, f, "[]") // summary is required
		default:
			raw, err = deleteIfPresent(raw, f)
		}
		if err != nil {
			return "", err
		}
	}
	if !keepEncrypted {
		if raw, err = deleteIfPresent(raw, "encrypted_content"); err != nil {
			return "", err
		}
	}
	return raw, nil
}

// renderOutputItem renders a tool message as a function_call_output (or
// custom_tool_call_output) item.
func (st *responsesRequest) renderOutputItem(m *ahp.Message, orig *inputEntry, items []ahp.Message) (string, error) {
	var entries []contentEntry
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Category == ahp.CategoryToolCall {
			return "", fmt.Errorf("part %s: a tool message cannot carry a tool call", p.ID)
		}
		e, err := st.renderContentPart(p, "input_text")
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	if orig != nil && (orig.kind == kindFunctionOut || orig.kind == kindCustomOut) {
		return sjson.SetRaw(orig.raw, "output", contentJSON(entries, orig.arrayContent, `""`))
	}
	// A tool message hookproxy has not seen names its call by its id.
	kind := ""
	for _, c := range mapping.ToolCalls(items) {
		if c.ID == m.ID {
			kind = kindFunctionOut
		}
	}
	if nc := st.callIDs[m.ID]; nc != nil {
		kind = kindFunctionOut
		if nc.kind == callCustom {
			kind = kindCustomOut
		}
	}
	if kind == "" {
		return "", fmt.Errorf("new tool message: its id names no tool call")
	}
	return `{"type":"` + kind + `","call_id":` + jsonString(m.ID) + `,"output":` + contentJSON(entries, false, `""`) + `}`, nil
}

// AttachmentData returns the inline bytes of an attachment part of a decoded request, as
// Chat.AttachmentData does.
func (r *Responses) AttachmentData(req *mapping.Request, partID string) (mediaType string, data []byte, ok bool) {
	st, isResponses := req.Native.(*responsesRequest)
	if !isResponses {
		return "", nil, false
	}
	np := st.parts[partID]
	if np == nil || !np.hasData {
		return "", nil, false
	}
	b, ok := np.data.bytes()
	if !ok {
		return "", nil, false
	}
	return np.canon.MediaType, b, true
}
