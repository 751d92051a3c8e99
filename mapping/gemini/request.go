package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// requestState is the private state of a decoded request (mapping.Request.Native).
type requestState struct {
	// nested is set for countTokens bodies that wrap the request in generateContentRequest:
	// every path below is inside that member.
	nested   bool
	obj      string   // the request object (the body, or its generateContentRequest)
	sysRaw   string   // systemInstruction as sent, "" when absent
	sysKey   string   // its member name: systemInstruction or system_instruction
	contents []string // each native content, byte for byte
	items    []ahp.Message
	// origins of the decoded messages and parts, by id
	msgs  map[string]msgOrigin
	parts map[string]*decodedPart
}

// msgOrigin is where a canonical message came from.
type msgOrigin struct {
	content int // index in contents; -1 for systemInstruction
	tool    bool
	part    *decodedPart // a tool message: its functionResponse part
}

func badRequest(format string, args ...any) error {
	return &mapping.BadRequest{Reason: fmt.Sprintf(format, args...)}
}

// DecodeRequest parses a generateContent (or countTokens) body into canonical items
// (SPEC-DIGEST §15.4).
func (t *Translator) DecodeRequest(body []byte) (*mapping.Request, error) {
	if err := strictJSON.Check(body); err != nil {
		return nil, badRequest("%v", err)
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, badRequest("body is not a JSON object")
	}
	st := &requestState{obj: root.Raw, msgs: map[string]msgOrigin{}, parts: map[string]*decodedPart{}}
	if t.ep.Method == MethodCountTokens && !root.Get("contents").Exists() && root.Get("generateContentRequest").IsObject() {
		st.nested, st.obj = true, root.Get("generateContentRequest").Raw
	}
	obj := gjson.Parse(st.obj)
	req := &mapping.Request{
		Model: t.ep.Model,
		// Only the SSE form is a stream for the proxy: the JSON-array stream is one JSON
		// body, held whole, and answered as JSON (an array) when hookproxy answers itself.
		Stream:      t.ep.Stream() && t.ep.SSE,
		PromptStart: -1,
		Original:    body,
	}
	// params: the members as sent (no re-encoding, which would escape "&&" in text that
	// policies scan)
	params := mapping.TopMembers(obj).Without("contents", "systemInstruction", "system_instruction")
	if st.nested {
		// params keep their place in the body (hookproxy.redact_params patches them there)
		outer := mapping.TopMembers(root).Without("generateContentRequest")
		if p, err := setRaw(outer, "generateContentRequest", params); err == nil {
			params = p
		}
	}
	req.Params = json.RawMessage(params)
	if req.Model == "" {
		if m := obj.Get("model").String(); m != "" {
			req.Model = strings.TrimPrefix(m, "models/")
		}
	}

	d := &requestDecoder{st: st, req: req}
	sys, key, err := field(obj, "systemInstruction")
	if err != nil {
		return nil, badRequest("the request %v", err)
	}
	st.sysKey = key
	if sys.Exists() {
		if err := d.system(sys); err != nil {
			return nil, err
		}
	}
	if cc, _, _ := field(obj, "cachedContent"); cc.Type == gjson.String && cc.Str != "" {
		// The model also reads context the provider holds (a cached content resource):
		// only the request's own contents are in items, as with a Responses
		// previous_response_id (SPEC-DIGEST §15.4), so no whole-list replace is offered.
		req.Gaps = append(req.Gaps, ahp.Gap{Path: "items", Reason: "earlier context held by provider (cachedContent)"})
	}
	contents := obj.Get("contents")
	if contents.Exists() && !contents.IsArray() {
		return nil, badRequest("contents is not an array")
	}
	contents.ForEach(func(_, c gjson.Result) bool {
		err = d.content(len(st.contents), c)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	for i := len(req.Items) - 1; i >= 0 && req.Items[i].Role == ahp.RoleUser; i-- {
		req.PromptStart = i
	}
	st.items = ahp.CloneMessages(req.Items)
	req.Native = st
	return req, nil
}

// requestDecoder carries the decode of one request.
type requestDecoder struct {
	st  *requestState
	req *mapping.Request
	// calls of the model contents seen so far, for joining function responses to them
	calls []seenCall
}

type seenCall struct {
	call    mapping.ToolCall
	content int
	used    bool
}

func (d *requestDecoder) system(sys gjson.Result) error {
	if !sys.IsObject() {
		return badRequest("systemInstruction is not an object")
	}
	d.st.sysRaw = sys.Raw
	id := derive("gsys_", sys.Raw)
	msg := ahp.Message{ID: id, Role: ahp.RoleSystem, Synthesized: true}
	parts := sys.Get("parts")
	if parts.Exists() && !parts.IsArray() {
		return badRequest("systemInstruction.parts is not an array")
	}
	var err error
	n := 0
	parts.ForEach(func(_, p gjson.Result) bool {
		var dp decodedPart
		dp, err = decodePart(p, partID(id, n), callIDs{})
		if err != nil {
			err = badRequest("systemInstruction.parts[%d] %v", n, err)
			return false
		}
		d.keep(&dp)
		msg.Parts = append(msg.Parts, dp.part)
		n++
		return true
	})
	if err != nil {
		return err
	}
	d.st.msgs[id] = msgOrigin{content: -1}
	d.req.Items = append(d.req.Items, msg)
	return nil
}

func (d *requestDecoder) keep(dp *decodedPart) {
	c := *dp
	d.st.parts[dp.part.ID] = &c
}

// content decodes contents[i]: a model content is one assistant message; a user content
// is split into runs of ordinary parts (user messages) and one tool message per
// functionResponse.
func (d *requestDecoder) content(i int, c gjson.Result) error {
	if !c.IsObject() {
		return badRequest("contents[%d] is not an object", i)
	}
	d.st.contents = append(d.st.contents, c.Raw)
	role := ahp.RoleUser
	if c.Get("role").String() == "model" {
		role = ahp.RoleAssistant
	}
	parts := c.Get("parts")
	if parts.Exists() && !parts.IsArray() {
		return badRequest("contents[%d].parts is not an array", i)
	}
	base := derive("gm_", strconv.Itoa(i), role, c.Raw)
	seen := callIDs{}
	var cur *ahp.Message
	run, n := 0, 0
	var err error
	parts.ForEach(func(_, p gjson.Result) bool {
		if !p.IsObject() {
			err = badRequest("contents[%d].parts[%d] is not an object", i, n)
			return false
		}
		pm := readPart(p)
		if role == ahp.RoleUser && pm.err == nil && pm.isResponse() {
			cur = nil
			id := base + ".t" + strconv.Itoa(n)
			var dp decodedPart
			if dp, err = decodeMembers(p, &pm, partID(id, 0), seen); err != nil {
				err = badRequest("contents[%d].parts[%d] %v", i, n, err)
				return false
			}
			d.keep(&dp)
			d.toolResult(i, id, &dp)
			n++
			return true
		}
		if cur == nil {
			id := base
			if run > 0 || n > 0 {
				id = base + ".r" + strconv.Itoa(run)
			}
			run++
			d.req.Items = append(d.req.Items, ahp.Message{ID: id, Role: role, Synthesized: true, Parts: []ahp.Part{}})
			d.st.msgs[id] = msgOrigin{content: i}
			cur = &d.req.Items[len(d.req.Items)-1]
		}
		var dp decodedPart
		if dp, err = decodeMembers(p, &pm, partID(cur.ID, len(cur.Parts)), seen); err != nil {
			err = badRequest("contents[%d].parts[%d] %v", i, n, err)
			return false
		}
		d.keep(&dp)
		if dp.kind == kindCall && role == ahp.RoleAssistant {
			d.calls = append(d.calls, seenCall{call: dp.call, content: i})
		}
		cur.Parts = append(cur.Parts, dp.part)
		n++
		return true
	})
	if err != nil {
		return err
	}
	if n == 0 { // a content without parts is still a message (the API decides on it)
		d.req.Items = append(d.req.Items, ahp.Message{ID: base, Role: role, Synthesized: true, Parts: []ahp.Part{}})
		d.st.msgs[base] = msgOrigin{content: i}
	}
	return nil
}

// toolResult adds the tool message of one functionResponse and joins it to its call: by
// id, else the first unanswered call of that name, latest model content first.
func (d *requestDecoder) toolResult(i int, id string, dp *decodedPart) {
	tr := mapping.ToolResult{ItemIndex: len(d.req.Items), ToolName: dp.respName, IsError: dp.respErr}
	match := -1
	if dp.respID != "" {
		for k := range d.calls {
			if d.calls[k].call.ID == dp.respID {
				match = k
				break
			}
		}
	} else {
		last := -1
		for k := len(d.calls) - 1; k >= 0; k-- {
			if last >= 0 && d.calls[k].content != last {
				break
			}
			if d.calls[k].call.Name == dp.respName {
				last = d.calls[k].content
			}
		}
		for k := range d.calls {
			if d.calls[k].content == last && !d.calls[k].used && d.calls[k].call.Name == dp.respName {
				match = k
				break
			}
		}
	}
	switch {
	case match >= 0:
		c := &d.calls[match]
		c.used = true
		tr.CallID, tr.Input, tr.CallFound = c.call.ID, c.call.Input, true
	case dp.respID != "":
		tr.CallID = dp.respID
	default:
		tr.CallID = derive("gcall_", "unanswered", strconv.Itoa(i), dp.respName, dp.raw)
	}
	if tr.ToolName == "" {
		tr.ToolName = "unknown"
	}
	d.req.ToolResults = append(d.req.ToolResults, tr)
	d.req.Items = append(d.req.Items, ahp.Message{ID: id, Role: ahp.RoleTool, Synthesized: true, Parts: []ahp.Part{dp.part}})
	d.st.msgs[id] = msgOrigin{content: i, tool: true, part: d.st.parts[dp.part.ID]}
}

// EncodeRequest renders the effective canonical list onto the original body. Unchanged
// contents and parts are copied byte for byte.
func (t *Translator) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	st, ok := req.Native.(*requestState)
	if !ok {
		return nil, fmt.Errorf("gemini: request was not decoded by this translator")
	}
	if messagesEqual(items, st.items) {
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
	case head == 1 && st.sysRaw != "" && len(st.items) > 0 && messageEqual(&items[0], &st.items[0]):
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
		if obj, err = setRaw(obj, st.sysKey, `{"parts":`+joinArray(parts)+`}`); err != nil {
			return nil, err
		}
	}
	contents, err := st.renderContents(items[head:])
	if err != nil {
		return nil, err
	}
	if obj, err = setRaw(obj, "contents", contents); err != nil {
		return nil, err
	}
	if st.nested {
		out, err := setRaw(string(req.Original), "generateContentRequest", obj)
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
			cur.parts = append(cur.parts, `{"text":`+quote("<"+tag+">\n"+b.String()+"\n</"+tag+">")+`}`)
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
			c, err := setRaw(orig, "parts", joinArray(g.parts))
			if err != nil {
				return "", err
			}
			if g.model != (gjson.Get(orig, "role").String() == "model") {
				role := `"user"`
				if g.model {
					role = `"model"`
				}
				if c, err = setRaw(c, "role", role); err != nil {
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
		out = append(out, `{"role":`+role+`,"parts":`+joinArray(g.parts)+`}`)
	}
	return joinArray(out), nil
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
	if len(m.Parts) == 1 && partEqual(&m.Parts[0], &o.part.part) {
		return o.part.raw, nil
	}
	var b strings.Builder
	for j := range m.Parts {
		if m.Parts[j].Text != nil {
			b.WriteString(*m.Parts[j].Text)
		}
	}
	text := b.String()
	resp := `{"output":` + quote(text) + `}`
	if v := gjson.Parse(text); v.IsObject() && json.Valid([]byte(text)) {
		resp = text
	}
	return setRaw(o.part.raw, o.part.key+".response", resp)
}

// deleteKey removes a top-level member of a JSON object.
func deleteKey(obj, key string) string {
	m := mapping.TopMembers(gjson.Parse(obj))
	return m.Without(key)
}
