package gemini

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// SynthesizedIDPrefix starts the responseId of every response hookproxy builds itself.
const SynthesizedIDPrefix = "hookproxy-"

// responseState is the private state of a decoded response (mapping.Response.Native).
type responseState struct {
	obj   string // the response object (the merged chunks of an array stream)
	array bool   // the body was the JSON-array stream
	cands []candidate
	items []ahp.Message
	parts map[string]*decodedPart
}

// candidate is one native candidate and the message it became.
type candidate struct {
	raw   string
	msgID string
}

// DecodeResponse parses a generateContent response, or the JSON array of a
// streamGenerateContent call without alt=sse.
func (t *Translator) DecodeResponse(body []byte) (*mapping.Response, error) {
	if err := strictJSON.Check(body); err != nil {
		return nil, fmt.Errorf("%w: %v", mapping.ErrMalformed, err)
	}
	trimmed := bytes.TrimSpace(body)
	obj := string(trimmed)
	array := len(trimmed) > 0 && trimmed[0] == '['
	if array {
		var m merger
		var err error
		gjson.ParseBytes(trimmed).ForEach(func(_, chunk gjson.Result) bool {
			err = m.add(chunk)
			return err == nil
		})
		if err != nil {
			return nil, err
		}
		if m.chunks == 0 {
			return nil, fmt.Errorf("%w: an empty response stream", mapping.ErrMalformed)
		}
		obj = m.render()
	}
	root := gjson.Parse(obj)
	if !root.IsObject() {
		return nil, fmt.Errorf("%w: not a JSON object", mapping.ErrMalformed)
	}
	if ue := errorOf(root); ue != nil {
		return nil, ue
	}
	resp := &mapping.Response{Model: root.Get("modelVersion").String(), Original: body}
	st := &responseState{obj: obj, array: array, parts: map[string]*decodedPart{}}
	resp.ID = root.Get("responseId").String()
	synthesized := resp.ID == ""
	if synthesized {
		resp.ID = derive("gresp_", obj)
	}
	cands := root.Get("candidates")
	if cands.Exists() && !cands.IsArray() {
		return nil, fmt.Errorf("%w: candidates is not an array", mapping.ErrMalformed)
	}
	var err error
	n := 0
	cands.ForEach(func(_, c gjson.Result) bool {
		if !c.IsObject() {
			err = fmt.Errorf("%w: candidates[%d] is not an object", mapping.ErrMalformed, n)
			return false
		}
		msgID := resp.ID
		if n > 0 {
			msgID += "/" + strconv.Itoa(n)
		}
		msg := ahp.Message{ID: msgID, Role: ahp.RoleAssistant, Synthesized: synthesized, Parts: []ahp.Part{}}
		if content := c.Get("content"); content.Exists() && !content.IsObject() {
			err = fmt.Errorf("%w: candidates[%d].content is not an object", mapping.ErrMalformed, n)
			return false
		}
		parts := c.Get("content.parts")
		if parts.Exists() && !parts.IsArray() {
			err = fmt.Errorf("%w: candidates[%d].content.parts is not an array", mapping.ErrMalformed, n)
			return false
		}
		seen := callIDs{}
		parts.ForEach(func(_, p gjson.Result) bool {
			var dp decodedPart
			if dp, err = decodePart(p, partID(msgID, len(msg.Parts)), seen); err != nil {
				err = fmt.Errorf("%w: candidates[%d] part %v", mapping.ErrMalformed, n, err)
				return false
			}
			if dp.kind == kindResponse {
				dp.kind, dp.part = kindOther, gapPart(dp.part.ID, "a functionResponse in a model answer has no canonical form")
			}
			c := dp
			st.parts[dp.part.ID] = &c
			msg.Parts = append(msg.Parts, dp.part)
			return true
		})
		if err != nil {
			return false
		}
		if n == 0 {
			resp.FinishReason = c.Get("finishReason").String()
		}
		st.cands = append(st.cands, candidate{raw: c.Raw, msgID: msgID})
		resp.Items = append(resp.Items, msg)
		n++
		return true
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		if br := root.Get("promptFeedback.blockReason").String(); br != "" {
			resp.FinishReason = br // the prompt was blocked: no candidate at all
		}
	}
	resp.Usage = usageOf(root.Get("usageMetadata"))
	resp.HostedCalls = hostedCalls(resp.Items, st)
	st.items = ahp.CloneMessages(resp.Items)
	resp.Native = st
	return resp, nil
}

// errorOf reads a Gemini error object ({"error":{"code","message","status"}}).
func errorOf(root gjson.Result) *mapping.UpstreamError {
	e := root.Get("error")
	if !e.IsObject() {
		return nil
	}
	ue := &mapping.UpstreamError{Type: e.Get("status").String(), Message: e.Get("message").String()}
	ue.Status = int(e.Get("code").Int())
	if ue.Status == 0 {
		ue.Status = statusForName[ue.Type]
	}
	if ue.Type == "" {
		ue.Type = "http_" + strconv.Itoa(ue.Status)
	}
	return ue
}

// usageOf maps usageMetadata. Thought tokens are output the model produced.
func usageOf(u gjson.Result) *ahp.Usage {
	if !u.IsObject() {
		return nil
	}
	count := func(keys ...string) *int64 {
		var total int64
		found := false
		for _, k := range keys {
			if v := u.Get(k); v.Type == gjson.Number {
				total += v.Int()
				found = true
			}
		}
		if !found {
			return nil
		}
		return &total
	}
	out := &ahp.Usage{Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider",
		InputTokens:     count("promptTokenCount"),
		OutputTokens:    count("candidatesTokenCount", "thoughtsTokenCount"),
		CacheReadTokens: count("cachedContentTokenCount"),
	}
	if out.InputTokens == nil && out.OutputTokens == nil && out.CacheReadTokens == nil {
		return nil
	}
	return out
}

// hostedCalls are the code executions Gemini ran while answering (executableCode parts,
// each followed by its codeExecutionResult): observed only, a proxy cannot prevent them.
func hostedCalls(items []ahp.Message, st *responseState) []mapping.HostedCall {
	var out []mapping.HostedCall
	for i := range items {
		var open *mapping.HostedCall
		for j := range items[i].Parts {
			dp := st.parts[items[i].Parts[j].ID]
			if dp == nil || dp.kind != kindOther {
				continue
			}
			p := gjson.Parse(dp.raw)
			if ec, _, _ := field(p, "executableCode"); ec.IsObject() {
				out = append(out, mapping.HostedCall{Name: "code_execution", Input: []byte(compactJSON(ec.Raw))})
				open = &out[len(out)-1]
				continue
			}
			if r, _, _ := field(p, "codeExecutionResult"); r.IsObject() && open != nil {
				open.Result = compactJSON(r.Raw)
				open.IsError = r.Get("outcome").String() != "" && r.Get("outcome").String() != "OUTCOME_OK"
				open = nil
			}
		}
	}
	return out
}

// EncodeResponse renders the effective assistant messages and finish reason onto the
// original response. Each message goes back to its candidate; a new message (a note of
// removed calls, or content a policy added) joins the candidate before it.
func (t *Translator) EncodeResponse(resp *mapping.Response, items []ahp.Message, finishReason string) ([]byte, error) {
	st, ok := resp.Native.(*responseState)
	if !ok {
		return nil, fmt.Errorf("gemini: response was not decoded by this translator")
	}
	if finishReason == "" && messagesEqual(items, st.items) {
		return resp.Original, nil
	}
	byID := make(map[string]int, len(st.cands))
	for i, c := range st.cands {
		byID[c.msgID] = i
	}
	parts := make([][]string, max(len(st.cands), 1))
	cand := 0
	for k := range items {
		m := &items[k]
		if m.Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("gemini: a %s message cannot be part of a model answer", m.Role)
		}
		if i, ok := byID[m.ID]; ok {
			cand = i
		}
		for j := range m.Parts {
			r, err := renderPart(&m.Parts[j], st.parts[m.Parts[j].ID])
			if err != nil {
				return nil, err
			}
			parts[cand] = append(parts[cand], r)
		}
	}
	var cands []string
	for i := range parts {
		c := `{"content":{"role":"model"},"index":` + strconv.Itoa(i) + `}`
		if i < len(st.cands) {
			c = st.cands[i].raw
		}
		var err error
		if c, err = setRaw(c, "content.parts", joinArray(parts[i])); err != nil {
			return nil, err
		}
		if finishReason != "" {
			if c, err = setRaw(c, "finishReason", quote(finishReason)); err != nil {
				return nil, err
			}
		}
		cands = append(cands, c)
	}
	obj, err := setRaw(st.obj, "candidates", joinArray(cands))
	if err != nil {
		return nil, err
	}
	if st.array {
		return []byte("[" + obj + "]"), nil
	}
	return []byte(obj), nil
}

// SynthesizeResponse builds a complete Gemini response for a request answered without
// calling the upstream. It carries no usageMetadata: no usage is invented.
func (t *Translator) SynthesizeResponse(req *mapping.Request, items []ahp.Message, finishReason string) ([]byte, error) {
	if finishReason == "" {
		finishReason = "STOP"
	}
	var parts []string
	var ids []string
	for k := range items {
		ids = append(ids, items[k].ID)
		for j := range items[k].Parts {
			r, err := renderPart(&items[k].Parts[j], nil)
			if err != nil {
				return nil, err
			}
			parts = append(parts, r)
		}
	}
	model := t.ep.Model
	if req != nil && req.Model != "" {
		model = req.Model
	}
	obj := `{"candidates":[{"content":{"role":"model","parts":` + joinArray(parts) + `},"finishReason":` + quote(finishReason) +
		`,"index":0}],"modelVersion":` + quote(model) + `,"responseId":` + quote(derive(SynthesizedIDPrefix, append(ids, joinArray(parts))...)) + `}`
	if t.arrayStream() {
		return []byte("[" + obj + "]"), nil
	}
	return []byte(obj), nil
}
