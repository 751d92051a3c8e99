package chat

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// EncodeResponse implements mapping.Translator. It patches the original body: per choice,
// the message (text, reasoning, refusal, tool calls) and the finish reason. finishReason
// applies to choice 0; another choice whose tool calls were all removed gets "stop".
func (c *Chat) EncodeResponse(resp *mapping.Response, items []ahp.Message, finishReason string) ([]byte, error) {
	st, finishReason, err := oaiwire.ResponseState[*chatResponse]("openai chat", resp, finishReason)
	if err != nil {
		return nil, err
	}
	if finishReason == resp.FinishReason && oaiwire.ItemsEqual(items, st.items) {
		return resp.Original, nil
	}
	owner := make(map[string]int, len(st.choices))
	for k, ch := range st.choices {
		owner[ch.msgID] = k
	}
	for i := range items {
		if items[i].Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("openai chat: response item %s has role %q; a chat completion carries assistant messages only", items[i].ID, items[i].Role)
		}
	}
	out := string(resp.Original)
	for k, ch := range st.choices {
		// Choice k gets its own message; choice 0 also gets every message the response did
		// not have (a replaced or extended list), so nothing a hook supplied is lost.
		var parts []ahp.Part
		for i := range items {
			if o, known := owner[items[i].ID]; known && o == k || !known && k == 0 {
				parts = append(parts, items[i].Parts...)
			}
		}
		prefix := "choices." + strconv.Itoa(k)
		if !oaiwire.PartListsEqual(parts, st.items[k].Parts) {
			raw, err := st.renderMessage(ch.raw, parts)
			if err != nil {
				return nil, fmt.Errorf("openai chat: choice %d: %w", k, err)
			}
			if out, err = sjson.SetRaw(out, prefix+".message", raw); err != nil {
				return nil, fmt.Errorf("openai chat: choice %d: %w", k, err)
			}
		}
		finish := ch.finish
		if k == 0 {
			finish = finishReason
		} else if ch.hadCalls && len(mapping.ToolCalls([]ahp.Message{{Parts: parts}})) == 0 {
			finish = c.TerminalFinishReason()
		}
		if finish != ch.finish {
			var err error
			if out, err = sjson.SetRaw(out, prefix+".finish_reason", mapping.Quote(finish)); err != nil {
				return nil, fmt.Errorf("openai chat: choice %d: %w", k, err)
			}
		}
	}
	return []byte(out), nil
}

// renderMessage renders a response message from parts by patching base (the original
// message, or a skeleton). Response content is a string: text parts are joined.
func (n *natives) renderMessage(base string, parts []ahp.Part) (string, error) {
	a, err := n.splitAssistant(parts)
	if err != nil {
		return "", err
	}
	var texts []string
	keepAudio := false
	for _, p := range a.content {
		if p.Kind == ahp.KindAttachment {
			if np := n.part(p.ID); np != nil && np.src == srcAudioOutput && np.canon.MediaType == p.MediaType {
				keepAudio = true
				continue
			}
			return "", fmt.Errorf("attachment part %s cannot be carried by a chat completion message", p.ID)
		}
		if p.Text == nil {
			return "", fmt.Errorf("part %s: text part without text (selection %q) cannot be rendered", p.ID, p.Selection)
		}
		texts = append(texts, *p.Text)
	}
	content := "null"
	if len(texts) > 0 {
		content = mapping.Quote(joinNonEmpty(texts, "\n\n"))
	}
	raw, err := sjson.SetRaw(base, "content", content)
	if err != nil {
		return "", err
	}
	if !keepAudio {
		if raw, err = deleteIfPresent(raw, "audio"); err != nil {
			return "", err
		}
	}
	return applyAssistantFields(raw, &a, true)
}

// joinNonEmpty joins the non-empty strings of ss with sep.
func joinNonEmpty(ss []string, sep string) string {
	var b strings.Builder
	for _, s := range ss {
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s)
	}
	return b.String()
}

// SynthesizeResponse implements mapping.Translator: a complete chat.completion for a request
// answered without the upstream. It carries no usage: hookproxy never invents token counts.
func (c *Chat) SynthesizeResponse(req *mapping.Request, items []ahp.Message, finishReason string) ([]byte, error) {
	parts, err := oaiwire.AssistantParts("openai chat", "a chat completion", items)
	if err != nil {
		return nil, err
	}
	n := natives{} // nothing native to reuse: every part is new
	msg, err := n.renderMessage(`{"role":"assistant","content":null,"refusal":null}`, parts)
	if err != nil {
		return nil, fmt.Errorf("openai chat: %w", err)
	}
	if len(parts) == 0 {
		msg, _ = sjson.SetRaw(msg, "content", `""`)
	}
	if finishReason == "" {
		finishReason = c.TerminalFinishReason()
		if len(mapping.ToolCalls(items)) > 0 {
			finishReason = "tool_calls"
		}
	}
	var model string
	if req != nil {
		model = req.Model
	}
	var rnd [12]byte
	rand.Read(rnd[:])
	b := make([]byte, 0, 160+len(msg)+len(model))
	b = append(b, `{"id":"chatcmpl-hookproxy-`...)
	b = hex.AppendEncode(b, rnd[:])
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = mapping.AppendQuote(b, model)
	b = append(b, `,"choices":[{"index":0,"message":`...)
	b = append(b, msg...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = mapping.AppendQuote(b, finishReason)
	b = append(b, "}]}"...)
	return b, nil
}

// chatUsagePaths names the token counts of a Chat Completions usage object.
var chatUsagePaths = oaiwire.UsagePaths{
	Input:      "prompt_tokens",
	Output:     "completion_tokens",
	CacheRead:  "prompt_tokens_details.cached_tokens",
	CacheWrite: "prompt_tokens_details.cache_write_tokens",
}
