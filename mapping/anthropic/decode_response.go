package anthropic

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

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
	// The members read, in one pass over the object (gjson's Get would walk it once per
	// member); a repeated member gives its first value, as Get does.
	var f [respFields]gjson.Result
	mapping.Pick(root, respFieldNames[:], f[:])
	if f[rType].String() == "error" {
		e := f[rError]
		return nil, upstreamError(e.Get("type").String(), e.Get("message").String())
	}
	content := f[rContent]
	if !content.IsArray() {
		return nil, malformed("content is not an array")
	}

	resp := &mapping.Response{
		ID:           f[rID].String(),
		Model:        f[rModel].String(),
		FinishReason: f[rStopReason].String(),
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
	mapping.Elements(content, func(b gjson.Result) bool {
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
	// must never report invented usage (a compatibility adapter fabricates no native data).
	if !strings.HasPrefix(resp.ID, SynthesizedIDPrefix) {
		resp.Usage = usage(f[rUsage])
	}
	return resp, nil
}

// The top-level members of a Messages response that DecodeResponse reads.
const (
	rType = iota
	rError
	rContent
	rID
	rModel
	rStopReason
	rUsage
	respFields
)

var respFieldNames = [respFields]string{rType: "type", rError: "error", rContent: "content", rID: "id",
	rModel: "model", rStopReason: "stop_reason", rUsage: "usage"}

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

// NoToolCalls implements mapping.CallScreen: a call is a content block of type tool_use.
func (*Messages) NoToolCalls(body []byte) bool {
	return !mapping.MayHold(body, blockToolUse) && strictJSON.Check(body) == nil
}
