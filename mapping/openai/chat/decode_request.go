package chat

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

// chatRequest is the private state of a decoded chat request (mapping.Request.Native).
type chatRequest struct {
	natives
	msgs  []nativeMessage // parallel to items
	items []ahp.Message   // a private copy of Request.Items as decoded
	byID  map[string]int  // message id -> index in msgs
}

// nativeMessage is one original native message.
type nativeMessage struct {
	raw          string // the message's JSON, byte for byte
	role         string // native role ("function" for the deprecated function result)
	arrayContent bool   // content was an array
	toolCallID   string // tool and function messages: the call they answer
}

// DecodeRequest implements mapping.Translator.
func (c *Chat) DecodeRequest(body []byte) (*mapping.Request, error) {
	if err := oaiwire.CheckClientJSON(body); err != nil {
		return nil, &mapping.BadRequest{Reason: err.Error()}
	}
	// Every raw slice below aliases the body, which nobody writes to after this call.
	s := mapping.BytesString(body)
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, &mapping.BadRequest{Reason: "body is not a JSON object"}
	}
	top := mapping.TopMembers(root)
	msgs := top.Get("messages")
	if !msgs.IsArray() {
		return nil, &mapping.BadRequest{Reason: "body has no messages array"}
	}
	req := &mapping.Request{
		Model:       top.Get("model").String(),
		Stream:      top.Get("stream").Type == gjson.True,
		Params:      json.RawMessage(top.Without("messages")),
		PromptStart: -1,
		SessionHint: sessionHint(top),
		Original:    body,
	}
	n := strings.Count(msgs.Raw, `role"`) // about the number of messages (a rare first byte counts fast)
	st := &chatRequest{natives: newNativesFor(n), byID: make(map[string]int, n), msgs: make([]nativeMessage, 0, n)}
	st.strict = true // CheckClientJSON passed
	d := requestDecoder{st: st, req: req, slab: make([]ahp.Part, 0, n+n/4+4)}
	req.Items = make([]ahp.Message, 0, n)
	var derr error
	var mm messageFields
	// The messages residue (mapping.ResidueMembers), by message index, once one message
	// has one. Content entries are looked at only when the list names a remote or named
	// file at all, so that the common request pays nothing.
	var residue []string
	refs := strings.Contains(msgs.Raw, `url"`) || strings.Contains(msgs.Raw, `filename"`)
	st.arena.PickElements(msgs, messageFieldNames[:], mm[:], func(m gjson.Result) bool {
		r := ""
		if nm := mm[fName]; nm.Type == gjson.String {
			r = `{"name":` + nm.Raw + `}`
		}
		if refs {
			if c, ok := mapping.Residue(mm[fContent], entryResidue); ok {
				if r == "" {
					r = "{}"
				}
				r, _ = sjson.SetRaw(r, "content", c)
			}
		}
		if r != "" || residue != nil {
			if residue == nil {
				residue = make([]string, len(st.msgs), max(n, len(st.msgs)+1))
			}
			residue = append(residue, r)
		}
		derr = d.message(len(st.msgs), m, &mm)
		return derr == nil
	})
	if derr != nil {
		return nil, &mapping.BadRequest{Reason: derr.Error()}
	}
	if residue != nil {
		req.Params = json.RawMessage(withMessagesResidue(string(req.Params), residue))
	}
	for i := len(req.Items) - 1; i >= 0 && st.msgs[i].role == ahp.RoleUser; i-- {
		req.PromptStart = i
	}
	st.items = ahp.CloneMessages(req.Items)
	st.pointInto(st.items)
	req.Native = st
	return req, nil
}

// sessionHint picks the first native field that names the end user or conversation.
func sessionHint(top mapping.Members) string {
	for _, v := range [...]gjson.Result{
		top.Get("user"), top.Get("safety_identifier"), top.Get("prompt_cache_key"),
		top.Get("metadata").Get("session_id"),
	} {
		if v.Type == gjson.String && v.Str != "" {
			return v.Str
		}
	}
	return ""
}

// requestDecoder carries the decode of one request.
type requestDecoder struct {
	st  *chatRequest
	req *mapping.Request
	// calls seen so far by call id, for joining tool results to their calls.
	calls  map[string]*nativeCall
	legacy []string // ids of deprecated function calls, in order
	// slab backs the part lists of the messages: each message appends its parts after the
	// previous message's (begin, end), so a conversation's part lists share a few arrays.
	slab []ahp.Part
}

// uniqueID returns id, or a derived id when an earlier message already took it.
func (d *requestDecoder) uniqueID(id string, index int) string {
	for {
		if _, taken := d.st.byID[id]; !taken {
			return id
		}
		id += "~" + strconv.Itoa(index)
	}
}

