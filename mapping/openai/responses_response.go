package openai

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// responsesResponse is the private state of a decoded Responses response.
type responsesResponse struct {
	natives
	items     []ahp.Message // private copy of Response.Items (one message)
	output    []outputItem
	itemParts map[int][]ahp.Part // output index -> the parts decoded from it
}

// outputItem is one original output item.
type outputItem struct {
	raw  string
	kind string // kindMessage, kindReasoning, kindFunctionCall, kindCustomCall; "" kept opaque
}

// DecodeResponse implements mapping.Translator.
func (r *Responses) DecodeResponse(body []byte) (*mapping.Response, error) {
	if !json.Valid(body) {
		return nil, fmt.Errorf("openai responses: response is not JSON: %w", mapping.ErrMalformed)
	}
	s := string(body)
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, fmt.Errorf("openai responses: response is not a JSON object: %w", mapping.ErrMalformed)
	}
	output := root.Get("output")
	if ue := upstreamError(root); ue != nil && !output.Exists() {
		return nil, ue
	}
	if root.Get("status").Str == "failed" {
		e := root.Get("error")
		return nil, &mapping.UpstreamError{Type: e.Get("code").String(), Message: e.Get("message").String()}
	}
	if !output.IsArray() {
		return nil, fmt.Errorf("openai responses: response has no output array: %w", mapping.ErrMalformed)
	}
	resp := &mapping.Response{
		ID:           root.Get("id").String(),
		Model:        root.Get("model").String(),
		FinishReason: responsesFinish(root),
		Usage:        responsesUsage(root.Get("usage")),
		Original:     body,
	}
	msgID, synthesized := resp.ID, false
	if msgID == "" {
		msgID, synthesized = messageID(0, "response", s), true
	}
	st := &responsesResponse{natives: newNatives(), itemParts: map[int][]ahp.Part{}}
	var parts []ahp.Part
	var err error
	output.ForEach(func(_, it gjson.Result) bool {
		k := len(st.output)
		first := len(parts)
		oi := outputItem{raw: it.Raw, kind: it.Get("type").String()}
		switch oi.kind {
		case kindMessage:
			it.Get("content").ForEach(func(_, e gjson.Result) bool {
				var p ahp.Part
				p, _, err = st.responsesEntry(e, partID(msgID, len(parts)))
				if err == nil {
					parts = append(parts, p)
				}
				return err == nil
			})
		case kindReasoning:
			parts = st.decodeReasoning(it, msgID, parts)
		case kindFunctionCall, kindCustomCall:
			var p ahp.Part
			p, _, err = st.decodeResponsesCall(it, partID(msgID, len(parts)), "call_"+messageID(k, msgID, it.Raw)[1:])
			if err == nil {
				parts = append(parts, p)
				st.calls[p.ID].item = k
			}
		default:
			oi.kind = "" // hosted tool calls and other items pass through untouched
		}
		if err != nil {
			err = fmt.Errorf("openai responses: output[%d]: %v: %w", k, err, mapping.ErrMalformed)
			return false
		}
		for i := first; i < len(parts); i++ {
			if np := st.parts[parts[i].ID]; np != nil {
				np.item = k
			}
		}
		st.itemParts[k] = cloneParts(parts[first:])
		st.output = append(st.output, oi)
		return true
	})
	if err != nil {
		return nil, err
	}
	if parts == nil {
		parts = []ahp.Part{}
	}
	resp.Items = []ahp.Message{{ID: msgID, Role: ahp.RoleAssistant, Parts: parts, Synthesized: synthesized}}
	st.items = cloneItems(resp.Items)
	resp.Native = st
	return resp, nil
}

// responsesFinish is the finish reason of a response: its status, or the reason it is
// incomplete.
func responsesFinish(root gjson.Result) string {
	status := root.Get("status").String()
	if status == "incomplete" {
		if r := root.Get("incomplete_details.reason"); r.Type == gjson.String && r.Str != "" {
			return r.Str
		}
	}
	return status
}

