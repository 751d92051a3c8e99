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

// requestState is the private state of a decoded request (mapping.Request.Native).
type requestState struct {
	natives
	decoded     []ahp.Message  // a private copy of Request.Items as decoded
	byID        map[string]int // canonical message id -> index in decoded
	itemsOf     [][]int        // canonical message index -> its native items, in order
	instrID     string         // id of the message decoded from "instructions", or ""
	hasInput    bool           // the body had an "input" member
	inputString bool           // "input" was a string
}

// DecodeRequest implements mapping.Translator.
func (*Translator) DecodeRequest(body []byte) (*mapping.Request, error) {
	if err := oaiwire.CheckClientJSON(body); err != nil {
		return nil, &mapping.BadRequest{Reason: err.Error()}
	}
	// Every raw slice below aliases the body, which nobody writes to after this call.
	s := mapping.BytesString(body)
	parsed := gjson.Parse(s)
	if !parsed.IsObject() {
		return nil, &mapping.BadRequest{Reason: "body is not a JSON object"}
	}
	root := mapping.TopMembers(parsed)
	req := &mapping.Request{
		Model:       root.Get("model").String(),
		Stream:      root.Get("stream").Type == gjson.True,
		Params:      json.RawMessage(root.Without("input", "instructions")),
		PromptStart: -1,
		SessionHint: sessionHint(root),
		Original:    body,
	}
	if in := root.Get("input"); in.IsArray() && (strings.Contains(in.Raw, `url"`) || strings.Contains(in.Raw, `filename"`)) {
		if r, ok := mapping.Residue(in, itemResidue); ok {
			if p, err := sjson.SetRaw(string(req.Params), "input", r); err == nil {
				req.Params = json.RawMessage(p)
			}
		}
	}
	st := &requestState{natives: newNatives(), byID: map[string]int{}}
	d := &requestDecoder{decoder: decoder{n: &st.natives}, st: st, req: req, used: map[string]bool{}, open: -1}

	// Server-held context: the visible items are only a delta. The
	// proxy does not advertise whole-list replace while Request.Gaps is non-empty.
	prev := root.Get("previous_response_id")
	conv := root.Get("conversation")
	if prev.Type == gjson.String && prev.Str != "" || conv.Exists() && conv.Type != gjson.Null {
		d.gap(gapServerHistory)
	}
	if p := root.Get("prompt"); p.Exists() && p.Type != gjson.Null {
		d.gap(gapServerPrompt)
	}

	if in := root.Get("instructions"); in.Exists() && in.Type != gjson.Null {
		if in.Type != gjson.String {
			return nil, &mapping.BadRequest{Reason: "instructions is not a string"}
		}
		idx := d.newMessage(ahp.RoleSystem, "", itemID(-1, "instructions", in.Raw))
		id := req.Items[idx].ID
		p := ahp.TextPart(partID(id, 0), in.Str)
		st.addPart(p, partOrigin{item: -1, src: srcInstructions})
		req.Items[idx].Parts = append(req.Items[idx].Parts, p)
		st.instrID = id
	}

	switch input := root.Get("input"); {
	case !input.Exists() || input.Type == gjson.Null:
		// A request may carry no input (a stored prompt, or instructions only).
	case input.Type == gjson.String:
		st.hasInput, st.inputString = true, true
		// The string is one user message; its native form, should the list ever need
		// rendering as an array, is an easy input message.
		raw := `{"role":"user","content":` + input.Raw + `}`
		if err := d.item(0, gjson.Parse(raw)); err != nil {
			return nil, &mapping.BadRequest{Reason: err.Error()}
		}
	case input.IsArray():
		st.hasInput = true
		var err error
		i := 0
		mapping.Elements(input, func(it gjson.Result) bool {
			err = d.item(i, it)
			i++
			return err == nil
		})
		if err != nil {
			return nil, &mapping.BadRequest{Reason: err.Error()}
		}
	default:
		return nil, &mapping.BadRequest{Reason: "input is neither a string nor an array"}
	}

	if req.Items == nil {
		req.Items = []ahp.Message{}
	}
	for i := range req.Items {
		if req.Items[i].Parts == nil {
			req.Items[i].Parts = []ahp.Part{}
		}
	}
	for i := len(req.Items) - 1; i >= 0 && req.Items[i].Role == ahp.RoleUser; i-- {
		req.PromptStart = i
	}
	req.Gaps = d.gaps
	st.decoded = ahp.CloneMessages(req.Items)
	req.Native = st
	return req, nil
}