// begin returns an empty part list for the next message, backed by the slab.
func (d *requestDecoder) begin() []ahp.Part {
	if len(d.slab) == cap(d.slab) {
		d.slab = make([]ahp.Part, 0, max(cap(d.slab), 8))
	}
	return d.slab[len(d.slab):len(d.slab)]
}

// end closes the part list of a message. When the list stayed in the slab, the slab keeps
// it and the list is capped, so that an append to it can never reach the next message's
// parts; a list that outgrew the slab has an array of its own.
func (d *requestDecoder) end(parts []ahp.Part) []ahp.Part {
	n := len(d.slab)
	if len(parts) > 0 && cap(d.slab) > n && &parts[0] == &d.slab[:n+1][n] {
		d.slab = d.slab[:n+len(parts)]
	}
	return parts[:len(parts):len(parts)]
}

// partID is the id of the n-th part of message msgID, held in the arena.
func (d *requestDecoder) partID(msgID string, n int) string {
	var b [64]byte
	id := strconv.AppendInt(append(append(b[:0], msgID...), ".p"...), int64(n), 10)
	return d.st.arena.String(id)
}

// textPart is a body-selected text part whose values are held in the arena.
func (d *requestDecoder) textPart(id, text, category string) ahp.Part {
	return ahp.Part{ID: id, Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody,
		Category: category, Text: d.st.arena.Text(text)}
}

// addPart records the origin of p, the part-th part of the message being decoded.
func (d *requestDecoder) addPart(p ahp.Part, np nativePart, part int) {
	d.st.addPartAt(p, np, len(d.st.msgs), part)
}

// where names a message in error texts; it is formatted only when an error is.
type where int

func (w where) String() string { return "messages[" + strconv.Itoa(int(w)) + "]" }

// entryFieldNames are the members of a content array entry the decoder reads first.
var entryFieldNames = [...]string{"type", "text", "refusal"}

// messageFieldNames are the members of a chat message the decoder reads; the f* constants
// index them in a messageFields.
var messageFieldNames = [...]string{fRole: "role", fContent: "content", fToolCallID: "tool_call_id",
	fName: "name", fReasoningContent: "reasoning_content", fReasoning: "reasoning", fRefusal: "refusal",
	fAudio: "audio", fToolCalls: "tool_calls", fFunctionCall: "function_call"}

const (
	fRole = iota
	fContent
	fToolCallID
	fName
	fReasoningContent
	fReasoning
	fRefusal
	fAudio
	fToolCalls
	fFunctionCall
	numMessageFields
)

// messageFields holds a message's members, indexed by the f* constants.
type messageFields [numMessageFields]gjson.Result

// message decodes message i, m, whose members the decoder reads are in mm.
func (d *requestDecoder) message(i int, m gjson.Result, mm *messageFields) error {
	where := where(i)
	if !m.IsObject() {
		return fmt.Errorf("%s is not an object", where)
	}
	roleV := mm[fRole]
	if roleV.Type != gjson.String {
		return fmt.Errorf("%s has no role", where)
	}
	nm := nativeMessage{raw: m.Raw, role: roleV.Str}
	msg := ahp.Message{Role: nm.role, Synthesized: true}
	var err error
	switch nm.role {
	case ahp.RoleSystem, ahp.RoleDeveloper, ahp.RoleUser:
		msg.ID = d.uniqueID(messageID(&d.st.arena, i, nm.role, m.Raw), i)
		msg.Parts, nm.arrayContent, err = d.content(mm[fContent], msg.ID, d.begin(), where)
	case ahp.RoleAssistant:
		msg.ID = d.uniqueID(messageID(&d.st.arena, i, nm.role, m.Raw), i)
		msg.Parts, nm.arrayContent, err = d.assistant(mm, msg.ID, where)
	case ahp.RoleTool:
		id := mm[fToolCallID]
		if id.Type != gjson.String || id.Str == "" {
			return fmt.Errorf("%s: tool message without tool_call_id", where)
		}
		nm.toolCallID = id.Str
		msg.Role = ahp.RoleTool
		msg.ID = d.uniqueID(id.Str, i)
		msg.Parts, nm.arrayContent, err = d.toolContent(mm[fContent], msg.ID, where)
	case "function":
		// Deprecated function result: it answers the latest function_call of that name.
		msg.Role = ahp.RoleTool
		msg.ID = d.uniqueID(messageID(&d.st.arena, i, nm.role, m.Raw), i)
		name := mm[fName].String()
		nm.toolCallID = msg.ID
		for j := len(d.legacy) - 1; j >= 0; j-- {
			if nc := d.calls[d.legacy[j]]; nc != nil && nc.name == name {
				nm.toolCallID = d.legacy[j]
				break
			}
		}
		// Its content is a string (or null): an array could carry parts a function result
		// has no way to render back.
		if c := mm[fContent]; c.Exists() && c.Type != gjson.String && c.Type != gjson.Null {
			return fmt.Errorf("%s: a function message's content must be a string", where)
		}
		msg.Parts, nm.arrayContent, err = d.toolContent(mm[fContent], msg.ID, where)
	default:
		return fmt.Errorf("%s: unknown role %q", where, nm.role)
	}
	if err != nil {
		return err
	}
	if msg.Role == ahp.RoleTool {
		tr := mapping.ToolResult{CallID: nm.toolCallID, ItemIndex: i}
		if nc := d.calls[nm.toolCallID]; nc != nil {
			tr.ToolName, tr.Input, tr.CallFound = nc.name, json.RawMessage(nc.input), true
		}
		d.req.ToolResults = append(d.req.ToolResults, tr)
	}
	msg.Parts = d.end(msg.Parts)
	d.st.byID[msg.ID] = len(d.st.msgs)
	d.st.msgs = append(d.st.msgs, nm)
	d.req.Items = append(d.req.Items, msg)
	return nil
}

