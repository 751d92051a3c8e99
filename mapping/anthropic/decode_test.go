package anthropic_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// idsBody exercises every way an id is made: a string system prompt, string and block
// content, a run split by tool results, a repeated call id (its second result falls back to
// a hashed id), gap blocks, attachments, an empty message, and texts long enough to pass
// through the id hash in pieces.
var idsBody = `{"model":"m","system":"Be \"brief\".\n` + strings.Repeat("s", 700) + `","messages":[` +
	`{"role":"user","content":"hello \u00e9"},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"S"},{"type":"redacted_thinking","data":"ENC"},` +
	`{"type":"text","text":"ok","cache_control":{"type":"ephemeral"}},{"type":"tool_use","id":"t1","name":"Read","input":{ "p" : "a<b>" }},` +
	`{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}]},` +
	`{"role":"user","content":[{"type":"text","text":"before"},{"type":"tool_result","tool_use_id":"t1","content":"r1\nr2"},` +
	`{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},` +
	`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}},{"type":"search_result","x":1}]},` +
	`{"type":"text","text":"after ` + strings.Repeat("x\\n", 900) + `"},{"type":"document","source":{"type":"text","data":"doc"}},` +
	`{"type":"image","source":{"type":"url","url":"u"},"cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"assistant","content":[]}]}`

// Synthesized ids must be the same in every process and release: hooks and the audit log
// refer to items across requests by them. The expected ids are those the decoder has always
// derived (sha256 of position and canonical content); a change of any is a break.
func TestDecodeRequestIDsAreStable(t *testing.T) {
	want := []string{
		"sys-2a0af0517ea88742", "sys-2a0af0517ea88742.p0",
		"m0-8d84cfb921349c2f", "m0-8d84cfb921349c2f.p0",
		"m1-26089ebd7123f017", "m1-26089ebd7123f017.p0", "m1-26089ebd7123f017.p1",
		"m1-26089ebd7123f017.p2", "m1-26089ebd7123f017.p3", "m1-26089ebd7123f017.p4",
		"m2-0c6202ca2f5688e1", "m2-0c6202ca2f5688e1.p0",
		"tr-t1", "tr-t1.p0",
		"m2-7d2250026f64a188", "m2-7d2250026f64a188.p0", "m2-7d2250026f64a188.p1", "m2-7d2250026f64a188.p2",
		"m2-0ad38e97bceeb51f", "m2-0ad38e97bceeb51f.p0", "m2-0ad38e97bceeb51f.p1", "m2-0ad38e97bceeb51f.p2",
		"m3-2c732c4c3832d5b5",
	}
	for run := 0; run < 2; run++ { // the second decode reuses nothing of the first
		req := decode(t, idsBody)
		var got []string
		for _, m := range req.Items {
			got = append(got, m.ID)
			for _, p := range m.Parts {
				got = append(got, p.ID)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("ids changed:\n got %q\nwant %q", got, want)
		}
	}
}

// Decoded messages' part lists share backing arrays (the decoder's slab); each is capped,
// so a caller that appends to one message's parts cannot overwrite the next message's.
func TestDecodedPartListsAreIndependent(t *testing.T) {
	req := decode(t, idsBody)
	before := clone(req.Items)
	for k := range req.Items {
		if cap(req.Items[k].Parts) != len(req.Items[k].Parts) {
			t.Fatalf("item %d: part list not capped (len %d, cap %d)", k, len(req.Items[k].Parts), cap(req.Items[k].Parts))
		}
		req.Items[k].Parts = append(req.Items[k].Parts, ahp.TextPart("extra", "x"))
		req.Items[k].Parts = req.Items[k].Parts[:len(req.Items[k].Parts)-1]
	}
	if !reflect.DeepEqual(clone(req.Items), before) {
		t.Fatalf("appending to one message changed another:\n%s\n%s", summary(req.Items), summary(before))
	}
}