// sessionHint picks the first native field that names the end user or the conversation.
func sessionHint(root mapping.Members) string {
	meta, conv := root.Get("metadata"), root.Get("conversation")
	for _, v := range [...]gjson.Result{root.Get("user"), root.Get("safety_identifier"),
		root.Get("prompt_cache_key"), meta.Get("session_id"), meta.Get("user_id"), conv,
		conv.Get("id")} {
		if v.Type == gjson.String && v.Str != "" {
			return v.Str
		}
	}
	return ""
}

// requestDecoder carries the decode of one request.
type requestDecoder struct {
	decoder
	st   *requestState
	req  *mapping.Request
	used map[string]bool // canonical message ids taken so far

	// The assistant message being built from consecutive model items (see doc.go): open is
	// its index or -1; afterResult says a call output came after its last
	// reasoning or message item.
	open        int
	afterResult bool
}

// newMessage appends a canonical message and returns its index. nativeID is the item's own
// id ("" when it has none); fallback is the derived id used then.
func (d *requestDecoder) newMessage(role, nativeID, fallback string) int {
	id, synthesized := nativeID, nativeID == ""
	if synthesized {
		id = fallback
	}
	for base, k := id, 1; d.used[id]; k++ {
		id = base + "~" + strconv.Itoa(k)
	}
	d.used[id] = true
	idx := len(d.req.Items)
	d.req.Items = append(d.req.Items, ahp.Message{ID: id, Role: role, Synthesized: synthesized})
	d.st.byID[id] = idx
	d.st.itemsOf = append(d.st.itemsOf, nil)
	return idx
}

// attach records native item ni as part of canonical message msg.
func (d *requestDecoder) attach(ni *nativeItem, msg, before int) {
	ni.msg = msg
	for _, p := range d.req.Items[msg].Parts[before:] {
		ni.parts = append(ni.parts, p.ID)
	}
	d.st.itemsOf[msg] = append(d.st.itemsOf[msg], len(d.st.items))
	d.st.items = append(d.st.items, *ni)
}

