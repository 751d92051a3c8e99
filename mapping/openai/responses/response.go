package responses

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// As strict as a client body (issue 13 §3): with a duplicate key, gjson would judge the
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
		status, details = "incomplete", `{"reason":`+oaiwire.JSONString(finish)+`}`
	}
	out, err := sjson.SetRaw(raw, "status", oaiwire.JSONString(status))
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

// EncodeResponse implements mapping.Translator. It rebuilds "output" from the effective
// parts: unchanged items keep their bytes, edited ones are patched, items whose parts are
// gone (a denied function_call) vanish, new text becomes a message item, opaque items stay
// in place. finishReason, when it differs, is written as status (and incomplete_details).
func (t *Translator) EncodeResponse(resp *mapping.Response, items []ahp.Message, finish string) ([]byte, error) {
	st, ok := resp.Native.(*responseState)
	if !ok {
		return nil, fmt.Errorf("openai responses: response was not decoded by this translator")
	}
	if finish == "" {
		finish = resp.FinishReason
	}
	same := oaiwire.ItemsEqual(items, st.decoded)
	if finish == resp.FinishReason && same {
		return resp.Original, nil
	}
	out := string(resp.Original)
	var err error
	if !same {
		var parts []ahp.Part
		survives := false
		for i := range items {
			if items[i].Role != ahp.RoleAssistant {
				return nil, fmt.Errorf("openai responses: response item %s has role %q; a response carries assistant messages only", items[i].ID, items[i].Role)
			}
			survives = survives || items[i].ID == st.msgID
			parts = append(parts, items[i].Parts...)
		}
		r := &renderer{n: &st.natives, response: true, seed: st.msgID}
		segs, err := r.segments(0, ahp.RoleAssistant, "", parts)
		if err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
		var of []int // the items of the response message
		for n := range st.items {
			if st.items[n].kind != itemOpaque {
				of = append(of, n)
			}
		}
		if survives {
			segs = st.withEmptyItems(of, segs)
		}
		rendered, err := r.walk(segs, of)
		if err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
		if out, err = sjson.SetRaw(out, "output", rendered); err != nil {
			return nil, fmt.Errorf("openai responses: set output: %w", err)
		}
		if gjson.Get(out, "output_text").Type == gjson.String {
			// Some servers include the SDK convenience field; keep it true to the output.
			if out, err = sjson.SetRaw(out, "output_text", oaiwire.JSONString(outputText(gjson.Get(out, "output")))); err != nil {
				return nil, fmt.Errorf("openai responses: set output_text: %w", err)
			}
		}
	}
	if finish != resp.FinishReason {
		if out, err = setFinish(out, finish); err != nil {
			return nil, fmt.Errorf("openai responses: set status: %w", err)
		}
	}
	return []byte(out), nil
}

// walk renders the segments of the single response message in native output order: opaque
// items in place, each item where it was, new items after the item before them.
func (r *renderer) walk(segs []segment, of []int) (string, error) {
	var out []string
	next := 0
	segAt := segmentIndex(segs)
	emit := func(upTo int) error {
		for ; next < upTo; next++ {
			raw, err := r.render(&segs[next])
			if err != nil {
				return err
			}
			out = append(out, raw)
		}
		return nil
	}
	for n := range r.n.items {
		if r.n.items[n].kind == itemOpaque {
			out = append(out, r.n.items[n].raw)
			continue
		}
		upTo := next
		if si, ok := segAt[n]; ok && si >= next {
			upTo = si + 1
		}
		if len(of) > 0 && of[len(of)-1] == n {
			upTo = len(segs)
		}
		if err := emit(upTo); err != nil {
			return "", err
		}
	}
	if err := emit(len(segs)); err != nil {
		return "", err
	}
	return "[" + strings.Join(out, ",") + "]", nil
}