// content decodes a content value (string, array of parts, or null) into parts appended to
// parts.
func (d *requestDecoder) content(v gjson.Result, msgID string, parts []ahp.Part, where where) ([]ahp.Part, bool, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return parts, false, nil
	case v.Type == gjson.String:
		p := d.textPart(d.partID(msgID, len(parts)), v.Str, "")
		d.addPart(p, nativePart{src: srcString}, len(parts))
		return append(parts, p), false, nil
	case !v.IsArray():
		return nil, false, fmt.Errorf("%s: content is neither a string nor an array", where)
	}
	var err error
	mapping.Elements(v, func(e gjson.Result) bool {
		var p ahp.Part
		p, err = d.contentEntry(e, d.partID(msgID, len(parts)), len(parts), where)
		if err == nil {
			parts = append(parts, p)
		}
		return err == nil
	})
	return parts, true, err
}

// contentEntry decodes one entry of a content array.
func (d *requestDecoder) contentEntry(e gjson.Result, id string, index int, where where) (ahp.Part, error) {
	if !e.IsObject() {
		return ahp.Part{}, fmt.Errorf("%s: content part is not an object", where)
	}
	np := nativePart{raw: e.Raw, src: srcAttachment}
	var p ahp.Part
	var f [3]gjson.Result // type, text, refusal: one pass over the entry
	d.st.arena.Pick(e, entryFieldNames[:], f[:])
	switch typ := f[0].String(); typ {
	case "text", "refusal":
		t := f[1]
		if typ == "refusal" {
			t = f[2]
		}
		if t.Type != gjson.String {
			return ahp.Part{}, fmt.Errorf("%s: %s part without %s string", where, typ, typ)
		}
		p = d.textPart(id, t.Str, "")
		np.src = srcText
		if typ == "refusal" {
			np.src = srcRefusal
		}
	case "image_url":
		u := e.Get("image_url.url")
		if !u.Exists() {
			u = e.Get("image_url") // a bare string in some clients
		}
		if u.Type != gjson.String || u.Str == "" {
			return ahp.Part{}, fmt.Errorf("%s: image_url part without url", where)
		}
		p = imagePart(id, u.Str, &np)
	case "input_audio":
		data := e.Get("input_audio.data")
		if data.Type != gjson.String {
			return ahp.Part{}, fmt.Errorf("%s: input_audio part without data", where)
		}
		p = audioPart(id, data.Str, e.Get("input_audio.format").String(), &np)
	case "file":
		var err error
		if p, err = filePart(e, id, "file.", &np); err != nil {
			return ahp.Part{}, fmt.Errorf("%s: %w", where, err)
		}
	default:
		// Content the canonical view cannot carry is named, not dropped: an opaque
		// attachment keeps its place (and its bytes on the way back) and a gap says why.
		p = ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: oaiwire.MediaOctetStream, Selection: ahp.SelectionMetadata}
		d.req.Gaps = append(d.req.Gaps, ahp.Gap{Path: "items",
			Reason: fmt.Sprintf("part %s: content part type %q not represented", id, typ)})
	}
	d.addPart(p, np, index)
	return p, nil
}