// item decodes one input item.
func (d *requestDecoder) item(i int, it gjson.Result) error {
	where := "input[" + strconv.Itoa(i) + "]"
	if !it.IsObject() {
		return fmt.Errorf("%s is not an object", where)
	}
	typ := it.Get("type").String()
	role := it.Get("role")
	ni := nativeItem{raw: it.Raw, typ: typ, msg: -1}
	var nativeID string
	if v := it.Get("id"); v.Type == gjson.String {
		nativeID = v.Str
	}
	switch {
	case typ == "message" || typ == "" && role.Exists():
		if role.Type != gjson.String {
			return fmt.Errorf("%s: message without a role", where)
		}
		ni.kind, ni.role = itemMessage, role.Str
		switch role.Str {
		case ahp.RoleUser, ahp.RoleSystem, ahp.RoleDeveloper:
			d.open = -1
			msg := d.newMessage(role.Str, nativeID, itemID(i, role.Str, it.Raw))
			return d.messageContent(&ni, msg, it, where)
		case ahp.RoleAssistant:
			msg := d.assistant(false, nativeID, i, it.Raw)
			return d.messageContent(&ni, msg, it, where)
		}
		return fmt.Errorf("%s: unknown role %q", where, role.Str)
	case typ == "":
		return fmt.Errorf("%s has neither a type nor a role", where)
	case isCallType(typ):
		// function_call and every other call item the client runs (tools.go).
		ni.kind = itemCall
		msg := d.assistant(true, nativeID, i, it.Raw)
		m := &d.req.Items[msg]
		p, err := d.call(it, typ, partID(m.ID, len(m.Parts)), len(d.st.items), "", where)
		if err != nil {
			return err
		}
		ni.callID = d.n.calls[p.ID].id
		before := len(m.Parts)
		m.Parts = append(m.Parts, p)
		d.attach(&ni, msg, before)
		return nil
	case typ == "mcp_call":
		return d.mcpCall(&ni, i, it, nativeID)
	case isOutputType(typ):
		ni.kind = itemCallOutput
		cid := it.Get("call_id")
		if !cid.Exists() && typ == "local_shell_call_output" {
			cid = it.Get("id") // its documented form names the call by "id"
		}
		if cid.Type != gjson.String || cid.Str == "" {
			return fmt.Errorf("%s: %s without call_id", where, typ)
		}
		ni.callID = cid.Str
		if d.open >= 0 {
			d.afterResult = true
		}
		// The result's message takes the call id, so tool.after items and call.id agree.
		msg := d.newMessage(ahp.RoleTool, cid.Str, "")
		m := &d.req.Items[msg]
		var parts []ahp.Part
		var str bool
		var err error
		switch typ {
		case "shell_call_output":
			parts, err = d.shellOutput(it.Get("output"), m.ID, len(d.st.items), where)
		case "computer_call_output":
			parts, err = d.screenshot(it, m.ID, len(d.st.items), where)
		default: // a string or an array of content entries
			parts, str, err = d.output(it.Get("output"), m.ID, len(d.st.items), where)
		}
		if err != nil {
			return err
		}
		m.Parts, ni.stringBody = parts, str
		tr := mapping.ToolResult{CallID: cid.Str, ItemIndex: msg,
			IsError: typ == "apply_patch_call_output" && it.Get("status").String() == "failed"}
		if c := d.n.callIDs[cid.Str]; c != nil {
			tr.ToolName, tr.Input, tr.CallFound = c.name, json.RawMessage(c.input), true
		}
		d.req.ToolResults = append(d.req.ToolResults, tr)
		d.attach(&ni, msg, 0)
		return nil
	case typ == "reasoning":
		ni.kind = itemReasoning
		msg := d.assistant(false, nativeID, i, it.Raw)
		m := &d.req.Items[msg]
		before := len(m.Parts)
		parts, err := d.reasoning(it, m.ID, m.Parts, len(d.st.items), where)
		if err != nil {
			return err
		}
		m.Parts = parts
		d.attach(&ni, msg, before)
		return nil
	}
	ni.kind = itemOpaque
	if typ == "additional_tools" {
		// Tool declarations sent as an input item (Codex's "Responses lite" requests):
		// declarations, like the top-level tools, not conversation; kept in place, and
		// named under params so that the conversation itself is still whole.
		d.gaps = append(d.gaps, ahp.Gap{Path: "params", Reason: where + ": tool declarations (additional_tools) are carried natively"})
		d.st.items = append(d.st.items, ni)
		return nil
	}
	// Hosted tool calls (web_search_call, file_search_call, code_interpreter_call, mcp_call,
	// image_generation_call, ...), item references, ...: kept in place byte for byte, and
	// named so that a policy knows the view is incomplete.
	d.gap(fmt.Sprintf("%s: item type %q not represented", where, typ))
	d.st.items = append(d.st.items, ni)
	return nil
}

// assistant returns the assistant message a model item joins, opening a new one when
// needed (the grouping rule of doc.go).
func (d *requestDecoder) assistant(call bool, nativeID string, i int, raw string) int {
	if d.open >= 0 && (call || !d.afterResult) {
		return d.open
	}
	d.open, d.afterResult = d.newMessage(ahp.RoleAssistant, nativeID, itemID(i, ahp.RoleAssistant, raw)), false
	return d.open
}

