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

// NoToolCalls implements mapping.CallScreen: a call is a functionCall part (function_call
// in the snake_case spelling the decoder also reads).
func (*Translator) NoToolCalls(body []byte) bool {
	return !mapping.MayHold(body, "functionCall", "function_call") && strictJSON.Check(body) == nil
}
