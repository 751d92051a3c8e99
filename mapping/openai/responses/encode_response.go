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

// EncodeResponse implements mapping.Translator. It rebuilds "output" from the effective
// parts: unchanged items keep their bytes, edited ones are patched, items whose parts are
// gone (a denied function_call) vanish, new text becomes a message item, opaque items stay
// in place. finishReason, when it differs, is written as status (and incomplete_details).
func (t *Translator) EncodeResponse(resp *mapping.Response, items []ahp.Message, finish string) ([]byte, error) {
	st, finish, err := oaiwire.ResponseState[*responseState]("openai responses", resp, finish)
	if err != nil {
		return nil, err
	}
	same := oaiwire.ItemsEqual(items, st.decoded)
	if finish == resp.FinishReason && same {
		return resp.Original, nil
	}
	out := string(resp.Original)
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
			if out, err = sjson.SetRaw(out, "output_text", mapping.Quote(outputText(gjson.Get(out, "output")))); err != nil {
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
	parts, err := oaiwire.AssistantParts("openai responses", "a response", items)
	if err != nil {
		return nil, err
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
			return mapping.CompactJSON(v.Raw)
		}
		return def
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	b := make([]byte, 0, 512+len(output))
	b = append(b, `{"id":`...)
	b = mapping.AppendQuote(b, id)
	b = append(b, `,"object":"response","created_at":`+now+`,"status":"completed","completed_at":`+now+
		`,"error":null,"incomplete_details":null,"instructions":`...)
	b = append(b, mapping.CompactJSON(instructions)...)
	b = append(b, `,"metadata":`+param("metadata", "{}")+`,"model":`...)
	b = mapping.AppendQuote(b, model)
	b = append(b, `,"output":`...)
	b = append(b, output...)
	b = append(b, `,"parallel_tool_calls":`+param("parallel_tool_calls", "true")+
		`,"tool_choice":`+param("tool_choice", `"auto"`)+`,"tools":`+param("tools", "[]")...)
	for _, name := range echoedParams {
		if v := params.Get(name); v.Exists() {
			b = append(b, ',')
			b = mapping.AppendQuote(b, name)
			b = append(b, ':')
			b = append(b, mapping.CompactJSON(v.Raw)...)
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
