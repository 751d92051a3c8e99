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

// requestState is Request.Native: what DecodeRequest saw, so EncodeRequest can tell what
// changed and copy everything else byte for byte.
type requestState struct {
	items    []ahp.Message      // private copy of Request.Items as decoded
	origins  []itemOrigin       // parallel to items
	byID     map[string]int     // canonical message id → index in items
	parts    map[string]*origin // canonical part id → native block
	messages []nativeMessage    // the native messages array
	array    string             // its raw JSON
	system   int                // index in items of the system message, -1 when none
	// systemString: the native system prompt was a string, not a block array.
	systemString bool
}

// nativeMessage is one element of the native messages array.
type nativeMessage struct {
	raw        string
	start, end int   // span of raw in requestState.array, or -1 when unknown
	items      []int // canonical items decoded from it, in order
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
	block      string   // the tool_result block
	form       int      // contentAbsent, contentString or contentArray
	textPart   string   // id of the part holding the result text
	textBlocks []string // the text blocks joined into that part, as native blocks
	order      []toolSub
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

// DecodeRequest parses a Messages request into canonical items (SPEC-DIGEST §15.4).
func (*Messages) DecodeRequest(body []byte) (*mapping.Request, error) {
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

	d := requestDecoder{
		st:    &requestState{byID: map[string]int{}, parts: map[string]*origin{}, system: -1},
		calls: map[string]mapping.ToolCall{},
		trIDs: map[string]bool{},
	}
	if sys := root.Get("system"); sys.Exists() && sys.Type != gjson.Null {
		if err := d.system(sys); err != nil {
			return nil, err
		}
	}
	d.st.array = msgs.Raw
	var err error
	mapping.Elements(msgs, func(m gjson.Result) bool {
		err = d.message(len(d.st.messages), m)
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
	req.Params = []byte(root.Without("messages", "system"))
	d.st.items = cloneMessages(d.items)
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

type requestDecoder struct {
	st      *requestState
	items   []ahp.Message
	results []mapping.ToolResult
	gaps    []ahp.Gap
	calls   map[string]mapping.ToolCall // tool_use blocks seen so far, by id
	trIDs   map[string]bool             // tool result message ids in use
	gapSeen map[string]bool             // gap reasons already listed
}

func (d *requestDecoder) add(m ahp.Message, o itemOrigin, blocks []decodedBlock) {
	idx := len(d.items)
	for j := range m.Parts {
		m.Parts[j].ID = partID(m.ID, j)
	}
	for j := range blocks {
		raw := ""
		if j < len(o.blocks) {
			raw = o.blocks[j]
		}
		d.st.parts[m.Parts[j].ID] = &origin{part: clonePart(&m.Parts[j]), raw: raw, typ: blocks[j].typ}
		if blocks[j].gap != "" {
			d.gap(blocks[j].gap)
		}
	}
	d.items = append(d.items, m)
	d.st.origins = append(d.st.origins, o)
	d.st.byID[m.ID] = idx
	if o.native >= 0 {
		nm := &d.st.messages[o.native]
		nm.items = append(nm.items, idx)
	}
}

func (d *requestDecoder) gap(reason string) {
	if d.gapSeen[reason] {
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
	var blocks []decodedBlock
	o := itemOrigin{native: -1}
	switch {
	case sys.Type == gjson.String:
		blocks = []decodedBlock{{part: ahp.TextPart("", sys.Str), typ: blockText}}
		o.blocks = []string{`{"type":"text","text":` + sys.Raw + `}`}
		o.stringContent = true
		d.st.systemString = true
	case sys.IsArray():
		var err error
		sys.ForEach(func(k, b gjson.Result) bool {
			var db decodedBlock
			if db, err = decodeBlock(b, ""); err != nil {
				err = badRequest("system[%d]: %v", len(blocks), err)
				return false
			}
			if db.typ != blockText {
				err = badRequest("system[%d]: system prompt blocks must be text, not %q", len(blocks), db.typ)
				return false
			}
			blocks = append(blocks, db)
			o.blocks = append(o.blocks, b.Raw)
			return true
		})
		if err != nil {
			return err
		}
	default:
		return badRequest("system must be a string or an array of text blocks")
	}
	m := ahp.Message{Role: ahp.RoleSystem, Synthesized: true}
	h := newIDHash()
	h.str(ahp.RoleSystem)
	for i := range blocks {
		m.Parts = append(m.Parts, blocks[i].part)
		h.part(&blocks[i].part, blocks[i].fingerprint)
	}
	m.ID = "sys-" + h.sum()
	d.st.system = len(d.items)
	d.add(m, o, blocks)
	return nil
}

// message decodes native message i. A user message is split at every tool_result block:
// each result becomes its own role-tool message, the runs between them user messages.
func (d *requestDecoder) message(i int, m gjson.Result) error {
	if !m.IsObject() {
		return badRequest("messages[%d] must be an object", i)
	}
	role := m.Get("role")
	if role.Type != gjson.String || role.Str != ahp.RoleUser && role.Str != ahp.RoleAssistant {
		return badRequest("messages[%d].role must be \"user\" or \"assistant\"", i)
	}
	d.st.messages = append(d.st.messages, nativeMessage{raw: m.Raw})
	content := m.Get("content")

	if content.Type == gjson.String {
		b := decodedBlock{part: ahp.TextPart("", content.Str), typ: blockText}
		o := itemOrigin{native: i, stringContent: true,
			blocks: []string{`{"type":"text","text":` + content.Raw + `}`}}
		d.addRun(i, 0, role.Str, o, []decodedBlock{b})
		return nil
	}
	if !content.IsArray() {
		return badRequest("messages[%d].content must be a string or an array of content blocks", i)
	}

	var (
		run     []decodedBlock
		runRaw  []string
		runs    int
		results int
		err     error
	)
	flush := func() {
		d.addRun(i, runs, role.Str, itemOrigin{native: i, blocks: runRaw}, run)
		runs++
		run, runRaw = nil, nil
	}
	j := 0
	content.ForEach(func(_, b gjson.Result) bool {
		defer func() { j++ }()
		typ := b.Get("type").String()
		switch {
		case typ == blockToolResult && role.Str == ahp.RoleAssistant:
			err = badRequest("messages[%d].content[%d]: tool_result blocks belong in user messages", i, j)
			return false
		case typ == blockToolUse && role.Str == ahp.RoleUser:
			err = badRequest("messages[%d].content[%d]: tool_use blocks belong in assistant messages", i, j)
			return false
		case typ == blockToolResult:
			if len(run) > 0 {
				flush()
			}
			if err = d.toolResult(i, runs+results, b); err != nil {
				err = badRequest("messages[%d].content[%d]: %v", i, j, err)
				return false
			}
			results++
			return true
		}
		var db decodedBlock
		if db, err = decodeBlock(b, ""); err != nil {
			err = badRequest("messages[%d].content[%d]: %v", i, j, err)
			return false
		}
		if c, ok := mapping.ParseToolCall(&db.part); ok {
			d.calls[c.ID] = c
		}
		run = append(run, db)
		runRaw = append(runRaw, b.Raw)
		return true
	})
	if err != nil {
		return err
	}
	// An empty message stays visible as an empty canonical message.
	if len(run) > 0 || results == 0 {
		flush()
	}
	return nil
}

// addRun adds a user or assistant message made of consecutive native blocks. Its id hashes
// native position, run number, role and canonical content.
func (d *requestDecoder) addRun(i, run int, role string, o itemOrigin, blocks []decodedBlock) {
	h := newIDHash()
	h.int(i)
	h.int(run)
	h.str(role)
	m := ahp.Message{Role: role, Synthesized: true, Parts: make([]ahp.Part, 0, len(blocks))}
	for k := range blocks {
		m.Parts = append(m.Parts, blocks[k].part)
		h.part(&blocks[k].part, blocks[k].fingerprint)
	}
	m.ID = fmt.Sprintf("m%d-%s", i, h.sum())
	d.add(m, o, blocks)
}

// toolResult adds the role-tool message of one tool_result block (SPEC-DIGEST §15.4): first
// one text part (category tool_result) with the content string or its text blocks joined
// by "\n", then the other content blocks in order (images and PDFs as attachments). The
// text part is always present and always first, so tool.after's modify(output) always has
// its target; a changed result renders its text block first.
func (d *requestDecoder) toolResult(i, seq int, b gjson.Result) error {
	callID, err := stringField(b, "tool_use_id")
	if err != nil {
		return err
	}
	if callID == "" {
		return errors.New("tool_result needs a non-empty tool_use_id")
	}
	if v := b.Get("is_error"); v.Exists() && v.Type != gjson.True && v.Type != gjson.False && v.Type != gjson.Null {
		return errors.New("tool_result is_error must be a boolean")
	}
	t := &toolOrigin{block: b.Raw}
	var (
		blocks  []decodedBlock
		subRaws []string
		texts   []string
	)
	switch c := b.Get("content"); {
	case !c.Exists() || c.Type == gjson.Null:
		t.form = contentAbsent
	case c.Type == gjson.String:
		t.form = contentString
		texts = append(texts, c.Str)
		if c.Str != "" {
			t.textBlocks = []string{`{"type":"text","text":` + c.Raw + `}`}
		}
	case c.IsArray():
		t.form = contentArray
		c.ForEach(func(_, sb gjson.Result) bool {
			if !sb.IsObject() {
				err = errors.New("tool_result content blocks must be objects")
				return false
			}
			var db decodedBlock
			switch typ := sb.Get("type").String(); typ {
			case blockText:
				var s string
				if s, err = stringField(sb, "text"); err != nil {
					return false
				}
				texts = append(texts, s)
				t.textBlocks = append(t.textBlocks, sb.Raw)
				t.order = append(t.order, toolSub{raw: sb.Raw})
				return true
			case blockImage, blockDocument:
				if db, err = decodeBlock(sb, ""); err != nil {
					return false
				}
			default:
				db = gapBlock(sb, "", quoteOr(typ, "untyped")+" tool_result content")
			}
			blocks = append(blocks, db)
			subRaws = append(subRaws, sb.Raw)
			t.order = append(t.order, toolSub{raw: sb.Raw, part: len(blocks)}) // after the text part
			return true
		})
		if err != nil {
			return err
		}
	default:
		return errors.New("tool_result content must be a string or an array of content blocks")
	}
	text := ahp.TextPart("", strings.Join(texts, "\n"))
	text.Category = ahp.CategoryToolResult
	blocks = append([]decodedBlock{{part: text, typ: blockToolResult}}, blocks...)
	subRaws = append([]string{""}, subRaws...) // the text part stands for several blocks

	m := ahp.Message{Role: ahp.RoleTool, Synthesized: true}
	h := newIDHash()
	h.int(i)
	h.int(seq)
	h.str(ahp.RoleTool)
	h.str(callID)
	for k := range blocks {
		m.Parts = append(m.Parts, blocks[k].part)
		h.part(&blocks[k].part, blocks[k].fingerprint)
	}
	// Tool result ids derive from the call id, which the client never changes; position
	// and content only break ties when a call id repeats.
	m.ID = "tr-" + callID
	if d.trIDs[m.ID] {
		m.ID = fmt.Sprintf("m%d-%s", i, h.sum())
	}
	d.trIDs[m.ID] = true
	t.textPart = partID(m.ID, 0)

	o := itemOrigin{native: i, blocks: []string{b.Raw}, tool: t}
	idx := len(d.items)
	// Part origins point at the sub-blocks of the tool_result content.
	saved := o.blocks
	o.blocks = subRaws
	d.add(m, o, blocks)
	d.st.origins[idx].blocks = saved

	r := mapping.ToolResult{CallID: callID, ItemIndex: idx, IsError: b.Get("is_error").Type == gjson.True}
	if c, ok := d.calls[callID]; ok {
		r.ToolName, r.Input, r.CallFound = c.Name, c.Input, true
	}
	d.results = append(d.results, r)
	return nil
}

// ---- encoding ----

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
	if messagesEqual(items, st.items) {
		return req.Original, nil
	}
	e := requestEncoder{st: st, items: items}

	lead := 0
	for lead < len(items) && (items[lead].Role == ahp.RoleSystem || items[lead].Role == ahp.RoleDeveloper) {
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
	i, ok := e.st.byID[e.items[k].ID]
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
	if len(sys) == 1 && hadSystem && messageEqual(&sys[0], &e.st.items[e.st.system]) {
		return "", systemKeep, nil
	}
	if len(sys) == 1 && (!hadSystem || e.st.systemString) && len(sys[0].Parts) == 1 {
		if p := &sys[0].Parts[0]; p.Kind == ahp.KindText && p.Text != nil && p.Category == "" {
			return quote(*p.Text), systemSet, nil
		}
	}
	var blocks []string
	for i := range sys {
		for j := range sys[i].Parts {
			p := &sys[i].Parts[j]
			if p.Kind != ahp.KindText || p.Category == ahp.CategoryToolCall || p.Category == ahp.CategoryReasoning {
				return "", 0, fmt.Errorf("anthropic: part %s: the system prompt holds only text", p.ID)
			}
			o := e.st.parts[p.ID]
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
	return joinArray(blocks), systemSet, nil
}

// group is one native message to render: consecutive canonical items with one native role.
type group struct {
	role  string
	src   int   // native message of the first original item, -1 when all are new
	last  int   // native message of the last original item, -1 when none
	items []int // indices into requestEncoder.items
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
	return joinArray(out), true, nil
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
	content := joinArray(blocks)
	if g.src >= 0 {
		template = e.st.messages[g.src].raw
		// A string message whose text changed stays a string.
		if len(g.items) == 1 {
			it := &e.items[g.items[0]]
			if o, _ := e.origin(g.items[0]); o != nil && o.stringContent && len(it.Parts) == 1 &&
				(it.Role == ahp.RoleUser || it.Role == ahp.RoleAssistant) {
				if p := &it.Parts[0]; p.Kind == ahp.KindText && p.Text != nil && p.Category == "" {
					content = quote(*p.Text)
				}
			}
		}
	}
	out, err := setRaw(template, "content", content)
	if err != nil {
		return "", false, err
	}
	if gjson.Get(out, "role").String() != g.role {
		if out, err = setRaw(out, "role", quote(g.role)); err != nil {
			return "", false, err
		}
	}
	return out, false, nil
}

// isOriginal reports whether g is exactly the items decoded from native message g.src,
// in order and unchanged.
func (e *requestEncoder) isOriginal(g *group) bool {
	want := e.st.messages[g.src].items
	if len(want) != len(g.items) {
		return false
	}
	for n, k := range g.items {
		i, ok := e.st.byID[e.items[k].ID]
		if !ok || i != want[n] || !messageEqual(&e.items[k], &e.st.items[i]) {
			return false
		}
	}
	return true
}

// item renders one canonical item as native content blocks.
func (e *requestEncoder) item(k int) ([]string, error) {
	it := &e.items[k]
	o, was := e.origin(k)
	if o != nil && o.native >= 0 && messageEqual(it, was) {
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
		b, err := wrapInstruction(it)
		if err != nil {
			return nil, err
		}
		return []string{b}, nil
	}
	var blocks []string
	for j := range it.Parts {
		p := &it.Parts[j]
		b, ok, err := renderPart(p, e.st.parts[p.ID])
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
	return `{"type":"text","text":` + quote(text) + `}`, nil
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
			if p.ID == t.textPart && strPtrEqual(p.Text, origText) {
				return t.block, nil
			}
			return setRaw(t.block, "content", quote(*p.Text))
		}
	}

	// keptAt[n] is set when part n of the original message is present with its original
	// block; inOrder stays true while those parts keep their original relative order.
	var subs []string
	keptAt := make([]bool, len(was.Parts))
	inOrder, last := true, -1
	keep := func(n int) {
		keptAt[n] = true
		inOrder = inOrder && n > last
		last = n
	}
	for j := range it.Parts {
		p := &it.Parts[j]
		if p.ID == t.textPart && (p.Text == nil || strPtrEqual(p.Text, origText)) {
			subs = append(subs, t.textBlocks...)
			keep(0)
			continue
		}
		o := e.st.parts[p.ID]
		if p.Kind == ahp.KindText && p.Text != nil && (p.Category == ahp.CategoryToolResult || p.Category == "") && o != nil && o.raw == "" {
			// The joined result text, changed: one new text block replaces the originals.
			if *p.Text != "" {
				subs = append(subs, `{"type":"text","text":`+quote(*p.Text)+`}`)
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
			if keptAt[sb.part] {
				subs = append(subs, sb.raw)
			}
		}
	}
	return setRaw(t.block, "content", joinArray(subs))
}
