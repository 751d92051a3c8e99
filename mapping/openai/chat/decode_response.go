package chat

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// chatResponse is the private state of a decoded chat completion (mapping.Response.Native).
type chatResponse struct {
	natives
	items   []ahp.Message // private copy of Response.Items; items[i] is choices[i]
	choices []responseChoice
}

// responseChoice is one original choice.
type responseChoice struct {
	msgID    string
	raw      string // choices[i].message
	finish   string
	hadCalls bool
}

// DecodeResponse implements mapping.Translator. Every choice becomes one assistant message
// (see the package documentation for n > 1).
func (c *Chat) DecodeResponse(body []byte) (*mapping.Response, error) {
	// As strict as a client body: with a duplicate key, gjson would judge the
	// first value and the client's SDK act on the last.
	if err := oaiwire.CheckClientJSON(body); err != nil {
		return nil, fmt.Errorf("openai chat: response: %v: %w", err, mapping.ErrMalformed)
	}
	s := string(body)
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, fmt.Errorf("openai chat: response is not a JSON object: %w", mapping.ErrMalformed)
	}
	choices := root.Get("choices")
	if ue := upstreamError(root); ue != nil && !choices.Exists() {
		return nil, ue
	}
	if !choices.IsArray() || len(choices.Array()) == 0 {
		return nil, fmt.Errorf("openai chat: response has no choices: %w", mapping.ErrMalformed)
	}
	resp := &mapping.Response{
		ID:       root.Get("id").String(),
		Model:    root.Get("model").String(),
		Usage:    oaiwire.Usage(root.Get("usage"), chatUsagePaths),
		Original: body,
	}
	baseID, synthesized := resp.ID, false
	if baseID == "" {
		baseID, synthesized = messageID(nil, 0, "response", s), true
	}
	st := &chatResponse{natives: newNatives()}
	var err error
	choices.ForEach(func(_, ch gjson.Result) bool {
		k := len(st.choices)
		msgID := baseID
		if k > 0 {
			msgID = baseID + ".choice" + strconv.Itoa(k)
		}
		m := ch.Get("message")
		if !m.IsObject() {
			err = fmt.Errorf("openai chat: choices[%d] has no message object: %w", k, mapping.ErrMalformed)
			return false
		}
		var parts []ahp.Part
		if parts, err = st.decodeMessage(m, msgID); err != nil {
			err = fmt.Errorf("openai chat: choices[%d]: %v: %w", k, err, mapping.ErrMalformed)
			return false
		}
		rc := responseChoice{msgID: msgID, raw: m.Raw, finish: ch.Get("finish_reason").String()}
		rc.hadCalls = len(mapping.ToolCalls([]ahp.Message{{Parts: parts}})) > 0
		st.choices = append(st.choices, rc)
		resp.Items = append(resp.Items, ahp.Message{ID: msgID, Role: ahp.RoleAssistant, Parts: parts, Synthesized: synthesized})
		return true
	})
	if err != nil {
		return nil, err
	}
	resp.FinishReason = st.choices[0].finish
	st.items = ahp.CloneMessages(resp.Items)
	resp.Native = st
	return resp, nil
}

// upstreamError returns the error an OpenAI error body carries, or nil.
func upstreamError(root gjson.Result) *mapping.UpstreamError {
	return oaiwire.UpstreamError(root.Get("error"))
}

// decodeMessage decodes a response message: reasoning, text, refusal, audio, tool calls.
func (st *chatResponse) decodeMessage(m gjson.Result, msgID string) ([]ahp.Part, error) {
	var parts []ahp.Part
	add := func(p ahp.Part, np nativePart) {
		st.addPart(p, np)
		parts = append(parts, p)
	}
	for _, f := range []string{"reasoning_content", "reasoning"} {
		if r := m.Get(f); r.Type == gjson.String {
			add(oaiwire.TextPart(partID(msgID, len(parts)), r.Str, ahp.CategoryReasoning), nativePart{src: srcReasoning, field: f})
			break
		}
	}
	switch c := m.Get("content"); {
	case c.Type == gjson.String:
		add(ahp.TextPart(partID(msgID, len(parts)), c.Str), nativePart{src: srcString})
	case c.IsArray():
		// Some compatible servers answer with content parts; only text can be carried.
		var err error
		c.ForEach(func(_, e gjson.Result) bool {
			t := e.Get("text")
			if !e.IsObject() || t.Type != gjson.String {
				err = fmt.Errorf("content part is not text")
				return false
			}
			add(ahp.TextPart(partID(msgID, len(parts)), t.Str), nativePart{src: srcString})
			return true
		})
		if err != nil {
			return nil, err
		}
	case c.Exists() && c.Type != gjson.Null:
		return nil, fmt.Errorf("content is neither a string nor null")
	}
	if r := m.Get("refusal"); r.Type == gjson.String {
		add(ahp.TextPart(partID(msgID, len(parts)), r.Str), nativePart{src: srcRefusalField})
	}
	if a := m.Get("audio"); a.IsObject() {
		du := oaiwire.DataURL{Payload: a.Get("data").String(), Base64: true}
		add(oaiwire.MetadataAttachment(partID(msgID, len(parts)), "audio/*", du), nativePart{src: srcAudioOutput, inline: &inlineData{data: du, hasData: true}})
	}
	tcs := m.Get("tool_calls")
	if tcs.Exists() && tcs.Type != gjson.Null && !tcs.IsArray() {
		return nil, fmt.Errorf("tool_calls is not an array")
	}
	var err error
	tcs.ForEach(func(_, e gjson.Result) bool {
		k := len(parts)
		var p ahp.Part
		p, _, err = st.decodeCall(e, partID(msgID, k), "call_"+messageID(nil, k, msgID, e.Raw)[1:])
		if err == nil {
			parts = append(parts, p)
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if fc := m.Get("function_call"); fc.Exists() && fc.Type != gjson.Null {
		p, _, err := st.decodeLegacyCall(fc, partID(msgID, len(parts)))
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if parts == nil {
		parts = []ahp.Part{}
	}
	return parts, nil
}

// NoToolCalls implements mapping.CallScreen: a response names its calls under tool_calls
// (or the legacy function_call) in every choice's message.
func (*Chat) NoToolCalls(body []byte) bool {
	return !mapping.MayHold(body, "tool_calls", "function_call") && oaiwire.CheckClientJSON(body) == nil
}
