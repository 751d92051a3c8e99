package proxy

import (
	"encoding/json"
	"testing"
)

// TestRawArgumentsAgreesWithTheDecode: the shortcut that skips decoding a call's input
// answers as the decode does, an escaped spelling of the key included.
func TestRawArgumentsAgreesWithTheDecode(t *testing.T) {
	decoded := func(in string) bool {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &m) != nil || len(m) != 1 {
			return false
		}
		_, ok := m["raw_arguments"]
		return ok
	}
	for _, in := range []string{
		`{"raw_arguments":"ls -la"}`,
		`{"raw\u005farguments":"ls -la"}`, // the key spelled with an escape
		`{"\u0072aw_arguments":"x"}`,
		`{"raw_arguments":"x","other":1}`,
		`{"command":"ls","path":"C:\\repo"}`,
		`{"command":"echo raw_arguments"}`,
		`{"command":"\u00e9"}`,
		`{}`,
		`{"raw_arguments":"a","raw_arguments":"b"}`,
	} {
		if got, want := rawArguments(json.RawMessage(in)), decoded(in); got != want {
			t.Errorf("rawArguments(%s) = %v, the decode says %v", in, got, want)
		}
	}
	if !rawArguments(json.RawMessage(`{"raw\u005farguments":"x"}`)) {
		t.Fatal("an escaped key is the key") // the control: the shortcut must not skip it
	}
}
