package chat

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// PromptInput translates the request side of the OpenAI endpoints whose input is one field
// of text, not a conversation: embeddings ("input") and legacy completions ("prompt").
// The text becomes one user message, so model.request.before — secrets,
// pii, the models allow list — sees it; the response side is not mapped (the proxy routes
// these endpoints to model.request.before only), so the response methods are Chat's and
// never reached.
type PromptInput struct {
	Chat
	field string
}

// NewEmbeddings returns the translator of POST /v1/embeddings.
func NewEmbeddings() *PromptInput { return &PromptInput{field: "input"} }

// NewCompletions returns the translator of POST /v1/completions (the legacy API).
func NewCompletions() *PromptInput { return &PromptInput{field: "prompt"} }

// promptState remembers the field's native form.
type promptState struct {
	array bool // an array of strings (else one string)
}

// DecodeRequest implements mapping.Translator.
func (p *PromptInput) DecodeRequest(body []byte) (*mapping.Request, error) {
	if err := oaiwire.CheckClientJSON(body); err != nil {
		return nil, &mapping.BadRequest{Reason: err.Error()}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, &mapping.BadRequest{Reason: "body is not a JSON object"}
	}
	req := &mapping.Request{Model: root.Get("model").String(), Stream: root.Get("stream").Bool(), Original: body, PromptStart: -1}
	params, err := sjson.Delete(root.Raw, p.field)
	if err != nil {
		return nil, &mapping.BadRequest{Reason: err.Error()}
	}
	req.Params = []byte(params)
	v := root.Get(p.field)
	msgID := messageID(nil, 0, ahp.RoleUser, v.Raw)
	m := ahp.Message{ID: msgID, Role: ahp.RoleUser, Synthesized: true, Parts: []ahp.Part{}}
	st := &promptState{}
	switch {
	case v.Type == gjson.String:
		m.Parts = append(m.Parts, ahp.TextPart(partID(msgID, 0), v.Str))
	case v.IsArray() && allStrings(v):
		st.array = true
		for i, e := range v.Array() {
			m.Parts = append(m.Parts, ahp.TextPart(partID(msgID, i), e.Str))
		}
	case v.Exists():
		// Token ids (arrays of integers): nothing a policy can read as text.
		req.Gaps = append(req.Gaps, ahp.Gap{Path: "items", Reason: p.field + " given as token ids is carried natively"})
		req.Items = []ahp.Message{}
		req.Native = st
		return req, nil
	}
	req.Items = []ahp.Message{m}
	req.Native = st
	return req, nil
}

func allStrings(v gjson.Result) bool {
	ok := true
	v.ForEach(func(_, e gjson.Result) bool {
		ok = e.Type == gjson.String
		return ok
	})
	return ok
}

// EncodeRequest implements mapping.Translator: the texts of the effective messages go
// back into the field, as a string or an array as the client sent it.
func (p *PromptInput) EncodeRequest(req *mapping.Request, items []ahp.Message) ([]byte, error) {
	st, ok := req.Native.(*promptState)
	if !ok {
		return nil, fmt.Errorf("openai %s: request was not decoded by this translator", p.field)
	}
	if oaiwire.ItemsEqual(items, req.Items) {
		return req.Original, nil
	}
	var texts []string
	for i := range items {
		for j := range items[i].Parts {
			pt := &items[i].Parts[j]
			if pt.Kind != ahp.KindText || pt.Text == nil {
				return nil, fmt.Errorf("openai %s: part %s carries no text", p.field, pt.ID)
			}
			texts = append(texts, *pt.Text)
		}
	}
	value := mapping.Quote(strings.Join(texts, "\n"))
	if st.array {
		quoted := make([]string, len(texts))
		for i, t := range texts {
			quoted[i] = mapping.Quote(t)
		}
		value = "[" + strings.Join(quoted, ",") + "]"
	}
	out, err := sjson.SetRawBytes(req.Original, p.field, []byte(value))
	if err != nil {
		return nil, fmt.Errorf("openai %s: %w", p.field, err)
	}
	return out, nil
}
