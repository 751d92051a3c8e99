package anthropic

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// requestState is Request.Native: what DecodeRequest saw, so EncodeRequest can tell what
// changed and copy everything else byte for byte.
type requestState struct {
	// items is Request.Items as decoded: a private copy after a fresh decode, the same
	// read-only list after a resumed one.
	items    []ahp.Message
	origins  []itemOrigin    // parallel to items
	parts    []origin        // every decoded part's native block, in decode order
	messages []nativeMessage // the native messages array
	array    string          // its raw JSON
	system   int             // index in items of the system message, -1 when none
	// systemString: the native system prompt was a string, not a block array.
	systemString bool

	// ids looks items and parts up by id. Most requests are forwarded unchanged and never
	// look anything up, so it is built on the first lookup rather than during the decode.
	indexOnce sync.Once
	ids       map[string]idRef
}

// idRef locates an id: 1 + the index of the item in requestState.items, 1 + the index of
// the part origin in requestState.parts; 0 when the id names no item (part). Message and
// part ids are separate name spaces ("tr-a.p0" can be both), so one entry holds both.
type idRef struct{ item, part int32 }

// lookup returns where id was decoded.
func (st *requestState) lookup(id string) idRef {
	st.indexOnce.Do(st.buildIndex)
	return st.ids[id]
}

// buildIndex maps every item and part id; a later duplicate wins.
func (st *requestState) buildIndex() {
	m := make(map[string]idRef, len(st.items)+len(st.parts))
	for i := range st.items {
		r := m[st.items[i].ID]
		r.item = int32(i) + 1
		m[st.items[i].ID] = r
	}
	for k := range st.parts {
		id := st.parts[k].part.ID
		r := m[id]
		r.part = int32(k) + 1
		m[id] = r
	}
	st.ids = m
}

// item returns the index in items of the item decoded with the given id.
func (st *requestState) item(id string) (int, bool) {
	r := st.lookup(id)
	return int(r.item) - 1, r.item > 0
}

// part returns the origin of the part decoded with the given id, or nil.
func (st *requestState) part(id string) *origin {
	if r := st.lookup(id); r.part > 0 {
		return &st.parts[r.part-1]
	}
	return nil
}

// pointInto points the part origins from the from-th on at their parts in the private
// copy of the items.
func (st *requestState) pointInto(from int) {
	for k := from; k < len(st.parts); k++ {
		o := &st.parts[k]
		o.part = &st.items[o.item].Parts[o.at]
	}
}

// nativeMessage is one element of the native messages array.
type nativeMessage struct {
	raw        string
	role       string // the native role when it is not user or assistant (Claude Code's "system" entries), else ""
	start, end int    // span of raw in requestState.array, or -1 when unknown
	// The canonical items decoded from it are items[first:first+count], in order.
	first, count int
}

// itemOrigin says where a canonical item came from.
type itemOrigin struct {
	native int      // index in requestState.messages; -1 for the system message
	blocks []string // the item's native content blocks, in order
	// stringContent: the item is a whole native message (or system prompt) whose content
	// was a string, which stays a string when only its text changes.
	stringContent bool
	tool          *toolOrigin // tool results only
}

// toolOrigin is the native side of a role-tool message: one tool_result block.
type toolOrigin struct {
	block    string // the tool_result block
	form     int    // contentAbsent, contentString or contentArray
	textPart string // id of the part holding the result text
	// str is a non-empty string content as written (contentString); it stands for one
	// text block, built only when an encode needs it.
	str        string
	textBlocks []string // contentArray: the text blocks joined into that part, as native blocks
	order      []toolSub
}

// appendTextBlocks appends the native text blocks joined into the text part to subs.
func (t *toolOrigin) appendTextBlocks(subs []string) []string {
	if t.str != "" {
		return append(subs, `{"type":"text","text":`+t.str+`}`)
	}
	return append(subs, t.textBlocks...)
}

// toolSub is one element of an array tool_result content, in native order.
type toolSub struct {
	raw  string
	part int // index of its own part in the tool message; 0 (the joined text) for text blocks
}

const (
	contentAbsent = iota
	contentString
	contentArray
)

// badRequest builds the 400 error for a client body.
func badRequest(format string, args ...any) error {
	return &mapping.BadRequest{Reason: fmt.Sprintf(format, args...)}
}