// responsesUsage maps usage; unreported counts stay unknown.
func responsesUsage(u gjson.Result) *ahp.Usage {
	if !u.IsObject() {
		return nil
	}
	count := func(path string) *int64 {
		v := u.Get(path)
		if v.Type != gjson.Number {
			return nil
		}
		n := v.Int()
		return &n
	}
	return &ahp.Usage{
		Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider",
		InputTokens:      count("input_tokens"),
		OutputTokens:     count("output_tokens"),
		CacheReadTokens:  count("input_tokens_details.cached_tokens"),
		CacheWriteTokens: count("input_tokens_details.cache_write_tokens"),
	}
}

// slot is one output item to render: an original item (orig >= 0) or a new one.
type slot struct {
	orig  int
	kind  string
	parts []*ahp.Part
}

// planOutput assigns parts to output items, in part order: a part goes back to the item it
// came from; a new tool call becomes a new function_call item; new text joins the message
// item before it, or starts a new one.
func (n *natives) planOutput(items []ahp.Message, output []outputItem) ([]*slot, error) {
	var slots []*slot
	byOrig := map[int]*slot{}
	for i := range items {
		if items[i].Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("item %s has role %q; a response carries assistant messages only", items[i].ID, items[i].Role)
		}
		for j := range items[i].Parts {
			p := &items[i].Parts[j]
			o, kind := -1, ""
			if p.Category == ahp.CategoryToolCall {
				nc := n.calls[p.ID]
				if nc == nil {
					if c, ok := mapping.ParseToolCall(p); ok {
						nc = n.callIDs[c.ID]
					}
				}
				if nc != nil {
					o = nc.item
				} else {
					kind = kindFunctionCall
				}
			} else if np := n.parts[p.ID]; np != nil && np.item >= 0 && np.item < len(output) {
				o = np.item
			} else if p.Category == ahp.CategoryReasoning {
				return nil, fmt.Errorf("part %s: a reasoning item cannot be created", p.ID)
			}
			if o >= 0 && o < len(output) {
				s := byOrig[o]
				if s == nil {
					s = &slot{orig: o, kind: output[o].kind}
					byOrig[o] = s
					slots = append(slots, s)
				}
				s.parts = append(s.parts, p)
				continue
			}
			if kind == "" && len(slots) > 0 && slots[len(slots)-1].kind == kindMessage {
				last := slots[len(slots)-1]
				last.parts = append(last.parts, p)
				continue
			}
			if kind == "" {
				kind = kindMessage
			}
			slots = append(slots, &slot{orig: -1, kind: kind, parts: []*ahp.Part{p}})
		}
	}
	return slots, nil
}

// renderOutput renders planned slots as the output array, keeping items the canonical view
// does not carry in their original places.
func (n *natives) renderOutput(slots []*slot, output []outputItem, itemParts map[int][]ahp.Part) (string, error) {
	var out []string
	next := 0
	placeOpaque := func(upTo int) {
		for ; next < upTo && next < len(output); next++ {
			if output[next].kind == "" {
				out = append(out, output[next].raw)
			}
		}
	}
	newIDs := 0
	for _, s := range slots {
		if s.orig >= 0 {
			placeOpaque(s.orig)
		}
		raw, err := n.renderSlot(s, output, itemParts, &newIDs)
		if err != nil {
			return "", err
		}
		out = append(out, raw)
	}
	placeOpaque(len(output))
	return "[" + strings.Join(out, ",") + "]", nil
}