// assistant decodes an assistant message: reasoning, content, refusal, tool calls, in that
// order.
func (d *requestDecoder) assistant(m *messageFields, msgID string, where where) ([]ahp.Part, bool, error) {
	parts := d.begin()
	for _, f := range [...]int{fReasoningContent, fReasoning} {
		if r := m[f]; r.Type == gjson.String {
			p := d.textPart(d.partID(msgID, 0), r.Str, ahp.CategoryReasoning)
			d.addPart(p, nativePart{src: srcReasoning, field: messageFieldNames[f]}, 0)
			parts = append(parts, p)
			break
		}
	}
	parts, array, err := d.content(m[fContent], msgID, parts, where)
	if err != nil {
		return nil, false, err
	}
	if r := m[fRefusal]; r.Type == gjson.String {
		p := d.textPart(d.partID(msgID, len(parts)), r.Str, "")
		d.addPart(p, nativePart{src: srcRefusalField}, len(parts))
		parts = append(parts, p)
	}
	if a := m[fAudio]; a.IsObject() {
		// A reference to an earlier audio answer, held by the provider.
		d.req.Gaps = append(d.req.Gaps, ahp.Gap{Path: "items",
			Reason: "message " + msgID + ": assistant audio reference not represented"})
	}
	tcs := m[fToolCalls]
	if tcs.Exists() && tcs.Type != gjson.Null && !tcs.IsArray() {
		return nil, false, fmt.Errorf("%s: tool_calls is not an array", where)
	}
	var cf callFields
	d.st.arena.PickElements(tcs, callFieldNames[:], cf[:], func(e gjson.Result) bool {
		var p ahp.Part
		var gap *ahp.Gap
		p, gap, err = d.st.decodeCallFields(e, &cf, d.partID(msgID, len(parts)), "")
		if err != nil {
			err = fmt.Errorf("%s: %w", where, err)
			return false
		}
		d.noteCall(p, gap)
		parts = append(parts, p)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	if fc := m[fFunctionCall]; fc.Exists() && fc.Type != gjson.Null {
		p, gap, err := d.st.decodeLegacyCall(fc, d.partID(msgID, len(parts)))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", where, err)
		}
		d.noteCall(p, gap)
		d.legacy = append(d.legacy, d.st.lastCall().id)
		parts = append(parts, p)
	}
	return parts, array, nil
}

// noteCall remembers a call for the tool results that follow it.
func (d *requestDecoder) noteCall(p ahp.Part, gap *ahp.Gap) {
	if gap != nil {
		d.req.Gaps = append(d.req.Gaps, *gap)
	}
	nc := d.st.lastCall() // the call of p, just decoded
	if d.calls == nil {
		d.calls = make(map[string]*nativeCall, cap(d.st.callList))
	}
	// A later call with the same id wins: a result answers the nearest call before it.
	d.calls[nc.id] = nc
}

// toolContent decodes a tool result: one text part with category tool_result holding the
// content string (or the text entries joined), then any non-text entries.
func (d *requestDecoder) toolContent(v gjson.Result, msgID string, where where) ([]ahp.Part, bool, error) {
	if v.Type == gjson.String || !v.Exists() || v.Type == gjson.Null {
		p := d.textPart(d.partID(msgID, 0), v.Str, ahp.CategoryToolResult)
		d.addPart(p, nativePart{src: srcString}, 0)
		return append(d.begin(), p), false, nil
	}
	if !v.IsArray() {
		return nil, false, fmt.Errorf("%s: content is neither a string nor an array", where)
	}
	var text strings.Builder
	parts := append(d.begin(), ahp.Part{}) // slot 0 is the joined text
	var err error
	mapping.Elements(v, func(e gjson.Result) bool {
		var f [3]gjson.Result
		if e.IsObject() {
			d.st.arena.Pick(e, entryFieldNames[:], f[:])
		}
		if f[0].Type == gjson.String && f[0].Str == "text" {
			t := f[1]
			if t.Type != gjson.String {
				err = fmt.Errorf("%s: text part without text string", where)
				return false
			}
			text.WriteString(t.Str)
			return true
		}
		var p ahp.Part
		p, err = d.contentEntry(e, d.partID(msgID, len(parts)), len(parts), where)
		parts = append(parts, p)
		return err == nil
	})
	if err != nil {
		return nil, false, err
	}
	parts[0] = d.textPart(d.partID(msgID, 0), text.String(), ahp.CategoryToolResult)
	d.addPart(parts[0], nativePart{src: srcJoined}, 0)
	return parts, true, nil
}

// entryResidue is the residue of a content entry: a file's name and a remote file or
// image URL (inline data is the part itself).
func entryResidue(e gjson.Result) string {
	return mapping.PickStrings(e, mapping.RemoteReference, "file.filename", "file.file_url", "image_url.url", "image_url")
}

// withMessagesResidue adds to params the messages residue (mapping.ResidueMembers): a
// participant's name, file names and remote URLs are text the model or the provider reads
// that the canonical message has no place for, so policies read them with the params and
// hookproxy.redact_params patches them in place.
func withMessagesResidue(params string, residue []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range residue {
		if i > 0 {
			b.WriteByte(',')
		}
		if r == "" {
			r = "{}"
		}
		b.WriteString(r)
	}
	b.WriteByte(']')
	out, err := sjson.SetRaw(params, "messages", b.String())
	if err != nil {
		return params
	}
	return out
}
