package gemini

import (
	"fmt"
	"strconv"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// EncodeResponse renders the effective assistant messages and finish reason onto the
// original response. Each message goes back to its candidate; a new message (a note of
// removed calls, or content a policy added) joins the candidate before it.
func (t *Translator) EncodeResponse(resp *mapping.Response, items []ahp.Message, finishReason string) ([]byte, error) {
	st, ok := resp.Native.(*responseState)
	if !ok {
		return nil, fmt.Errorf("gemini: response was not decoded by this translator")
	}
	if finishReason == "" && mapping.MessagesEqual(items, st.items) {
		return resp.Original, nil
	}
	byID := make(map[string]int, len(st.cands))
	for i, c := range st.cands {
		byID[c.msgID] = i
	}
	parts := make([][]string, max(len(st.cands), 1))
	rendered := make(map[string]bool, len(st.parts))
	cand := 0
	for k := range items {
		m := &items[k]
		if m.Role != ahp.RoleAssistant {
			return nil, fmt.Errorf("gemini: a %s message cannot be part of a model answer", m.Role)
		}
		if i, ok := byID[m.ID]; ok {
			cand = i
		}
		for j := range m.Parts {
			r, err := renderPart(&m.Parts[j], st.parts[m.Parts[j].ID])
			if err != nil {
				return nil, err
			}
			parts[cand] = append(parts[cand], r)
			rendered[m.Parts[j].ID] = true
		}
	}
	if err := st.keepSignatures(parts, rendered); err != nil {
		return nil, err
	}
	var cands []string
	for i := range parts {
		c := `{"content":{"role":"model"},"index":` + strconv.Itoa(i) + `}`
		if i < len(st.cands) {
			c = st.cands[i].raw
		}
		var err error
		if c, err = mapping.SetRaw(c, "content.parts", mapping.JoinArray(parts[i])); err != nil {
			return nil, err
		}
		if finishReason != "" {
			if c, err = mapping.SetRaw(c, "finishReason", mapping.Quote(finishReason)); err != nil {
				return nil, err
			}
		}
		cands = append(cands, c)
	}
	obj, err := mapping.SetRaw(st.obj, "candidates", mapping.JoinArray(cands))
	if err != nil {
		return nil, err
	}
	if st.array {
		return []byte("[" + obj + "]"), nil
	}
	return []byte(obj), nil
}

// SynthesizeResponse builds a complete Gemini response for a request answered without
// calling the upstream. It carries no usageMetadata: no usage is invented.
func (t *Translator) SynthesizeResponse(req *mapping.Request, items []ahp.Message, finishReason string) ([]byte, error) {
	if finishReason == "" {
		finishReason = "STOP"
	}
	var parts []string
	var ids []string
	for k := range items {
		ids = append(ids, items[k].ID)
		for j := range items[k].Parts {
			r, err := renderPart(&items[k].Parts[j], nil)
			if err != nil {
				return nil, err
			}
			parts = append(parts, r)
		}
	}
	model := t.ep.Model
	if req != nil && req.Model != "" {
		model = req.Model
	}
	obj := `{"candidates":[{"content":{"role":"model","parts":` + mapping.JoinArray(parts) + `},"finishReason":` + mapping.Quote(finishReason) +
		`,"index":0}],"modelVersion":` + mapping.Quote(model) + `,"responseId":` + mapping.Quote(derive(SynthesizedIDPrefix, append(ids, mapping.JoinArray(parts))...)) + `}`
	if t.arrayStream() {
		return []byte("[" + obj + "]"), nil
	}
	return []byte(obj), nil
}

// keepSignatures moves the thoughtSignature of a removed call of each candidate onto what
// the candidate keeps (signature.go); rendered holds the ids of the parts rendered.
func (st *responseState) keepSignatures(parts [][]string, rendered map[string]bool) error {
	for i, c := range st.cands {
		var removed []string
		for k := range st.items {
			if st.items[k].ID != c.msgID {
				continue
			}
			for _, p := range st.items[k].Parts {
				if d := st.parts[p.ID]; d != nil && d.kind == kindCall && !rendered[p.ID] {
					removed = append(removed, d.raw)
				}
			}
		}
		if sig, key := removedSignature(removed); sig != "" {
			if _, err := carrySignature(parts[i], sig, key); err != nil {
				return err
			}
		}
	}
	return nil
}
