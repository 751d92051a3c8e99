package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func mixedRequest() *ahp.Event {
	size := int64(48213)
	ev := modelRequest("evt_proj",
		textMsg("m0", ahp.RoleSystem, "You are a coding agent."),
		ahp.Message{ID: "m1", Role: ahp.RoleUser, Parts: []ahp.Part{
			ahp.TextPart("m1.t", "Push my branch."),
			{ID: "m1.i", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionBody, Body: &ahp.Ref{Ref: "ref-1"}},
			{ID: "m1.j", Kind: ahp.KindAttachment, MediaType: "image/jpeg", Selection: ahp.SelectionMetadata, Size: &size},
		}},
		ahp.Message{ID: "m2", Role: ahp.RoleAssistant, Parts: []ahp.Part{
			{ID: "m2.r", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody, Category: ahp.CategoryReasoning, Text: strPtr("thinking...")},
			ahp.TextPart("m2.t", "Sure."),
		}},
	)
	return ev
}

func strPtr(s string) *string { return &s }

// TestProject: a subscription's content selection (body, metadata, omit) applies to every
// copy of a part, so no duplicate carries withheld content (AHP-CONTENT-002).
func TestProject(t *testing.T) {
	sum := sha256.Sum256([]byte("Push my branch."))
	tests := []struct {
		desc        string
		content     map[string]string
		native      bool
		include     bool
		wantSame    bool
		wantHidden  withheld
		wantSel     map[string]string // part id -> selection in the view
		checkPartFn func(t *testing.T, view *ahp.Event)
	}{
		{desc: "all body, no native: the event itself", content: bodyAll, wantSame: true, wantHidden: withheld{attachments: true},
			wantSel: map[string]string{"m1.t": "body", "m1.i": "body", "m1.j": "metadata", "m2.r": "body"}},
		{desc: "native is stripped unless included", content: bodyAll, native: true, wantHidden: withheld{attachments: true},
			wantSel: map[string]string{"m1.t": "body"}},
		{desc: "native kept with includeNative", content: bodyAll, native: true, include: true, wantSame: true, wantHidden: withheld{attachments: true}},
		{desc: "metadata default describes text by size and sha256",
			content: map[string]string{"default": "metadata"}, wantHidden: withheld{text: true, attachments: true},
			wantSel: map[string]string{"m0.p0": "metadata", "m1.t": "metadata", "m1.i": "metadata", "m1.j": "metadata", "m2.r": "metadata"},
			checkPartFn: func(t *testing.T, v *ahp.Event) {
				p := v.Items[1].Parts[0]
				if p.Text != nil || p.Size == nil || *p.Size != int64(len("Push my branch.")) || p.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("metadata text part = %+v", p)
				}
				if j := v.Items[1].Parts[2]; j.Size == nil || *j.Size != 48213 {
					t.Errorf("known attachment size lost: %+v", j)
				}
				if i := v.Items[1].Parts[1]; i.Body != nil {
					t.Errorf("metadata attachment keeps its body ref")
				}
			}},
		{desc: "explicit category wins over media type", content: map[string]string{"default": "body", "reasoning": "omit"},
			wantHidden: withheld{text: true, attachments: true},
			wantSel:    map[string]string{"m2.r": "omit", "m2.t": "body", "m1.t": "body"},
			checkPartFn: func(t *testing.T, v *ahp.Event) {
				if p := v.Items[2].Parts[0]; p.Text != nil || p.Size != nil || p.Category != ahp.CategoryReasoning {
					t.Errorf("omitted reasoning part = %+v", p)
				}
				if v.Items[0].Parts[0].Text == nil {
					t.Errorf("unchanged message lost its text")
				}
			}},
		{desc: "media type categories: images withheld, text kept", content: map[string]string{"default": "body", "images": "omit"},
			wantHidden: withheld{attachments: true},
			wantSel:    map[string]string{"m1.t": "body", "m1.i": "omit", "m1.j": "omit"}},
		{desc: "a selection never upgrades a withheld part", content: map[string]string{"default": "omit", "images": "body", "text": "body"},
			wantHidden: withheld{attachments: true, text: true},
			wantSel:    map[string]string{"m1.j": "metadata", "m1.i": "body", "m2.r": "omit"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ev := mixedRequest()
			if tc.native {
				ev.Native = json.RawMessage(`{"raw":"Push my branch."}`)
			}
			before, _ := json.Marshal(ev)
			sel := newSelection(tc.content, tc.include)
			view, w := project(ev, &sel)
			if (view == ev) != tc.wantSame {
				t.Errorf("view is the event itself = %v, want %v", view == ev, tc.wantSame)
			}
			if w != tc.wantHidden {
				t.Errorf("withheld = %+v, want %+v", w, tc.wantHidden)
			}
			if tc.native && !tc.include && view.Native != nil {
				t.Errorf("native not stripped")
			}
			for _, m := range view.Items {
				for _, p := range m.Parts {
					if want, ok := tc.wantSel[p.ID]; ok && p.Selection != want {
						t.Errorf("part %s selection %s, want %s", p.ID, p.Selection, want)
					}
				}
			}
			if tc.checkPartFn != nil {
				tc.checkPartFn(t, view)
			}
			after, _ := json.Marshal(ev)
			if string(before) != string(after) {
				t.Errorf("projection mutated the event")
			}
		})
	}
}