// messageContent decodes a message item's content into message msg.
func (d *requestDecoder) messageContent(ni *nativeItem, msg int, it gjson.Result, where string) error {
	m := &d.req.Items[msg]
	before := len(m.Parts)
	parts, str, err := d.content(it.Get("content"), m.ID, m.Parts, len(d.st.items), where)
	if err != nil {
		return err
	}
	m.Parts, ni.stringBody = parts, str
	d.attach(ni, msg, before)
	return nil
}

// itemResidue is the input residue (mapping.ResidueMembers) of one input item: the file
// names and remote URLs of its content entries, and a screenshot's remote image URL. They
// are text the model or the provider reads that no canonical part carries.
func itemResidue(it gjson.Result) string {
	r := ""
	if c, ok := mapping.Residue(it.Get("content"), func(e gjson.Result) string {
		return mapping.PickStrings(e, mapping.RemoteReference, "image_url", "file_url", "filename")
	}); ok {
		r, _ = sjson.SetRaw("{}", "content", c)
	}
	if o := mapping.PickStrings(it, mapping.RemoteReference, "output.image_url"); o != "" {
		if r == "" {
			return o
		}
		r, _ = sjson.SetRaw(r, "output", gjson.Get(o, "output").Raw)
	}
	return r
}

// mcpCall decodes an mcp_call input item: a call the provider ran on a remote MCP server,
// carried back with its output and error. Its output is what the model reads of the tool,
// so it is a tool result like a function_call_output's (a tool message settled at
// tool.after; secrets in it are redacted like any other result): a part for the output
// and one for the error text, when there is one. The message takes the item's id, which also
// names the call; the call's name and arguments are the item's own.
func (d *requestDecoder) mcpCall(ni *nativeItem, i int, it gjson.Result, nativeID string) error {
	where := "input[" + strconv.Itoa(i) + "]"
	out, errv := it.Get("output"), it.Get("error")
	if out.Exists() && out.Type != gjson.Null && out.Type != gjson.String {
		return fmt.Errorf("%s: mcp_call output is not a string", where)
	}
	if errv.Exists() && errv.Type != gjson.Null && errv.Type != gjson.String {
		return fmt.Errorf("%s: mcp_call error is not a string", where)
	}
	ni.kind = itemCallOutput
	if d.open >= 0 {
		d.afterResult = true
	}
	msg := d.newMessage(ahp.RoleTool, nativeID, itemID(i, "mcp_call", it.Raw))
	m := &d.req.Items[msg]
	ni.callID = m.ID
	// A call that failed usually has an error and no output: its one part is then the
	// error, so that an edit of the result (one text part, as tool.after edits are
	// applied) goes back to the member it came from.
	isErr := errv.Type == gjson.String && errv.Str != ""
	m.Parts = []ahp.Part{}
	if !isErr || out.Str != "" {
		p := oaiwire.TextPart(partID(m.ID, 0), out.Str, ahp.CategoryToolResult)
		d.n.addPart(p, partOrigin{item: len(d.st.items), src: srcMCPOutput})
		m.Parts = append(m.Parts, p)
	}
	if isErr {
		e := oaiwire.TextPart(partID(m.ID, len(m.Parts)), errv.Str, ahp.CategoryToolResult)
		d.n.addPart(e, partOrigin{item: len(d.st.items), src: srcMCPError})
		m.Parts = append(m.Parts, e)
	}
	tr := mapping.ToolResult{CallID: m.ID, ItemIndex: msg, IsError: isErr}
	if name := it.Get("name"); name.Type == gjson.String && name.Str != "" {
		tr.ToolName, tr.CallFound = name.Str, true
		tr.Input = json.RawMessage(`{}`)
		if args := it.Get("arguments"); args.Type == gjson.String && gjson.Valid(args.Str) && gjson.Parse(args.Str).IsObject() {
			tr.Input = json.RawMessage(mapping.CompactJSON(args.Str))
		}
	}
	d.req.ToolResults = append(d.req.ToolResults, tr)
	d.attach(ni, msg, 0)
	return nil
}
