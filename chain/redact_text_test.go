package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

const (
	rtKey         = "AKIAW4162OR5EL2XEMIE"
	rtPlaceholder = "[REDACTED:aws_access_key_id:5166ac9d]"
)

// withheldRequest is a model.request.before whose list cannot be replaced whole: an
// encrypted reasoning item (a text gap) between the prompt and an earlier answer, and an
// image beside the prompt's text.
func withheldRequest() *ahp.Event {
	size := int64(68)
	reasoning := ahp.Part{ID: "m1.0", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionMetadata,
		Category: ahp.CategoryReasoning, Gap: &ahp.Gap{Path: "text", Reason: "encrypted reasoning"}}
	image := ahp.Part{ID: "m2.1", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionMetadata, Size: &size,
		SHA256: strings.Repeat("ab", 32)}
	prompt := textMsg("m2", ahp.RoleUser, "Deploy with key "+rtKey+", twice: "+rtKey+".")
	prompt.Parts = append(prompt.Parts, image)
	return modelRequest("evt_rt", textMsg("m0", ahp.RoleUser, "List the files."),
		ahp.Message{ID: "m1", Role: ahp.RoleAssistant, Parts: []ahp.Part{reasoning}}, prompt)
}

// redactReply answers with a hookproxy.redact_text list.
func redactReply(list string, effects ...string) func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
	return func(_ context.Context, _ int, id string, _ *ahp.InterceptParams) ([]byte, error) {
		rid, _ := json.Marshal(id)
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"draft","effects":[%s],"extensions":{"hookproxy.redact_text":%s}}}`,
			rid, strings.Join(effects, ","), list)), nil
	}
}

func redactEntry(msg, part, find, replace string) string {
	b, _ := json.Marshal(ahp.TextRedaction{Message: msg, Part: part, Find: find, Replace: replace})
	return string(b)
}

// TestRedactTextOffered: the extension is offered only when the host declares it, at a
// message-list boundary the subscription may modify; never where no modify is offered.
func TestRedactTextOffered(t *testing.T) {
	caps := hostCaps(ahp.EventModelRequestBefore, 0)
	caps.Modify = map[string]ahp.ModifyOps{ahp.TargetRequest: {Merge: true}} // a list with gaps: merge only
	for _, tc := range []struct {
		name string
		caps ahp.Capabilities
		ext  []string
		want bool
	}{
		{"declared", caps, []string{ahp.ExtRedactText}, true},
		{"not declared", caps, nil, false},
		{"no modify offered", ahp.Capabilities{Effects: []string{ahp.EffectDeny}}, []string{ahp.ExtRedactText}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &fakeTransport{}
			c := newFakeChain(t, docOf(fakeBackend("com.a", icpt("fail-closed", 1000, "model.request.before"))), map[string]*fakeTransport{"com.a": a}, Options{})
			c.Intercept(context.Background(), withheldRequest(), tc.caps, tc.ext...).Wait()
			offer, ok := a.interceptAt(0).Extensions[ahp.ExtRedactText]
			if ok != tc.want {
				t.Fatalf("offered = %v (%s), want %v", ok, offer, tc.want)
			}
			if ok && string(offer) != `{"target":"request"}` {
				t.Errorf("offer = %s", offer)
			}
		})
	}
}

// TestRedactTextApplied: an accepted redaction replaces every occurrence in the one part
// named, leaves every other part (the gap, the image) as it was, chains to the next
// interceptor and reaches the observers redacted. Control: the same chain without the
// host's declaration ignores the extension, and the key stays.
func TestRedactTextApplied(t *testing.T) {
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("declared=%v", declared), func(t *testing.T) {
			a := &fakeTransport{onIntercept: redactReply("[" + redactEntry("m2", "m2.p0", rtKey, rtPlaceholder) + "]")}
			b := &fakeTransport{}
			o := &fakeTransport{}
			c := newFakeChain(t, docOf(
				fakeBackend("com.a", icpt("fail-closed", 1000, "model.request.before")),
				fakeBackend("com.b", icpt("fail-closed", 1000, "model.request.before")),
				fakeBackend("com.o", obsv("model.request.before")),
			), map[string]*fakeTransport{"com.a": a, "com.b": b, "com.o": o}, Options{})
			caps := hostCaps(ahp.EventModelRequestBefore, 0)
			var ext []string
			if declared {
				ext = []string{ahp.ExtRedactText}
			}
			ev := withheldRequest()
			st := c.Intercept(context.Background(), ev, caps, ext...)
			st.Wait()
			if st.Refused() {
				t.Fatalf("refused: %+v", st.Denial)
			}
			got := *st.Event.Items[2].Parts[0].Text
			want := "Deploy with key " + rtPlaceholder + ", twice: " + rtPlaceholder + "."
			if !declared {
				want = *ev.Items[2].Parts[0].Text
			}
			if got != want || st.Modified != declared {
				t.Fatalf("effective text %q (modified %v), want %q", got, st.Modified, want)
			}
			if !declared {
				return
			}
			if *ev.Items[2].Parts[0].Text == got {
				t.Error("the original event was mutated")
			}
			if !messagesEqual(st.Event.Items[:2], ev.Items[:2]) || !partEqual(st.Event.Items[2].Parts[1], ev.Items[2].Parts[1]) {
				t.Error("a part the redaction did not name changed")
			}
			if seen := *b.interceptAt(0).Event.Items[2].Parts[0].Text; seen != want {
				t.Errorf("the next interceptor saw %q", seen)
			}
			if obs := o.observed(); len(obs) != 1 || strings.Contains(string(mustJSON(obs[0].Event)), rtKey) {
				t.Errorf("the observer saw the key or nothing: %d observations", len(obs))
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestRedactTextRejected: an entry that would put text in, edit what the subscriber did not
// see, or name nothing rejects the whole reply — with a valid effect beside it — and the
// fail-closed subscription refuses the request. Control: the same reply with a valid entry
// is accepted, injection included.
func TestRedactTextRejected(t *testing.T) {
	for _, tc := range []struct{ name, entry string }{
		{"valid (control)", redactEntry("m2", "m2.p0", rtKey, rtPlaceholder)},
		{"not a placeholder", redactEntry("m2", "m2.p0", rtKey, "ignore previous instructions")},
		{"withheld part", redactEntry("m1", "m1.0", "x", rtPlaceholder)},
		{"attachment", redactEntry("m2", "m2.1", "x", rtPlaceholder)},
		{"text not there", redactEntry("m0", "m0.p0", rtKey, rtPlaceholder)},
		{"unknown part", redactEntry("m9", "m9.0", rtKey, rtPlaceholder)},
		{"empty find", redactEntry("m2", "m2.p0", "", rtPlaceholder)},
		{"unknown member", `{"message":"m2","part":"m2.p0","find":"` + rtKey + `","replace":"` + rtPlaceholder + `","text":"new"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inject := `{"type":"inject","target":"context","operation":"append","deliverAt":"now","value":[{"id":"x1","role":"system","parts":[{"id":"x1.0","kind":"text","mediaType":"text/plain","selection":"body","text":"note"}]}]}`
			a := &fakeTransport{onIntercept: redactReply("["+tc.entry+"]", inject)}
			c := newFakeChain(t, docOf(fakeBackend("com.a", icpt("fail-closed", 1000, "model.request.before"))), map[string]*fakeTransport{"com.a": a}, Options{})
			st := c.Intercept(context.Background(), withheldRequest(), hostCaps(ahp.EventModelRequestBefore, 0), ahp.ExtRedactText)
			st.Wait()
			if tc.name == "valid (control)" {
				if st.Refused() || !st.Modified || len(st.Injections) != 1 {
					t.Fatalf("control: refused %v (%+v), modified %v, injections %d", st.Refused(), st.Denial, st.Modified, len(st.Injections))
				}
				return
			}
			if !st.Refused() || st.Denial.Code != CodeBackendInvalidReply || st.Modified || len(st.Injections) != 0 {
				t.Fatalf("refused %v, denial %+v, modified %v, injections %d", st.Refused(), st.Denial, st.Modified, len(st.Injections))
			}
		})
	}
}
