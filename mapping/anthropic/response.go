package anthropic

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// responseState is Response.Native.
type responseState struct {
	items  []ahp.Message      // private copy of Response.Items as decoded
	parts  map[string]*origin // part id → native content block
	finish string
}

// malformed wraps mapping.ErrMalformed with what was wrong.
func malformed(format string, args ...any) error {
	return fmt.Errorf("anthropic: response: %s: %w", fmt.Sprintf(format, args...), mapping.ErrMalformed)
}

// DecodeResponse parses a complete Messages response (non-streamed or assembled) into one
// assistant message whose id is the native message id.
func (*Messages) DecodeResponse(body []byte) (*mapping.Response, error) {
	s := string(body)
	if err := checkJSON(s); err != nil {
		return nil, malformed("%v", err)
	}
	root := gjson.Parse(s)
	if !root.IsObject() {
		return nil, malformed("not a JSON object")
	}
	if root.Get("type").String() == "error" {
		e := root.Get("error")
		return nil, upstreamError(e.Get("type").String(), e.Get("message").String())
	}
	content := root.Get("content")
	if !content.IsArray() {
		return nil, malformed("content is not an array")
	}

	resp := &mapping.Response{
		ID:           root.Get("id").String(),
		Model:        root.Get("model").String(),
		FinishReason: root.Get("stop_reason").String(),
		Original:     body,
	}
	st := &responseState{parts: map[string]*origin{}, finish: resp.FinishReason}

	msg := ahp.Message{ID: resp.ID, Role: ahp.RoleAssistant}
	if msg.ID == "" {
		// No native id to reuse: derive one from the content, marked synthesized.
		h := newIDHash()
		h.str(content.Raw)
		msg.ID, msg.Synthesized = "resp-"+h.sum(), true
	}
	var err error
	var origins []*origin
	content.ForEach(func(_, b gjson.Result) bool {
		n := len(msg.Parts)
		var d decodedBlock
		if d, err = decodeBlock(b, partID(msg.ID, n)); err != nil {
			err = malformed("content[%d]: %v", n, err)
			return false
		}
		msg.Parts = append(msg.Parts, d.part)
		o := &origin{raw: b.Raw, typ: d.typ}
		st.parts[d.part.ID] = o
		origins = append(origins, o)
		return true
	})
	if err != nil {
		return nil, err
	}
	resp.Items = []ahp.Message{msg}
	resp.HostedCalls = hostedCalls(content)
	st.items = ahp.CloneMessages(resp.Items)
	for n, o := range origins {
		o.part = &st.items[0].Parts[n] // the private copy of the part as decoded
	}
	resp.Native = st

	// A response hookproxy synthesized carries zero usage only for SDK parsing; events
	// must never report invented usage (SPEC-DIGEST §15.2).
	if !strings.HasPrefix(resp.ID, SynthesizedIDPrefix) {
		resp.Usage = usage(root.Get("usage"))
	}
	return resp, nil
}

// usage maps native usage to an attempt-scoped amount. Absent counts stay absent: unknown,
// never zero.
func usage(u gjson.Result) *ahp.Usage {
	if !u.IsObject() {
		return nil
	}
	count := func(key string) *int64 {
		v := u.Get(key)
		if v.Type != gjson.Number {
			return nil
		}
		n := v.Int()
		return &n
	}
	out := &ahp.Usage{
		Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider",
		InputTokens:      count("input_tokens"),
		OutputTokens:     count("output_tokens"),
		CacheReadTokens:  count("cache_read_input_tokens"),
		CacheWriteTokens: count("cache_creation_input_tokens"),
	}
	if out.InputTokens == nil && out.OutputTokens == nil && out.CacheReadTokens == nil && out.CacheWriteTokens == nil {
		return nil
	}
	return out
}

// EncodeResponse renders the effective assistant messages and stop reason onto the
// original response. Unchanged parts keep their original blocks (thinking signatures
// included); removed tool calls vanish; rewritten inputs and texts are patched in place.
func (*Messages) EncodeResponse(resp *mapping.Response, items []ahp.Message, finishReason string) ([]byte, error) {
	if resp == nil {
		return nil, errors.New("anthropic: nil response")
	}
	st, ok := resp.Native.(*responseState)
	if !ok {
		return nil, errors.New("anthropic: response was not decoded by the anthropic translator")
	}
	same := messagesEqual(items, st.items)
	finishChanged := finishReason != "" && finishReason != st.finish
	if same && !finishChanged {
		return resp.Original, nil
	}
	out := resp.Original
	var err error
	if !same {
		blocks, err := renderAssistant(items, st.parts)
		if err != nil {
			return nil, err
		}
		if out, err = sjson.SetRawBytes(out, "content", []byte(joinArray(blocks))); err != nil {
			return nil, fmt.Errorf("anthropic: patch content: %w", err)
		}
	}
	if finishChanged {
		if out, err = sjson.SetRawBytes(out, "stop_reason", []byte(quote(finishReason))); err != nil {
			return nil, fmt.Errorf("anthropic: patch stop_reason: %w", err)
		}
	}
	return out, nil
}

// renderAssistant renders assistant messages as one content block list.
func renderAssistant(items []ahp.Message, parts map[string]*origin) ([]string, error) {
	blocks := []string{}
	for i := range items {
		if items[i].Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("anthropic: message %s: a response holds only assistant messages, not %q", items[i].ID, items[i].Role)
		}
		for j := range items[i].Parts {
			p := &items[i].Parts[j]
			b, ok, err := renderPart(p, parts[p.ID])
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if p.Synthesized && parts[p.ID] == nil && p.Kind == ahp.KindText && p.Text != nil && p.Category == "" &&
				len(blocks) > 0 && gjson.Get(blocks[len(blocks)-1], "type").String() == blockText {
				// A note hookproxy adds after the model's text starts on a new paragraph:
				// clients show consecutive text blocks run together (issue 12).
				b = `{"type":"text","text":` + quote("\n\n"+*p.Text) + `}`
			}
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

// SynthesizeResponse builds a complete message object for a request answered without the
// upstream. Its usage is zero natively, because SDKs require the object; DecodeResponse
// reports no usage for it.
func (*Messages) SynthesizeResponse(req *mapping.Request, items []ahp.Message, finishReason string) ([]byte, error) {
	blocks, err := renderAssistant(items, nil)
	if err != nil {
		return nil, err
	}
	if finishReason == "" {
		finishReason = "end_turn"
		if len(mapping.ToolCalls(items)) > 0 {
			finishReason = "tool_use"
		}
	}
	model := ""
	if req != nil {
		model = req.Model
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("anthropic: message id: %w", err)
	}
	var b strings.Builder
	b.WriteString(`{"id":`)
	b.WriteString(quote(SynthesizedIDPrefix + hex.EncodeToString(id[:])))
	b.WriteString(`,"type":"message","role":"assistant","model":`)
	b.WriteString(quote(model))
	b.WriteString(`,"content":`)
	b.WriteString(joinArray(blocks))
	b.WriteString(`,"stop_reason":`)
	b.WriteString(quote(finishReason))
	b.WriteString(`,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}`)
	return []byte(b.String()), nil
}
