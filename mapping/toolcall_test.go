package mapping

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
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

// TestCanonicalCallIsThePartReadBack: the call a stream editor settles is the one the held
// path reads back from the call's tool_call part, for the inputs where a shortcut could
// differ (spacing, an empty input, escapes, invalid UTF-8, a missing id or name).
func TestCanonicalCallIsThePartReadBack(t *testing.T) {
	for _, c := range []struct{ id, name, input string }{
		{"call_1", "Bash", `{"command":"ls"}`},
		{"call_1", "Bash", "{ \"command\" : \"rm -rf /\",\n \"n\": [1, 2] }"},
		{"call_1", "Bash", ""},
		{"call_1", "Bash", `{"s":"\u003c\u2028 \"q\""}`},
		{"call_\xff1", "Ba\xc3sh", `{"a":1}`},
		{"call_\u2028", "<b>", `{}`},
		{"", "Bash", `{}`},
		{"call_1", "", `{}`},
	} {
		p := ToolCallPart("p", ToolCall{ID: c.id, Name: c.name, Input: json.RawMessage(c.input)})
		want, wantOK := ParseToolCall(&p)
		got, ok := CanonicalCall(c.id, c.name, c.input)
		if ok != wantOK || got.ID != want.ID || got.Name != want.Name || !bytes.Equal(got.Input, want.Input) {
			t.Errorf("%q %q %q: got %+v %v (input %s), the part reads back %+v %v (input %s)",
				c.id, c.name, c.input, got, ok, got.Input, want, wantOK, want.Input)
		}
	}
}

// referenceParse is ParseToolCall as encoding/json alone reads a part's text.
func referenceParse(text string) (ToolCall, bool) {
	var c ToolCall
	if err := json.Unmarshal([]byte(text), &c); err != nil || c.ID == "" || c.Name == "" {
		return ToolCall{}, false
	}
	return c, true
}

// FuzzParseToolCall: a tool_call part's text reads as encoding/json reads it, whether it
// is in the form the codecs write (read without encoding/json) or anything else.
func FuzzParseToolCall(f *testing.F) {
	for _, c := range []ToolCall{
		{ID: "call_1", Name: "Bash", Input: json.RawMessage(`{"command":"ls && rm <a> > b"}`)},
		{ID: "c\"3\\", Name: "na\u2028me\x01", Input: nil},
		{ID: "bad\xffutf8", Name: "t\tab", Input: json.RawMessage(`{"s":"\u003c\n"}`)},
		{ID: "e", Name: "f", Input: json.RawMessage(`[1,{"a":null}]`)},
	} {
		f.Add(*ToolCallPart("p", c).Text)
	}
	for _, s := range []string{
		`{"id":"a","name":"b","input":{"x":1,"x":2}}`, `{"id":"a","name":"b","input": {} }`,
		`{"id":"a","name":"b","input":{}} `, `{"id":"a","name":"b","input":1,"input":2}`,
		`{"id":"a","name":"b","input":"s"}`, `{"id":"a","name":"b","input":}`, `{"id":"","name":"b","input":{}}`,
		`{"ID":"a","name":"b","input":{}}`, `{"id":"a\u0062","name":"b","input":{}}`, `{"id":"a","name":"b"}`,
		`{"id":"a","name":"b","input":{}}}`, `{"id":"a","name":"b","input":null}`, `null`, `[]`,
		"{\"id\":\"a\xff\",\"name\":\"b\",\"input\":{}}", "{\"id\":\"a\",\"name\":\"b\x01\",\"input\":{}}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p := ahp.TextPart("p", text)
		p.Category = ahp.CategoryToolCall
		got, ok := ParseToolCall(&p)
		want, wantOK := referenceParse(text)
		if ok != wantOK || got.ID != want.ID || got.Name != want.Name || !bytes.Equal(got.Input, want.Input) {
			t.Fatalf("%q: got %+v %v (input %q), encoding/json reads %+v %v (input %q)", text, got, ok, got.Input, want, wantOK, want.Input)
		}
	})
}
