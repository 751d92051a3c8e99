package anthropic

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// residueByGet is the messages residue computed member by member with gjson's Get, as the
// decoder did before it picked the members in one pass: the reference the fuzz target
// compares with.
func residueByGet(msgs gjson.Result) (string, bool) {
	var entries []string
	found := false
	msgs.ForEach(func(_, m gjson.Result) bool {
		r, ok := blocksResidueByGet(m.Get("content"))
		if ok {
			found = true
			entries = append(entries, `{"content":`+r+`}`)
		} else {
			entries = append(entries, "{}")
		}
		return true
	})
	if !found {
		return "", false
	}
	return "[" + strings.Join(entries, ",") + "]", true
}

func blocksResidueByGet(content gjson.Result) (string, bool) {
	if !content.IsArray() {
		return "", false
	}
	var entries []string
	found := false
	content.ForEach(func(_, b gjson.Result) bool {
		var members []string
		if b.IsObject() {
			for _, k := range residueBlockMembers {
				v := b.Get(k)
				if v.Type == gjson.String || (k == "citations" && v.IsArray()) {
					members = append(members, mapping.Quote(k)+":"+v.Raw)
				}
			}
			if u := b.Get("source.url"); u.Type == gjson.String && b.Get("source").IsObject() {
				members = append(members, `"source":{"url":`+u.Raw+`}`)
			}
			if b.Get("type").Str == "tool_result" {
				if r, ok := blocksResidueByGet(b.Get("content")); ok {
					members = append(members, `"content":`+r)
				}
			}
		}
		if len(members) > 0 {
			found = true
		}
		entries = append(entries, "{"+strings.Join(members, ",")+"}")
		return true
	})
	return "[" + strings.Join(entries, ",") + "]", found
}

// FuzzMessagesResidue: for every body the decoder accepts, the residue picked in one pass
// per object is the one gjson's Get finds member by member, and the decode's params carry it
// (the decode skips the pass when no block could give one).
func FuzzMessagesResidue(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"document","title":"T","context":"C\n","source":{"type":"url","url":"https://x.example/a?sig=1"},"citations":{"enabled":true}},{"type":"text","text":"a","citations":[{"type":"char_location","cited_text":"q"}]}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"d"}]},{"type":"image","source":{"type":"url","url":"https://i.example/p.png"}}]}]}]}`,
		`{"messages":[{"role":"user","content":[{"\u0074ype":"tool_r\u0065sult","tool_use_id":"t","content":[{"t\u0069tle":"T","type":"text","text":"x"}]}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"x","title":"T"}]}]}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}},{"type":"text","text":"x\"y","title":5}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := NewMessages().DecodeRequest(append([]byte(nil), body...))
		if err != nil {
			return
		}
		msgs := gjson.GetBytes(body, "messages")
		got, gotOK := messagesResidue(msgs)
		want, wantOK := residueByGet(msgs)
		if got != want || gotOK != wantOK {
			t.Fatalf("residue %v %s\nby Get %v %s", gotOK, got, wantOK, want)
		}
		// What the decode hands the policies: the residue, or none when the decode saw no
		// block that could give one.
		if p := gjson.GetBytes(req.Params, "messages"); p.Exists() != wantOK || (wantOK && p.Raw != want) {
			t.Fatalf("params messages %v %s\nby Get %v %s", p.Exists(), p.Raw, wantOK, want)
		}
	})
}

// messagesResidue builds the messages residue (mapping.ResidueMembers) of an Anthropic
// message list as the decode does, per message (appendResidue) then joined: for each
// message, the residue members of its content blocks (and of the blocks inside a
// tool_result), in place. ok is false when no message has any.
func messagesResidue(msgs gjson.Result) (string, bool) {
	return joinResidue(appendResidue(nil, msgs.Raw))
}
