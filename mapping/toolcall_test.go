package mapping

import (
	"bytes"
	"encoding/json"
	"testing"
)

// referenceToolCallText is the tool_call text as encoding/json writes it without HTML
// escaping: the form ToolCallPart must keep producing.
func referenceToolCallText(call ToolCall) string {
	if len(call.Input) == 0 {
		call.Input = json.RawMessage(`{}`)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(call); err != nil {
		panic(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func TestToolCallPartMatchesEncodingJSON(t *testing.T) {
	calls := []ToolCall{
		{ID: "call_1", Name: "Bash", Input: json.RawMessage(`{"command":"ls && rm <a> > b"}`)},
		{ID: "call_2", Name: "read", Input: json.RawMessage("{ \"path\" : \"a b\",\n \"n\": [1, 2] }")},
		{ID: "c\"3\\", Name: "na\u2028me\x01", Input: nil},
		{ID: "bad\xffutf8", Name: "t\tab", Input: json.RawMessage(`{"s":"\u003c\n"}`)},
		{ID: "e", Name: "f", Input: json.RawMessage(`{}`)},
	}
	for _, c := range calls {
		p := ToolCallPart("m1.p0", c)
		if p.Text == nil || *p.Text != referenceToolCallText(c) {
			t.Errorf("ToolCallPart(%+v) text = %v, want %s", c, p.Text, referenceToolCallText(c))
		}
		back, ok := ParseToolCall(&p)
		if !ok || back.Name == "" {
			t.Errorf("ToolCallPart(%+v) does not parse back", c)
		}
	}
}