// DecodeRequest parses a Messages request into canonical items (AHP-CONTENT-001). A
// request that repeats the messages of one decoded before (an agent re-sending its
// conversation) resumes that decode and decodes only what is new (resume.go); the result
// is the same.
func (*Messages) DecodeRequest(body []byte) (*mapping.Request, error) {
	if req := resumeDecode(body); req != nil {
		return req, nil
	}
	return decodeFresh(body, true)
}

// decodeFresh decodes the whole request; remember stores the decode in the memo of
// decodes (resume.go).
func decodeFresh(body []byte, remember bool) (*mapping.Request, error) {
	// Every raw value below aliases the body, which nobody writes to after this call.
	s := mapping.BytesString(body)
	if err := checkJSON(s); err != nil {
		return nil, badRequest("%v", err)
	}
	parsed := gjson.Parse(s)
	if !parsed.IsObject() {
		return nil, badRequest("body must be a JSON object")
	}
	root := mapping.TopMembers(parsed)
	msgs := root.Get("messages")
	if !msgs.Exists() {
		return nil, badRequest("messages is required")
	}
	if !msgs.IsArray() {
		return nil, badRequest("messages must be an array")
	}

	d := newRequestDecoder(len(msgs.Raw))
	if sys := root.Get("system"); sys.Exists() && sys.Type != gjson.Null {
		if err := d.system(sys); err != nil {
			return nil, err
		}
	}
	d.st.array = msgs.Raw
	var err error
	var mf messageFields
	d.arena.PickElements(msgs, messageFieldNames[:], mf[:], func(m gjson.Result) bool {
		d.done = m.Index - msgs.Index + len(m.Raw)
		d.mark()
		err = d.message(len(d.st.messages), m, &mf)
		if err == nil {
			// gjson reports absolute offsets; keep the span only if it checks out.
			nm := &d.st.messages[len(d.st.messages)-1]
			nm.start, nm.end = m.Index-msgs.Index, m.Index-msgs.Index+len(m.Raw)
			if m.Index <= 0 || nm.start < 0 || nm.end > len(msgs.Raw) || msgs.Raw[nm.start:nm.end] != m.Raw {
				nm.start, nm.end = -1, -1
			}
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	d.mark()
	req := &mapping.Request{
		Items:       d.items,
		Gaps:        d.gaps,
		ToolResults: d.results,
		PromptStart: promptStart(d.items),
		Original:    body,
		Native:      d.st,
	}
	if v := root.Get("model"); v.Type == gjson.String {
		req.Model = v.Str
	}
	req.Stream = root.Get("stream").Type == gjson.True
	if v := root.Get("metadata").Get("user_id"); v.Type == gjson.String {
		req.SessionHint = v.Str
	}
	params := []byte(root.Without("messages", "system"))
	params = params[:len(params):len(params)]
	req.Params = params
	if d.residue {
		d.residueEntries = appendResidue(nil, msgs.Raw)
		req.Params = withResidue(req.Params, d.residueEntries)
	}
	// The array located in the body (gjson counts Index from the start of the text).
	p := msgs.Index
	remember = remember && p > 0 && p+len(msgs.Raw) <= len(s) && s[p:p+len(msgs.Raw)] == msgs.Raw &&
		len(d.st.messages) >= minRemembered && spansKnown(d.st.messages)
	own := int64(len(body))
	if remember {
		own += holdTexts(d.items)
	}
	d.st.items = ahp.CloneMessages(d.items)
	d.st.pointInto(0)
	if remember {
		o := outside{head: s[:p], tail: s[p+len(msgs.Raw):], model: req.Model, hint: req.SessionHint,
			stream: req.Stream, params: params}
		if sys := root.Get("system"); sys.Exists() && sys.Type != gjson.Null {
			o.hasSystem, o.systemRaw = true, sys.Raw
		}
		m := d.st.messages
		d.remember(resumes.key(msgs.Raw[:m[1].end]), []string{msgs.Raw[:m[len(m)-1].end]}, o, own)
	}
	return req, nil
}

// promptStart is the index of the trailing run of user messages, the new prompt of this
// request; -1 when the request ends with tool results or an assistant prefill.
func promptStart(items []ahp.Message) int {
	i := len(items)
	for i > 0 && items[i-1].Role == ahp.RoleUser {
		i--
	}
	if i == len(items) {
		return -1
	}
	return i
}

// requestDecoder carries the decode of one request. An agent's request repeats its whole
// conversation, hundreds of messages, on every call, so the values decoding makes per
// message go to a few shared places: strings (unescaped text, ids, tool_call texts) and
// text pointers to an arena, part lists and native block lists to slabs, and the scratch
// lists of the message being decoded are reused.
type requestDecoder struct {
	blockReader
	arena   mapping.Arena
	st      *requestState
	items   []ahp.Message
	results []mapping.ToolResult
	gaps    []ahp.Gap
	gapSeen map[string]bool // gap reasons already listed (since base, when resuming)
	// calls holds, by call id, the tool_use blocks seen so far (an index into callList)
	// and whether a tool result message already took the id "tr-"+call id (resuming: the
	// ids met since base; ref looks further).
	calls    map[string]callRef
	callList []seenCall
	// marks holds the decoder's counts before each native message (mark).
	marks []mark
	// base is the earlier decode this one resumes, at cut (its marks at native message
	// cut.msgs); nil for a decode from the start.
	base *snapshot
	cut  mark
	h    idHash // reset for each id
	// residue is set once a block of the messages may give the messages residue
	// (blockFields.mayHaveResidue): without one the residue pass is skipped.
	residue bool
	// residueEntries are the native messages' residue entries, when residue is set.
	residueEntries []string

	partSlab slab[ahp.Part]
	strSlab  slab[string]
	toolSlab slab[toolOrigin]
	subSlab  slab[toolSub]
	inputs   []byte // copies of call inputs handed out as ToolResult.Input
	inputsN  int    // bytes allocated for them

	// done is how much of the messages array (total bytes) has been reached: the end of
	// the native message being decoded.
	done, total int

	// Scratch of the item being decoded: its blocks and their raw JSON, and a tool
	// result's text values, text blocks and native order.
	run        []decodedBlock
	raws       []string
	texts      []string
	textBlocks []string
	order      []toolSub
}

// callRef is what requestDecoder.calls holds for a call id.
type callRef struct {
	call int32 // 1 + index in callList of the latest tool_use block with the id; 0 for none
	// answer is 1 + the native message of the first tool result, which took the id
	// "tr-"+call id; 0 for none.
	answer int32
}

// seenCall is a tool_use block seen before the tool results that answer it.
type seenCall struct {
	id, name, input string
	raw             json.RawMessage // input as handed out (ToolResult.Input), made on first use
	msg             int32           // the native message holding the block
	prev            int32           // the callRef.call of the id before this block
}

// mark is the decoder's counts at a native message boundary: how much of each list the
// messages before it made. A resumed decode cuts an earlier decode's lists there.
type mark struct {
	msgs, items, parts, results, gaps, calls int32
	residue                                  bool
}

// mark records the counts before the next native message (or after the last).
func (d *requestDecoder) mark() {
	if len(d.marks) == cap(d.marks) {
		// Sized as the native messages are (one mark before each, one after the last):
		// appending would double a resumed decode's copy of the history's marks.
		d.marks = grow(d.marks, d.expect(len(d.marks), d.cut.msgs, bytesPerNative)+1)
	}
	d.marks = append(d.marks, mark{msgs: int32(len(d.st.messages)), items: int32(len(d.items)),
		parts: int32(len(d.st.parts)), results: int32(len(d.results)), gaps: int32(len(d.gaps)),
		calls: int32(len(d.callList)), residue: d.residue})
}

// ref is what is known of call id so far.
func (d *requestDecoder) ref(id string) callRef {
	if r, ok := d.calls[id]; ok || d.base == nil {
		return r
	}
	return d.base.refAt(id, d.cut)
}

// newRequestDecoder returns the decoder of a request whose messages array is total bytes
// long.
func newRequestDecoder(total int) *requestDecoder {
	d := &requestDecoder{st: &requestState{system: -1}, total: total,
		h: idHash{h: sha256.New(), buf: make([]byte, 0, 512)}}
	d.blockReader.arena = &d.arena
	d.partSlab.ahead, d.strSlab.ahead = d.partsAhead, d.partsAhead
	d.toolSlab.ahead = func() int { return d.expect(len(d.results), d.cut.results, bytesPerResult) - len(d.results) }
	d.calls = make(map[string]callRef, d.expect(0, 0, bytesPerResult))
	return d
}

// Typical sizes in an agent conversation, for sizing lists before any message has been
// decoded; afterwards sizes are extrapolated from what was decoded (expect).
const (
	bytesPerNative = 512 // a native message
	bytesPerItem   = 384 // a canonical item
	bytesPerPart   = 384 // a canonical part, or a native block kept for it
	bytesPerResult = 2048
)

// expect is how many elements a list that holds sofar will hold once the whole messages
// array is decoded: extrapolated from the share decoded so far, with some slack, or one
// per bytesEach bytes before the first message. base of them came from the decode this
// one resumes (0 from the start), and done and total count the bytes decoded here. It
// only sizes lists: a wrong guess costs an allocation, never a result.
func (d *requestDecoder) expect(sofar int, base int32, bytesEach int) int {
	b := int(base)
	sofar -= b
	if d.done <= 0 {
		// A first guess, kept small: the first growth extrapolates from real sizes.
		return b + sofar + min(d.total/bytesEach, 16) + 4
	}
	return b + int(int64(sofar)*int64(d.total)/int64(d.done)) + sofar/8 + 8
}

// add appends message m, whose parts were decoded from blocks; raws are the native blocks
// the parts' origins keep ("" where a part stands for several).
func (d *requestDecoder) add(m ahp.Message, part0 string, o itemOrigin, blocks []decodedBlock, raws []string) {
	idx := len(d.items)
	for j := range m.Parts {
		if j == 0 {
			m.Parts[j].ID = part0
		} else {
			m.Parts[j].ID = d.partID(m.ID, j)
		}
		raw := ""
		if j < len(raws) {
			raw = raws[j]
		}
		if len(d.st.parts) == cap(d.st.parts) {
			d.st.parts = grow(d.st.parts, d.expect(len(d.st.parts), d.cut.parts, bytesPerPart))
		}
		d.st.parts = append(d.st.parts, origin{raw: raw, typ: blocks[j].typ, item: int32(idx), at: int32(j)})
		if blocks[j].gap != "" {
			d.gap(blocks[j].gap)
		}
	}
	if len(d.items) == cap(d.items) {
		d.items = grow(d.items, d.expect(len(d.items), d.cut.items, bytesPerItem))
	}
	if len(d.st.origins) == cap(d.st.origins) {
		d.st.origins = grow(d.st.origins, cap(d.items))
	}
	d.items = append(d.items, m)
	d.st.origins = append(d.st.origins, o)
	if o.native >= 0 {
		nm := &d.st.messages[o.native]
		if nm.count == 0 {
			nm.first = idx
		}
		nm.count++
	}
}

// partID is the id of the n-th part of message msgID (partID), held in the arena.
func (d *requestDecoder) partID(msgID string, n int) string {
	var b [64]byte
	return d.arena.String(appendPartID(b[:0], msgID, n))
}

// runID is the id "m<i>-<hash>" of a message decoded from native message i (and the id
// of its first part, as messageID returns them).
func (d *requestDecoder) runID(i int) (string, string) {
	var b [48]byte
	id := strconv.AppendInt(append(b[:0], 'm'), int64(i), 10)
	return d.messageID(d.h.appendSum(append(id, '-')))
}

// messageID returns the message id id and the id of its first part (partID), held in the
// arena as one string: most messages have one part.
func (d *requestDecoder) messageID(id []byte) (msgID, part0 string) {
	s := d.arena.String(append(id, ".p0"...))
	return s[:len(s)-len(".p0")], s
}

// textBlock returns a text block holding the JSON string lit, held in the arena: the
// native block a string content stands for.
func (d *requestDecoder) textBlock(lit string) string {
	d.scratch = append(append(append(d.scratch[:0], `{"type":"text","text":`...), lit...), '}')
	return d.arena.String(d.scratch)
}

// partsAhead is how many more parts the rest of the decode is expected to make.
func (d *requestDecoder) partsAhead() int {
	return d.expect(len(d.st.parts), d.cut.parts, bytesPerPart) - len(d.st.parts)
}

// partList returns the parts of d.run as a list of their own (in the slab).
func (d *requestDecoder) partList() []ahp.Part {
	if len(d.run) == 0 {
		return []ahp.Part{} // an empty message keeps an empty, not a nil, part list
	}
	parts := d.partSlab.take(len(d.run))
	for k := range d.run {
		parts[k] = d.run[k].part
	}
	return parts
}

func (d *requestDecoder) gap(reason string) {
	if d.gapSeen[reason] || d.base != nil && d.base.gapBefore(reason, d.cut) {
		return
	}
	if d.gapSeen == nil {
		d.gapSeen = map[string]bool{}
	}
	d.gapSeen[reason] = true
	d.gaps = append(d.gaps, ahp.Gap{Path: "items", Reason: reason})
}

// system decodes the top-level system prompt into the first canonical message.
func (d *requestDecoder) system(sys gjson.Result) error {
	d.run, d.raws = d.run[:0], d.raws[:0]
	o := itemOrigin{native: -1}
	switch {
	case sys.Type == gjson.String:
		d.run = append(d.run, decodedBlock{part: d.textPart("", sys.Str), typ: blockText})
		d.raws = append(d.raws, d.textBlock(sys.Raw))
		o.stringContent = true
		d.st.systemString = true
	case sys.IsArray():
		var err error
		var f blockFields
		d.arena.PickElements(sys, blockFieldNames[:], f[:], func(b gjson.Result) bool {
			var db decodedBlock
			if db, err = d.decode(b, &f, ""); err != nil {
				err = badRequest("system[%d]: %v", len(d.run), err)
				return false
			}
			if db.typ != blockText {
				err = badRequest("system[%d]: system prompt blocks must be text, not %q", len(d.run), db.typ)
				return false
			}
			d.run = append(d.run, db)
			d.raws = append(d.raws, b.Raw)
			return true
		})
		if err != nil {
			return err
		}
	default:
		return badRequest("system must be a string or an array of text blocks")
	}
	m := ahp.Message{Role: ahp.RoleSystem, Synthesized: true}
	if len(d.run) > 0 {
		m.Parts = d.partList() // an empty block array leaves the list nil
	}
	d.h.reset()
	d.h.str(ahp.RoleSystem)
	for i := range m.Parts {
		d.h.part(&m.Parts[i], d.run[i].fingerprint)
	}
	var b [32]byte
	var part0 string
	m.ID, part0 = d.messageID(d.h.appendSum(append(b[:0], "sys-"...)))
	d.st.system = len(d.items)
	o.blocks = d.strSlab.keep(d.raws)
	d.add(m, part0, o, d.run, d.raws)
	return nil
}

// messageFieldNames are the members of a native message the decoder reads, in the pass
// that finds where the message ends.
var messageFieldNames = [...]string{"role", "content"}

// messageFields holds a native message's role and content.
type messageFields [len(messageFieldNames)]gjson.Result

// message decodes native message i, m, whose members f holds. A user message is split at
// every tool_result block: each result becomes its own role-tool message, the runs between
// them user messages.
func (d *requestDecoder) message(i int, m gjson.Result, f *messageFields) error {
	if !m.IsObject() {
		return badRequest("messages[%d] must be an object", i)
	}
	role, content := f[0], f[1]
	if role.Type != gjson.String {
		return badRequest("messages[%d].role must be a string", i)
	}
	// Never stricter than the upstream: Claude Code sends its environment block
	// as {"role":"system"} inside messages. Any role is carried; its text is canonical
	// content under the canonical role it means, and it renders back under its own role.
	canonical, other := canonicalRole(role.Str)
	if len(d.st.messages) == cap(d.st.messages) {
		d.st.messages = grow(d.st.messages, d.expect(len(d.st.messages), d.cut.msgs, bytesPerNative))
	}
	nm := nativeMessage{raw: m.Raw}
	if other {
		nm.role = role.Str
		if canonical == ahp.RoleUser {
			d.gap(fmt.Sprintf("messages[%d] has role %q, carried as a user message", i, role.Str))
		}
	}
	d.st.messages = append(d.st.messages, nm)
	roleStr := canonical
	d.run, d.raws = d.run[:0], d.raws[:0]

	if content.Type == gjson.String {
		d.run = append(d.run, decodedBlock{part: d.textPart("", content.Str), typ: blockText})
		d.raws = append(d.raws, d.textBlock(content.Raw))
		d.addRun(i, 0, roleStr, true)
		return nil
	}
	if !content.IsArray() {
		return badRequest("messages[%d].content must be a string or an array of content blocks", i)
	}

	var (
		runs    int
		results int
		j       int
		err     error
	)
	var bf blockFields
	d.arena.PickElements(content, blockFieldNames[:], bf[:], func(b gjson.Result) bool {
		f := &bf
		d.residue = d.residue || f.mayHaveResidue()
		typ := f[bType].String()
		switch {
		case typ == blockToolResult && roleStr == ahp.RoleAssistant:
			err = badRequest("messages[%d].content[%d]: tool_result blocks belong in user messages", i, j)
			return false
		case typ == blockToolUse && roleStr == ahp.RoleUser:
			err = badRequest("messages[%d].content[%d]: tool_use blocks belong in assistant messages", i, j)
			return false
		case typ == blockToolResult:
			if len(d.run) > 0 {
				d.addRun(i, runs, roleStr, false)
				runs++
			}
			if err = d.toolResult(i, runs+results, b, f); err != nil {
				err = badRequest("messages[%d].content[%d]: %v", i, j, err)
				return false
			}
			results++
			j++
			return true
		}
		var db decodedBlock
		if db, err = d.decode(b, f, ""); err != nil {
			err = badRequest("messages[%d].content[%d]: %v", i, j, err)
			return false
		}
		if db.callID != "" {
			d.noteCall(i, &db)
		}
		d.run = append(d.run, db)
		d.raws = append(d.raws, b.Raw)
		j++
		return true
	})
	if err != nil {
		return err
	}
	// An empty message stays visible as an empty canonical message.
	if len(d.run) > 0 || results == 0 {
		d.addRun(i, runs, roleStr, false)
	}
	return nil
}

// noteCall remembers a tool_use block for the tool results after it; a later block with
// the same id wins.
func (d *requestDecoder) noteCall(i int, db *decodedBlock) {
	if len(d.callList) == cap(d.callList) {
		d.callList = grow(d.callList, d.expect(len(d.callList), d.cut.calls, bytesPerResult))
	}
	r := d.ref(db.callID)
	d.callList = append(d.callList, seenCall{id: db.callID, name: db.name, input: db.input, msg: int32(i), prev: r.call})
	r.call = int32(len(d.callList))
	d.calls[db.callID] = r
}

// addRun adds a user or assistant message made of consecutive native blocks (d.run, d.raws)
// and empties the run. Its id hashes native position, run number, role and canonical
// content.
func (d *requestDecoder) addRun(i, run int, role string, stringContent bool) {
	m := ahp.Message{Role: role, Synthesized: true, Parts: d.partList()}
	d.h.reset()
	d.h.int(i)
	d.h.int(run)
	d.h.str(role)
	for k := range m.Parts {
		d.h.part(&m.Parts[k], d.run[k].fingerprint)
	}
	var part0 string
	m.ID, part0 = d.runID(i)
	o := itemOrigin{native: i, stringContent: stringContent, blocks: d.strSlab.keep(d.raws)}
	d.add(m, part0, o, d.run, d.raws)
	d.run, d.raws = d.run[:0], d.raws[:0]
}

// toolResult adds the role-tool message of one tool_result block b, whose members f holds
// (structure serialized into text, AHP-CONTENT-001): first one text part (category tool_result)
// with the content string or its text blocks joined by "\n", then the other content blocks in
// order (images and PDFs as attachments). The text part is always present and always first, so
// tool.after's modify(output) always has its target; a changed result renders its text block
// first. It uses d.run and d.raws, which the caller has emptied.
func (d *requestDecoder) toolResult(i, seq int, b gjson.Result, f *blockFields) error {
	callID, err := stringValue(f[bToolUseID], "tool_use_id")
	if err != nil {
		return err
	}
	if callID == "" {
		return errors.New("tool_result needs a non-empty tool_use_id")
	}
	if v := f[bIsError]; v.Exists() && v.Type != gjson.True && v.Type != gjson.False && v.Type != gjson.Null {
		return errors.New("tool_result is_error must be a boolean")
	}
	t := toolOrigin{block: b.Raw}
	// Slot 0 is the text part, filled in once the text is known; it stands for several
	// blocks, so its origin has no raw block.
	d.run = append(d.run[:0], decodedBlock{typ: blockToolResult})
	d.raws = append(d.raws[:0], "")
	d.texts, d.textBlocks, d.order = d.texts[:0], d.textBlocks[:0], d.order[:0]
	switch c := f[bContent]; {
	case !c.Exists() || c.Type == gjson.Null:
		t.form = contentAbsent
	case c.Type == gjson.String:
		t.form = contentString
		d.texts = append(d.texts, c.Str)
		if c.Str != "" {
			t.str = c.Raw
		}
	case c.IsArray():
		t.form = contentArray
		var sf blockFields
		d.arena.PickElements(c, blockFieldNames[:], sf[:], func(sb gjson.Result) bool {
			// A nested tool_result: the residue looks into its content, which this decode
			// does not read.
			d.residue = d.residue || sf.mayHaveResidue() || sf[bType].String() == blockToolResult
			if !sb.IsObject() {
				err = errors.New("tool_result content blocks must be objects")
				return false
			}
			var db decodedBlock
			switch typ := sf[bType].String(); typ {
			case blockText:
				var s string
				if s, err = stringValue(sf[bText], "text"); err != nil {
					return false
				}
				d.texts = append(d.texts, s)
				d.textBlocks = append(d.textBlocks, sb.Raw)
				d.order = append(d.order, toolSub{raw: sb.Raw})
				return true
			case blockImage, blockDocument, blockSearchResult:
				if db, err = d.decode(sb, &sf, ""); err != nil {
					return false
				}
			default:
				db = gapBlock(sb, &sf, "", quoteOr(typ, "untyped")+" tool_result content")
			}
			d.run = append(d.run, db)
			d.raws = append(d.raws, sb.Raw)
			d.order = append(d.order, toolSub{raw: sb.Raw, part: len(d.run) - 1}) // after the text part
			return true
		})
		if err != nil {
			return err
		}
	default:
		return errors.New("tool_result content must be a string or an array of content blocks")
	}
	d.run[0].part = d.textPart("", d.join(d.texts))
	d.run[0].part.Category = ahp.CategoryToolResult
	t.textBlocks = d.strSlab.keep(d.textBlocks)
	t.order = d.subSlab.keep(d.order)

	m := ahp.Message{Role: ahp.RoleTool, Synthesized: true, Parts: d.partList()}
	// Tool result ids derive from the call id, which the client never changes; position
	// and content only break ties when a call id repeats.
	ref := d.ref(callID)
	var part0 string
	if ref.answer == 0 {
		var b [64]byte
		m.ID, part0 = d.messageID(append(append(b[:0], "tr-"...), callID...))
		ref.answer = int32(i) + 1
		d.calls[callID] = ref
	} else {
		d.h.reset()
		d.h.int(i)
		d.h.int(seq)
		d.h.str(ahp.RoleTool)
		d.h.str(callID)
		for k := range m.Parts {
			d.h.part(&m.Parts[k], d.run[k].fingerprint)
		}
		m.ID, part0 = d.runID(i)
	}

	tool := &d.toolSlab.take(1)[0]
	*tool = t
	idx := len(d.items)
	// The item's native block is the tool_result; its parts' origins are the sub-blocks of
	// the tool_result content.
	d.add(m, part0, itemOrigin{native: i, blocks: d.strSlab.keep([]string{b.Raw}), tool: tool}, d.run, d.raws)
	tool.textPart = m.Parts[0].ID
	d.run, d.raws = d.run[:0], d.raws[:0]

	r := mapping.ToolResult{CallID: callID, ItemIndex: idx, IsError: f[bIsError].Type == gjson.True}
	if ref.call > 0 {
		c := &d.callList[ref.call-1]
		if c.raw == nil {
			// Never nil in a call of the decode resumed (remember fills them all), whose
			// list this decode must not write.
			c.raw = d.inputBytes(c.input)
		}
		r.ToolName, r.Input, r.CallFound = c.name, c.raw, true
	}
	if len(d.results) == cap(d.results) {
		d.results = grow(d.results, d.expect(len(d.results), d.cut.results, bytesPerResult))
	}
	d.results = append(d.results, r)
	return nil
}

// join is strings.Join(texts, "\n") with a joined text held in the arena.
func (d *requestDecoder) join(texts []string) string {
	switch len(texts) {
	case 0:
		return ""
	case 1:
		return texts[0]
	}
	b := append(d.scratch[:0], texts[0]...)
	for _, t := range texts[1:] {
		b = append(append(b, '\n'), t...)
	}
	d.scratch = b
	return d.arena.String(b)
}

// inputBytes returns a copy of a call input for ToolResult.Input. The copies share a few
// buffers; each is capped, so an append to one cannot reach the next.
func (d *requestDecoder) inputBytes(s string) json.RawMessage {
	if cap(d.inputs)-len(d.inputs) < len(s) {
		d.inputs = make([]byte, 0, max(len(s), 1024))
		d.inputsN += cap(d.inputs)
	}
	start := len(d.inputs)
	d.inputs = append(d.inputs, s...)
	return d.inputs[start:len(d.inputs):len(d.inputs)]
}
