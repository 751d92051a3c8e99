package policies

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// appendMessages must write what encoding/json writes for the ahp types (up to HTML
// escaping and the nil-parts case), and must learn about any member added to them.
func TestAppendMessagesMatchesEncodingJSON(t *testing.T) {
	if n := reflect.TypeOf(ahp.Message{}).NumField(); n != 4 {
		t.Fatalf("ahp.Message has %d fields; update appendMessages", n)
	}
	if n := reflect.TypeOf(ahp.Part{}).NumField(); n != 11 {
		t.Fatalf("ahp.Part has %d fields; update appendPart", n)
	}
	size := int64(48213)
	msgs := []ahp.Message{
		{ID: "m0", Role: ahp.RoleSystem, Parts: []ahp.Part{text("m0p0", "plain <b>&</b> \"quoted\" \\ \n\t\x01 \u2028 é 🎉 \xff")}},
		{ID: "m1", Role: ahp.RoleUser, Synthesized: true, Parts: []ahp.Part{
			{ID: "a", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionMetadata, Size: &size, SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
			{ID: "b", Kind: ahp.KindAttachment, MediaType: "image/jpeg", Selection: ahp.SelectionBody, Body: &ahp.Ref{Ref: "upl_1"}, Category: "images", Synthesized: true},
			{ID: "c", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody, Gap: &ahp.Gap{Reason: "size limit", Path: "items/1"}},
			{ID: "d", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody, Gap: &ahp.Gap{Reason: "unavailable"}},
		}},
		{ID: "m2", Role: ahp.RoleAssistant, Parts: []ahp.Part{}},
	}
	var got, want []any
	if err := json.Unmarshal(appendMessages(nil, msgs), &got); err != nil {
		t.Fatalf("appendMessages wrote invalid JSON: %v", err)
	}
	ref, _ := json.Marshal(msgs)
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("appendMessages = %s\nencoding/json = %s", appendMessages(nil, msgs), ref)
	}
	if s := string(appendMessages(nil, []ahp.Message{{ID: "x", Role: "user"}})); s != `[{"id":"x","role":"user","parts":[]}]` {
		t.Fatalf("nil parts: %s", s)
	}
}

func TestAppendJSONStringEscapes(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "nl\n\r\t\x00\x1f\x7f", "é🎉", "\u2028\u2029", "\xff\xfe", "a\xe2\x80", "\xe2\x82\xac"} {
		var back string
		if err := json.Unmarshal(appendJSONString(nil, s), &back); err != nil {
			t.Fatalf("%q: invalid JSON %s: %v", s, appendJSONString(nil, s), err)
		}
		// encoding/json's own reading of the same string (invalid UTF-8 becomes U+FFFD)
		var want string
		ref, _ := json.Marshal(s)
		_ = json.Unmarshal(ref, &want)
		if back != want {
			t.Fatalf("%q round-trips to %q, want %q", s, back, want)
		}
	}
}