// outputText concatenates the output_text entries of the message items of an output array.
func outputText(output gjson.Result) string {
	var b strings.Builder
	output.ForEach(func(_, it gjson.Result) bool {
		if it.Get("type").String() == "message" {
			for _, e := range arrayOf(it.Get("content")) {
				if e.Get("type").String() == "output_text" {
					b.WriteString(e.Get("text").String())
				}
			}
		}
		return true
	})
	return b.String()
}

// echoedParams are the request members a synthesized response repeats, as the API's own
// responses do; the rest of a response describes a model call that did not happen.
var echoedParams = [...]string{"max_output_tokens", "previous_response_id", "reasoning", "store",
	"temperature", "text", "top_p", "truncation", "user", "safety_identifier", "prompt_cache_key"}

// SynthesizeResponse implements mapping.Translator: a complete response object for a request
// answered without the upstream. It carries no usage: hookproxy never invents token counts
// (the SDK does not need the member).
func (t *Translator) SynthesizeResponse(req *mapping.Request, items []ahp.Message, finish string) ([]byte, error) {
	var parts []ahp.Part
	for i := range items {
		if items[i].Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("openai responses: supplied item %s has role %q; a response carries assistant messages only", items[i].ID, items[i].Role)
		}
		parts = append(parts, items[i].Parts...)
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	id := "resp_hookproxy_" + hex.EncodeToString(rnd[:])
	n := newNatives()
	r := &renderer{n: &n, response: true, seed: id}
	segs, err := r.segments(-1, ahp.RoleAssistant, "", parts)
	if err != nil {
		return nil, fmt.Errorf("openai responses: %w", err)
	}
	output, err := r.walk(segs, nil)
	if err != nil {
		return nil, fmt.Errorf("openai responses: %w", err)
	}
	if finish == "" {
		finish = t.TerminalFinishReason()
	}
	var params gjson.Result
	var model string
	instructions := "null"
	if req != nil {
		model = req.Model
		params = gjson.ParseBytes(req.Params)
		if st, ok := req.Native.(*requestState); ok && st.instrID != "" {
			instructions = gjson.GetBytes(req.Original, "instructions").Raw
		}
	}
	param := func(name, def string) string {
		if v := params.Get(name); v.Exists() {
			return oaiwire.CompactJSON(v.Raw)
		}
		return def
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	b := make([]byte, 0, 512+len(output))
	b = append(b, `{"id":`...)
	b = oaiwire.AppendJSONString(b, id)
	b = append(b, `,"object":"response","created_at":`+now+`,"status":"completed","completed_at":`+now+
		`,"error":null,"incomplete_details":null,"instructions":`...)
	b = append(b, oaiwire.CompactJSON(instructions)...)
	b = append(b, `,"metadata":`+param("metadata", "{}")+`,"model":`...)
	b = oaiwire.AppendJSONString(b, model)
	b = append(b, `,"output":`...)
	b = append(b, output...)
	b = append(b, `,"parallel_tool_calls":`+param("parallel_tool_calls", "true")+
		`,"tool_choice":`+param("tool_choice", `"auto"`)+`,"tools":`+param("tools", "[]")...)
	for _, name := range echoedParams {
		if v := params.Get(name); v.Exists() {
			b = append(b, ',')
			b = oaiwire.AppendJSONString(b, name)
			b = append(b, ':')
			b = append(b, oaiwire.CompactJSON(v.Raw)...)
		}
	}
	b = append(b, '}')
	if finish == "completed" {
		return b, nil
	}
	out, err := setFinish(string(b), finish)
	if err != nil {
		return nil, fmt.Errorf("openai responses: set status: %w", err)
	}
	return []byte(out), nil
}

// usagePaths names the token counts of a Responses usage object, which reports no cache
// writes.
var usagePaths = oaiwire.UsagePaths{
	Input:     "input_tokens",
	Output:    "output_tokens",
	CacheRead: "input_tokens_details.cached_tokens",
}
