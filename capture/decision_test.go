package capture

import (
	"testing"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
)

func text(s string) *string { return &s }

func response(calls ...string) *ahp.Event {
	ev := &ahp.Event{ID: "e", Type: ahp.EventModelResponseAfter}
	parts := []ahp.Part{{ID: "p0", Kind: ahp.KindText, Text: text("ok")}}
	for _, c := range calls {
		parts = append(parts, ahp.Part{ID: c, Kind: ahp.KindText, Category: ahp.CategoryToolCall, Text: text(`{"name":"` + c + `"}`)})
	}
	ev.Items = []ahp.Message{{ID: "m", Role: ahp.RoleAssistant, Parts: parts}}
	return ev
}

func TestSummarizeAndCompare(t *testing.T) {
	allow := &chain.Settlement{Event: response("Bash", "Read"), Permission: ahp.PermissionNone, Flow: ahp.FlowNone}
	deny := &chain.Settlement{Event: response("Bash", "Read"), Permission: ahp.PermissionDeny, Flow: ahp.FlowNone,
		Denial: &chain.Denial{Code: "org.example.no", BackendID: "b"}, Records: []chain.Record{{BackendID: "b", Effects: []string{ahp.EffectDeny}}}}
	removed := &chain.Settlement{Event: response("Read"), Permission: ahp.PermissionNone, Flow: ahp.FlowNone, Modified: true,
		Records: []chain.Record{{BackendID: "b", Effects: []string{ahp.EffectModify}}}}
	rewritten := &chain.Settlement{Event: response("Bash", "Read"), Permission: ahp.PermissionNone, Flow: ahp.FlowNone, Modified: true,
		Records: []chain.Record{{BackendID: "b", Effects: []string{ahp.EffectModify}}}}
	rewritten.Event.Items[0].Parts[0].Text = text("[REDACTED:aws_access_key_id:0123abcd]")
	rewrittenAgain := &chain.Settlement{Event: response("Bash", "Read"), Permission: ahp.PermissionNone, Flow: ahp.FlowNone, Modified: true,
		Records: []chain.Record{{BackendID: "b", Effects: []string{ahp.EffectModify}}}}
	rewrittenAgain.Event.Items[0].Parts[0].Text = text("[REDACTED:aws_access_key_id:9876fedc]")
	stop := &chain.Settlement{Event: response("Bash"), Permission: ahp.PermissionNone, Flow: ahp.FlowStop,
		Records: []chain.Record{{BackendID: "b", Effects: []string{ahp.EffectFlow}}}}

	if d := Summarize(deny); d.Outcome != enforcement.Refused || d.Calls != 2 || d.Denial.Code != "org.example.no" {
		t.Fatalf("Summarize(deny) = %+v", d)
	}
	for _, tc := range []struct {
		desc        string
		rec, cand   *chain.Settlement
		differs     bool
		diff        string
		wantOutcome enforcement.Action
	}{
		{"same", allow, allow, false, "", enforcement.Forwarded},
		{"refused", allow, deny, true, "would refuse the model response (org.example.no)", enforcement.Refused},
		{"no longer refused", deny, allow, true, "would no longer refuse the model response", enforcement.Forwarded},
		{"a call removed", allow, removed, true, "1 tool call removed", enforcement.Rewritten},
		{"text rewritten", allow, rewritten, true, "would rewrite the model response", enforcement.Rewritten},
		{"the same redaction of another value", rewritten, rewrittenAgain, false, "", enforcement.Rewritten},
		{"stopped", allow, stop, true, "would stop the agent; 1 tool call removed", enforcement.Stopped},
	} {
		rec, cand := Summarize(tc.rec), Summarize(tc.cand)
		differs, diff := Compare(ahp.EventModelResponseAfter, rec, cand)
		if differs != tc.differs || diff != tc.diff || cand.Outcome != tc.wantOutcome {
			t.Errorf("%s: Compare = %v %q (candidate %s), want %v %q (%s)", tc.desc, differs, diff, cand.Outcome, tc.differs, tc.diff, tc.wantOutcome)
		}
	}
}
