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
	same := mapping.MessagesEqual(items, st.items)
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
		if out, err = sjson.SetRawBytes(out, "content", []byte(mapping.JoinArray(blocks))); err != nil {
			return nil, fmt.Errorf("anthropic: patch content: %w", err)
		}
	}
	if finishChanged {
		if out, err = sjson.SetRawBytes(out, "stop_reason", []byte(mapping.Quote(finishReason))); err != nil {
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
				// clients show consecutive text blocks run together.
				b = `{"type":"text","text":` + mapping.Quote("\n\n"+*p.Text) + `}`
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
	b.WriteString(mapping.Quote(SynthesizedIDPrefix + hex.EncodeToString(id[:])))
	b.WriteString(`,"type":"message","role":"assistant","model":`)
	b.WriteString(mapping.Quote(model))
	b.WriteString(`,"content":`)
	b.WriteString(mapping.JoinArray(blocks))
	b.WriteString(`,"stop_reason":`)
	b.WriteString(mapping.Quote(finishReason))
	b.WriteString(`,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}`)
	return []byte(b.String()), nil
}