func TestNarrow(t *testing.T) {
	full := func(eventType string) *ahp.Capabilities {
		c := hostCaps(eventType, 1)
		return &c
	}
	tests := []struct {
		desc   string
		ev     *ahp.Event
		host   *ahp.Capabilities
		hidden withheld
		want   string
	}{
		{desc: "full view keeps whole-list replace", ev: modelRequest("e"), host: full(ahp.EventModelRequestBefore),
			want: `{"effects":["deny","modify","inject","return","flow","message"],"modify":{"request":{"replace":true,"merge":true}},"flow":{"operations":["stop"]},"inject":{"context":{"append":true,"deliverAt":["now","next_turn"]}}}`},
		{desc: "withheld text drops replace", ev: modelRequest("e"), host: full(ahp.EventModelRequestBefore), hidden: withheld{text: true},
			want: `{"effects":["deny","modify","inject","return","flow","message"],"modify":{"request":{"replace":false,"merge":true}},"flow":{"operations":["stop"]},"inject":{"context":{"append":true,"deliverAt":["now","next_turn"]}}}`},
		{desc: "withheld attachments drop replace too", ev: toolAfter("e"), host: &ahp.Capabilities{Effects: []string{"modify"}, Modify: map[string]ahp.ModifyOps{"output": {Replace: true}}}, hidden: withheld{attachments: true},
			want: `{"effects":[]}`},
		{desc: "effects outside the bound are dropped", ev: modelRequest("e"), host: &ahp.Capabilities{Effects: []string{"allow", "ask", "deny", "deny", "com.example.x"}},
			want: `{"effects":["deny"]}`},
		{desc: "object targets keep replace with withheld text", ev: toolBefore("e"), host: &ahp.Capabilities{Effects: []string{"modify"}, Modify: map[string]ahp.ModifyOps{"input": {Replace: true, Merge: true}, "output": {Merge: true}}}, hidden: withheld{text: true},
			want: `{"effects":["modify"],"modify":{"input":{"replace":true,"merge":true}}}`},
		{desc: "a target the engine cannot apply is not advertised", ev: &ahp.Event{ID: "e", Type: "user.message.inbound"},
			host: &ahp.Capabilities{Effects: []string{"deny", "modify", "message"}, Modify: map[string]ahp.ModifyOps{"prompt": {Replace: true, Merge: true}}},
			want: `{"effects":["deny","message"]}`},
		{desc: "input that is not an object cannot be edited", ev: &ahp.Event{ID: "e", Type: ahp.EventToolBefore, Tool: &ahp.Tool{Input: json.RawMessage(`"x"`)}},
			host: &ahp.Capabilities{Effects: []string{"modify"}, Modify: map[string]ahp.ModifyOps{"input": {Merge: true}}}, want: `{"effects":[]}`},
		{desc: "inject without deliverAt is dropped", ev: modelRequest("e"), host: &ahp.Capabilities{Effects: []string{"inject"}, Inject: &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true}}},
			want: `{"effects":[]}`},
		{desc: "continue carries its counters", ev: turnFinish("e", 2), host: full(ahp.EventTurnFinishBefore),
			want: `{"effects":["modify","flow","message"],"modify":{"response":{"replace":true,"merge":true}},"flow":{"operations":["stop","continue"],"remainingContinuations":1,"continuationCount":0}}`},
		{desc: "exhausted allowance keeps continue, with 0 left", ev: turnFinish("e", 2),
			host: &ahp.Capabilities{Effects: []string{"flow"}, Flow: &ahp.FlowCaps{Operations: []string{"continue"}, RemainingContinuations: intPtr(0), ContinuationCount: intPtr(2)}},
			want: `{"effects":["flow"],"flow":{"operations":["continue"],"remainingContinuations":0,"continuationCount":2}}`},
		{desc: "the continuation count falls back to the event's", ev: turnFinish("e", 2),
			host: &ahp.Capabilities{Effects: []string{"flow"}, Flow: &ahp.FlowCaps{Operations: []string{"continue"}, RemainingContinuations: intPtr(0)}},
			want: `{"effects":["flow"],"flow":{"operations":["continue"],"remainingContinuations":0,"continuationCount":2}}`},
		{desc: "elicitation control is not offered without the elicitation mode", ev: &ahp.Event{ID: "e", Type: "user.elicitation.request"},
			host: &ahp.Capabilities{Effects: []string{"deny", "return", "message"}, Elicitation: &ahp.ElicitationCaps{Form: &struct{}{}}},
			want: `{"effects":["message"],"elicitation":{"form":{}}}`},
		{desc: "continue is never offered at tool.before", ev: toolBefore("e"),
			host: &ahp.Capabilities{Effects: []string{"flow"}, Flow: &ahp.FlowCaps{Operations: []string{"continue", "stop"}, RemainingContinuations: intPtr(3), ContinuationCount: intPtr(0)}},
			want: `{"effects":["flow"],"flow":{"operations":["stop"]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			target, loc := locate(tc.ev)
			got := narrow(tc.host, tc.ev, target, loc, tc.hidden)
			b, _ := json.Marshal(got)
			if string(b) != tc.want {
				t.Fatalf("narrowed =\n %s\nwant\n %s", b, tc.want)
			}
		})
	}
}

// TestReplaceNotAdvertisedToMetadataSubscriber: end to end, a subscriber that sees text
// only as metadata is offered merge but not whole-list replace, and its replace is
// rejected even though the host could replace.
func TestReplaceNotAdvertisedToMetadataSubscriber(t *testing.T) {
	f := &fakeTransport{onIntercept: respond(`{"type":"modify","target":"request","operation":"replace","value":[]}`)}
	doc := docOf(fakeBackend("com.meta", withContent(icpt("fail-open", 1000, "model.request.before"), map[string]string{"default": "metadata"})))
	c := newFakeChain(t, doc, map[string]*fakeTransport{"com.meta": f}, Options{})
	ev := modelRequest("evt_meta")
	st := c.Intercept(t.Context(), ev, hostCaps(ahp.EventModelRequestBefore, 0))
	st.Wait()
	caps := f.interceptAt(0).Capabilities
	if ops := caps.Modify["request"]; ops.Replace || !ops.Merge {
		t.Errorf("advertised %+v, want merge only", ops)
	}
	if st.Modified || st.Records[0].FailureKind != "invalid" || len(st.Event.Items) != 2 {
		t.Errorf("replace from a metadata subscriber: modified=%v record=%+v", st.Modified, st.Records[0])
	}
	for _, m := range f.interceptAt(0).Event.Items {
		for _, p := range m.Parts {
			if p.Text != nil {
				t.Errorf("metadata subscriber received text of %s", p.ID)
			}
		}
	}
}

// TestProjectBareParts: the bare part items of a generic slot (tool.before) are projected
// by the same selection as message parts; an omitted one is left out of the list.
func TestProjectBareParts(t *testing.T) {
	size := int64(7)
	toolEvent := func() *ahp.Event {
		return &ahp.Event{ID: "evt_tb", Type: ahp.EventToolBefore, Items: []ahp.Message{
			ahp.PartItem(ahp.TextPart("t", "secret text")),
			ahp.PartItem(ahp.Part{ID: "i", Kind: ahp.KindAttachment, MediaType: "image/png", Selection: ahp.SelectionBody, Body: &ahp.Ref{Ref: "ref-1"}}),
			ahp.PartItem(ahp.Part{ID: "m", Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionMetadata, Size: &size}),
		}}
	}
	sum := sha256.Sum256([]byte("secret text"))
	tests := []struct {
		desc       string
		content    map[string]string
		wantSame   bool
		wantHidden withheld
		want       string // the projected items
	}{
		{desc: "body: the event itself", content: bodyAll, wantSame: true, wantHidden: withheld{text: true},
			want: `[{"id":"t","kind":"text","mediaType":"text/plain","selection":"body","text":"secret text"},` +
				`{"id":"i","kind":"attachment","mediaType":"image/png","selection":"body","body":{"ref":"ref-1"}},` +
				`{"id":"m","kind":"text","mediaType":"text/plain","selection":"metadata","size":7}]`},
		{desc: "metadata describes text by size and sha256", content: map[string]string{"default": "metadata"}, wantHidden: withheld{text: true, attachments: true},
			want: `[{"id":"t","kind":"text","mediaType":"text/plain","selection":"metadata","size":11,"sha256":"` + hex.EncodeToString(sum[:]) + `"},` +
				`{"id":"i","kind":"attachment","mediaType":"image/png","selection":"metadata"},` +
				`{"id":"m","kind":"text","mediaType":"text/plain","selection":"metadata","size":7}]`},
		{desc: "omit leaves every part out", content: map[string]string{"default": "omit"}, wantHidden: withheld{text: true, attachments: true},
			want: `[]`},
		{desc: "images omitted, text kept", content: map[string]string{"default": "body", "images": "omit"}, wantHidden: withheld{text: true, attachments: true},
			want: `[{"id":"t","kind":"text","mediaType":"text/plain","selection":"body","text":"secret text"},` +
				`{"id":"m","kind":"text","mediaType":"text/plain","selection":"metadata","size":7}]`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ev := toolEvent()
			before, _ := json.Marshal(ev)
			sel := newSelection(tc.content, false)
			view, w := project(ev, &sel)
			if (view == ev) != tc.wantSame {
				t.Errorf("view is the event itself = %v, want %v", view == ev, tc.wantSame)
			}
			if w != tc.wantHidden {
				t.Errorf("withheld = %+v, want %+v", w, tc.wantHidden)
			}
			got, _ := json.Marshal(view.Items)
			if !jsonEqual(got, json.RawMessage(tc.want)) {
				t.Errorf("items = %s\nwant %s", got, tc.want)
			}
			if after, _ := json.Marshal(ev); string(before) != string(after) {
				t.Errorf("projection mutated the event")
			}
		})
	}
}
