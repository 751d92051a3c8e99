package responses

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// responseState is the private state of a decoded response (mapping.Response.Native).
type responseState struct {
	natives
	decoded []ahp.Message // a private copy of Response.Items as decoded
	msgID   string
}

// DecodeResponse implements mapping.Translator. The whole output is one assistant message
// (id = the response id) whose parts keep the native order; output items the canonical view
// cannot carry (hosted tool calls, call outputs, ...) stay in the body untouched.
func (*Translator) DecodeResponse(body []byte) (*mapping.Response, error) {
	// As strict as a client body: with a duplicate key, gjson would judge the
	// first value and the client's SDK act on the last.
	if err := oaiwire.CheckClientJSON(body); err != nil {
		return nil, fmt.Errorf("openai responses: response: %v: %w", err, mapping.ErrMalformed)
	}
	s := string(body)
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, fmt.Errorf("openai responses: response is not a JSON object: %w", mapping.ErrMalformed)
	}
	if ue := upstreamError(root); ue != nil {
		return nil, ue
	}
	output := root.Get("output")
	switch {
	case output.IsArray():
	case (!output.Exists() || output.Type == gjson.Null) && root.Get("object").String() == "response":
		// A response still queued or in progress (background mode) has no output yet.
	default:
		return nil, fmt.Errorf("openai responses: response has no output array: %w", mapping.ErrMalformed)
	}
	resp := &mapping.Response{
		ID:           root.Get("id").String(),
		Model:        root.Get("model").String(),
		FinishReason: finishReason(root),
		Usage:        oaiwire.Usage(root.Get("usage"), usagePaths),
		Original:     body,
	}
	st := &responseState{natives: newNatives(), msgID: resp.ID}
	synthesized := st.msgID == ""
	if synthesized {
		st.msgID = hashID("resp_", s)
	}
	d := decoder{n: &st.natives}
	parts := []ahp.Part{}
	var err error
	for k, it := range arrayOf(output) {
		where := "output[" + strconv.Itoa(k) + "]"
		if !it.IsObject() {
			err = fmt.Errorf("%s is not an object", where)
			break
		}
		idx := len(st.items)
		ni := nativeItem{raw: it.Raw, typ: it.Get("type").String(), msg: 0}
		before := len(parts)
		switch {
		case ni.typ == "message":
			ni.kind, ni.role = itemMessage, ahp.RoleAssistant
			parts, _, err = d.content(it.Get("content"), st.msgID, parts, idx, where)
		case clientCall(it): // function_call and the other call items the client runs (tools.go)
			ni.kind = itemCall
			var p ahp.Part
			fallback := hashID("call_", strconv.Itoa(idx), it.Raw)
			if p, err = d.call(it, ni.typ, partID(st.msgID, len(parts)), idx, fallback, where); err == nil {
				ni.callID = st.calls[p.ID].id
				parts = append(parts, p)
			}
		case ni.typ == "reasoning":
			ni.kind = itemReasoning
			parts, err = d.reasoning(it, st.msgID, parts, idx, where)
		default:
			ni.kind, ni.msg = itemOpaque, -1
		}
		if err != nil {
			break
		}
		for _, p := range parts[before:] {
			ni.parts = append(ni.parts, p.ID)
		}
		st.items = append(st.items, ni)
	}
	if err != nil {
		return nil, fmt.Errorf("openai responses: %v: %w", err, mapping.ErrMalformed)
	}
	resp.Items = []ahp.Message{{ID: st.msgID, Role: ahp.RoleAssistant, Parts: parts, Synthesized: synthesized}}
	resp.HostedCalls = hostedCalls(output)
	st.decoded = ahp.CloneMessages(resp.Items)
	resp.Native = st
	return resp, nil
}

// upstreamError returns the error a body carries: an HTTP error body, or a response object
// that failed.
func upstreamError(root gjson.Result) *mapping.UpstreamError {
	e := root.Get("error")
	if e.IsObject() {
		if st := root.Get("status").String(); st == "completed" || st == "incomplete" {
			return nil // a finished response: an error member there would be stale
		}
	}
	return oaiwire.UpstreamError(e)
}

// finishReason is the native stop reason: "completed" for a finished response, the
// incomplete_details reason ("max_output_tokens", "content_filter") for an incomplete one,
// otherwise the status itself; "" when the body names none.
func finishReason(root gjson.Result) string {
	status := root.Get("status").String()
	if status == "incomplete" {
		if r := root.Get("incomplete_details.reason").String(); r != "" {
			return r
		}
	}
	return status
}

// responseStatuses are the values of a response's status.
var responseStatuses = map[string]bool{"completed": true, "incomplete": true, "failed": true,
	"cancelled": true, "in_progress": true, "queued": true}

// setFinish writes a finish reason back as status and incomplete_details.
func setFinish(raw, finish string) (string, error) {
	status, details := finish, "null"
	if !responseStatuses[finish] {
		status, details = "incomplete", `{"reason":`+mapping.Quote(finish)+`}`
	}
	out, err := sjson.SetRaw(raw, "status", mapping.Quote(status))
	if err == nil && (status == "incomplete" || gjson.Get(out, "incomplete_details").Exists()) {
		if status == "incomplete" && details == "null" {
			details = gjson.Get(out, "incomplete_details").Raw
			if details == "" {
				details = "null"
			}
		}
		out, err = sjson.SetRaw(out, "incomplete_details", details)
	}
	return out, err
}

// NoToolCalls implements mapping.CallScreen: every call item type the client runs ends in
// _call (callTools), so a body where no string ends so holds none.
func (*Translator) NoToolCalls(body []byte) bool {
	return !mapping.MayHold(body, `_call"`) && oaiwire.CheckClientJSON(body) == nil
}