func (n *natives) renderSlot(s *slot, output []outputItem, itemParts map[int][]ahp.Part, newIDs *int) (string, error) {
	if s.orig >= 0 {
		orig := itemParts[s.orig]
		same := len(orig) == len(s.parts)
		for i := 0; same && i < len(orig); i++ {
			same = partsEqual(&orig[i], s.parts[i])
		}
		if same {
			return output[s.orig].raw, nil
		}
	}
	switch s.kind {
	case kindFunctionCall, kindCustomCall:
		if len(s.parts) != 1 {
			return "", fmt.Errorf("a tool call item carries one call, got %d parts", len(s.parts))
		}
		return n.renderResponsesCall(s.parts[0], `,"status":"completed"`)
	case kindReasoning:
		parts := make([]ahp.Part, len(s.parts))
		for i, p := range s.parts {
			parts[i] = *p
		}
		return n.renderReasoning(output[s.orig].raw, parts)
	}
	entries := make([]string, 0, len(s.parts))
	for _, p := range s.parts {
		e, err := n.renderContentPart(p, "output_text")
		if err != nil {
			return "", err
		}
		entries = append(entries, e.raw)
	}
	content := "[" + strings.Join(entries, ",") + "]"
	if s.orig >= 0 {
		return sjson.SetRaw(output[s.orig].raw, "content", content)
	}
	*newIDs++
	return `{"type":"message","id":"msg_hookproxy_` + strconv.Itoa(*newIDs) + `","status":"completed","role":"assistant","content":` + content + `}`, nil
}

// setFinish writes a finish reason as the native status: a status value directly, any
// other reason (max_output_tokens, content_filter) as an incomplete status with that reason.
func setFinish(raw, finishReason string) (string, error) {
	switch finishReason {
	case "completed", "failed", "in_progress", "cancelled", "queued", "incomplete":
		return sjson.SetRaw(raw, "status", jsonString(finishReason))
	}
	raw, err := sjson.SetRaw(raw, "status", `"incomplete"`)
	if err != nil {
		return "", err
	}
	return sjson.SetRaw(raw, "incomplete_details", `{"reason":`+jsonString(finishReason)+`}`)
}

// EncodeResponse implements mapping.Translator: the output array is rebuilt from the
// effective parts (unchanged items keep their bytes, removed calls vanish, edited text and
// arguments are patched in place), and every other field stays as it was.
func (r *Responses) EncodeResponse(resp *mapping.Response, items []ahp.Message, finishReason string) ([]byte, error) {
	st, ok := resp.Native.(*responsesResponse)
	if !ok {
		return nil, fmt.Errorf("openai responses: response was not decoded by this translator")
	}
	if finishReason == "" {
		finishReason = resp.FinishReason
	}
	if finishReason == resp.FinishReason && itemsEqual(items, st.items) {
		return resp.Original, nil
	}
	out := string(resp.Original)
	if !itemsEqual(items, st.items) {
		slots, err := st.planOutput(items, st.output)
		if err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
		output, err := st.renderOutput(slots, st.output, st.itemParts)
		if err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
		if out, err = sjson.SetRaw(out, "output", output); err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
	}
	if finishReason != resp.FinishReason {
		var err error
		if out, err = setFinish(out, finishReason); err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
	}
	return []byte(out), nil
}

// SynthesizeResponse implements mapping.Translator: a complete response object for a
// request answered without the upstream, with no usage (never invented).
func (r *Responses) SynthesizeResponse(req *mapping.Request, items []ahp.Message, finishReason string) ([]byte, error) {
	n := natives{}
	slots, err := n.planOutput(items, nil)
	if err != nil {
		return nil, fmt.Errorf("openai responses: %w", err)
	}
	output, err := n.renderOutput(slots, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("openai responses: %w", err)
	}
	var model string
	if req != nil {
		model = req.Model
	}
	var rnd [12]byte
	rand.Read(rnd[:])
	b := make([]byte, 0, 256+len(output)+len(model))
	b = append(b, `{"id":"resp_hookproxy_`...)
	b = hex.AppendEncode(b, rnd[:])
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"status":"completed","error":null,"incomplete_details":null,"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"output":`...)
	b = append(b, output...)
	b = append(b, `,"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}`...)
	if finishReason != "" && finishReason != r.TerminalFinishReason() {
		s, err := setFinish(string(b), finishReason)
		if err != nil {
			return nil, fmt.Errorf("openai responses: %w", err)
		}
		return []byte(s), nil
	}
	return b, nil
}
