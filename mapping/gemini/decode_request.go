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
// (AHP-CONTENT-001).
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
	if c := obj.Get("contents"); !st.nested && (strings.Contains(c.Raw, "ileUri") || strings.Contains(c.Raw, "ile_uri")) {
		// A file referenced by URI (fileData) is fetched by the provider: its URI and
		// display name are the contents residue (mapping.ResidueMembers).
		if r, ok := mapping.Residue(c, contentResidue); ok {
			if p, err := mapping.SetRaw(params, "contents", r); err == nil {
				params = p
			}
		}
	}
	if st.nested {
		// params keep their place in the body (hookproxy.redact_params patches them there)
		outer := mapping.TopMembers(root).Without("generateContentRequest")
		if p, err := mapping.SetRaw(outer, "generateContentRequest", params); err == nil {
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
		// previous_response_id, so no whole-list replace is offered.
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

// contentResidue is the residue of one content: for each part, its fileData's URI and
// display name, in the spelling the client used.
func contentResidue(c gjson.Result) string {
	r, ok := mapping.Residue(c.Get("parts"), func(p gjson.Result) string {
		return mapping.PickStrings(p, nil, "fileData.fileUri", "fileData.displayName", "file_data.file_uri", "file_data.display_name")
	})
	if !ok {
		return ""
	}
	return `{"parts":` + r + `}`
}
