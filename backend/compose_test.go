package backend_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// prefixUser returns an effect function that replaces the user message's text by prefix +
// the text the policy was sent, keeping every id.
func prefixUser(prefix string) func(ev *ahp.Event) []ahp.Effect {
	return func(ev *ahp.Event) []ahp.Effect {
		items := append([]ahp.Message(nil), ev.Items...)
		last := items[len(items)-1]
		p := last.Parts[0]
		txt := prefix + p.TextOf()
		p.Text = &txt
		last.Parts = []ahp.Part{p}
		items[len(items)-1] = last
		b, _ := json.Marshal(items)
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetRequest, Operation: ahp.OpReplace, Value: b}}
	}
}

func effects(e ...ahp.Effect) func(*ahp.Event) []ahp.Effect {
	return func(*ahp.Event) []ahp.Effect { return e }
}

func strp(s string) *string { return &s }

// TestCompose runs several policies as one backend and checks the single reply: it must be
// valid AHP and, applied by a harness to the event it sent, give what the policies decided
// one after another.
func TestCompose(t *testing.T) {
	type result struct {
		effects string // effect types of the reply, in order
		check   func(t *testing.T, effs []ahp.Effect)
	}
	mergeOnly := func(c *ahp.Capabilities) *ahp.Capabilities {
		for k := range c.Modify {
			c.Modify[k] = ahp.ModifyOps{Merge: true}
		}
		return c
	}
	cases := []struct {
		desc    string
		entries func() []entry
		event   *ahp.Event
		caps    *ahp.Capabilities
		want    result
		errCode int
		after   func(t *testing.T, es []entry)
	}{
		{
			desc: "two replaces chain into one final replace",
			entries: func() []entry {
				return []entry{
					{name: "first", events: []string{"model.request.before"}, policy: &scripted{effect: prefixUser("A:")}},
					{name: "second", events: []string{"model.request.before"}, policy: &scripted{effect: prefixUser("B:")}},
				}
			},
			event: requestEvent("e1", "hello"),
			caps:  fullCaps(ahp.EventModelRequestBefore),
			want: result{effects: "modify(requestreplace)", check: func(t *testing.T, effs []ahp.Effect) {
				var items []ahp.Message
				if err := json.Unmarshal(effs[0].Value, &items); err != nil {
					t.Fatal(err)
				}
				if got := items[1].Parts[0].TextOf(); got != "B:A:hello" {
					t.Errorf("final text %q, want B:A:hello (the second policy edits the first one's result)", got)
				}
				if items[0].Parts[0].TextOf() != "You are a coding agent." || items[1].ID != "m1" {
					t.Errorf("untouched content changed: %+v", items)
				}
			}},
			after: func(t *testing.T, es []entry) {
				if got := es[1].policy.calls()[0].Items[1].Parts[0].TextOf(); got != "A:hello" {
					t.Errorf("second policy saw %q, want the first one's edit A:hello", got)
				}
			},
		},
		{
			desc: "deny short-circuits; earlier edits and messages are kept",
			entries: func() []entry {
				return []entry{
					{name: "edit", events: []string{"model.request.before"}, policy: &scripted{effect: func(ev *ahp.Event) []ahp.Effect {
						return append(prefixUser("X:")(ev), ahp.Effect{Type: ahp.EffectMessage, Text: strp("edited")})
					}}},
					{name: "deny", events: []string{"model.request.before"}, policy: &scripted{effect: effects(
						ahp.Effect{Type: ahp.EffectDeny, Reason: "No.", Code: "com.example.no"})}},
					{name: "never", events: []string{"model.request.before"}, policy: &scripted{}},
				}
			},
			event: requestEvent("e2", "hello"),
			caps:  fullCaps(ahp.EventModelRequestBefore),
			want: result{effects: "modify(requestreplace),deny,message", check: func(t *testing.T, effs []ahp.Effect) {
				if effs[1].Reason != "No." || effs[1].Code != "com.example.no" {
					t.Errorf("deny = %+v", effs[1])
				}
			}},
			after: func(t *testing.T, es []entry) {
				if n := len(es[2].policy.calls()); n != 0 {
					t.Errorf("a policy after the deny was called %d times", n)
				}
			},
		},
		{
			desc: "an allow is dropped when a later policy changes the input",
			entries: func() []entry {
				return []entry{
					{name: "allow", events: []string{"tool.before"}, policy: &scripted{effect: effects(ahp.Effect{Type: ahp.EffectAllow})}},
					{name: "edit", events: []string{"tool.before"}, policy: &scripted{effect: effects(ahp.Effect{Type: ahp.EffectModify,
						Target: ahp.TargetInput, Operation: ahp.OpMerge, Value: json.RawMessage(`{"timeout":30}`)})}},
				}
			},
			event: toolEvent("e3", "Bash", `{"command":"ls"}`),
			caps:  fullCaps(ahp.EventToolBefore),
			want: result{effects: "modify(inputreplace)", check: func(t *testing.T, effs []ahp.Effect) {
				if !jsonEq(effs[0].Value, `{"command":"ls","timeout":30}`) {
					t.Errorf("input = %s", effs[0].Value)
				}
			}},
		},
		{
			desc: "merge-only input: one merge with the changed members",
			entries: func() []entry {
				return []entry{
					{name: "a", events: []string{"tool.before"}, policy: &scripted{effect: effects(ahp.Effect{Type: ahp.EffectModify,
						Target: ahp.TargetInput, Operation: ahp.OpMerge, Value: json.RawMessage(`{"timeout":30}`)})}},
					{name: "b", events: []string{"tool.before"}, policy: &scripted{effect: effects(ahp.Effect{Type: ahp.EffectModify,
						Target: ahp.TargetInput, Operation: ahp.OpMerge, Value: json.RawMessage(`{"command":"ls -l"}`)})}},
				}
			},
			event: toolEvent("e4", "Bash", `{"command":"ls","cwd":"/repo"}`),
			caps:  mergeOnly(fullCaps(ahp.EventToolBefore)),
			want: result{effects: "modify(inputmerge)", check: func(t *testing.T, effs []ahp.Effect) {
				if !jsonEq(effs[0].Value, `{"command":"ls -l","timeout":30}`) {
					t.Errorf("merge value = %s", effs[0].Value)
				}
			}},
		},
		{
			desc: "merge-only list: one merge appending both policies' messages in order",
			entries: func() []entry {
				return []entry{
					{name: "a", events: []string{"model.request.before"}, policy: &scripted{effect: func(*ahp.Event) []ahp.Effect {
						return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetRequest, Operation: ahp.OpMerge,
							Value: msgsJSON(t, text("x1", ahp.RoleUser, "note A"))}}
					}}},
					{name: "b", events: []string{"model.request.before"}, policy: &scripted{effect: func(*ahp.Event) []ahp.Effect {
						return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetRequest, Operation: ahp.OpMerge,
							Value: msgsJSON(t, text("x2", ahp.RoleUser, "note B"))}}
					}}},
				}
			},
			event: requestEvent("e5", "hi"),
			caps:  mergeOnly(fullCaps(ahp.EventModelRequestBefore)),
			want: result{effects: "modify(requestmerge)", check: func(t *testing.T, effs []ahp.Effect) {
				var items []ahp.Message
				_ = json.Unmarshal(effs[0].Value, &items)
				if len(items) != 2 || items[0].ID != "x1" || items[1].ID != "x2" {
					t.Errorf("appended = %s", effs[0].Value)
				}
			}},
		},
		{
			desc: "ask wins over a later allow; messages and injections keep their order",
			entries: func() []entry {
				inj := ahp.Effect{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend, DeliverAt: ahp.DeliverNow,
					Value: msgsJSON(t, text("i1", ahp.RoleSystem, "Be careful."))}
				return []entry{
					{name: "a", events: []string{"tool.before"}, policy: &scripted{effect: effects(ahp.Effect{Type: ahp.EffectAsk},
						ahp.Effect{Type: ahp.EffectMessage, Text: strp("one")}, inj)}},
					{name: "b", events: []string{"tool.before"}, policy: &scripted{effect: effects(ahp.Effect{Type: ahp.EffectAllow},
						ahp.Effect{Type: ahp.EffectMessage, Text: strp("two")})}},
				}
			},
			event: toolEvent("e6", "Bash", `{"command":"ls"}`),
			caps:  fullCaps(ahp.EventToolBefore),
			want: result{effects: "inject(contextappend),ask,message,message", check: func(t *testing.T, effs []ahp.Effect) {
				if *effs[2].Text != "one" || *effs[3].Text != "two" {
					t.Errorf("messages out of order: %+v", effs)
				}
			}},
		},
		{
			desc: "a supplied result is dropped when a later policy edits the request",
			entries: func() []entry {
				ret := ahp.Effect{Type: ahp.EffectReturn, Value: msgsJSON(t, text("r1", ahp.RoleAssistant, "cached"))}
				return []entry{
					{name: "ret", events: []string{"model.request.before"}, policy: &scripted{effect: effects(ret)}},
					{name: "edit", events: []string{"model.request.before"}, policy: &scripted{effect: prefixUser("E:")}},
				}
			},
			event: requestEvent("e7", "hi"),
			caps:  fullCaps(ahp.EventModelRequestBefore),
			want:  result{effects: "modify(requestreplace)"},
		},
		{
			desc: "a supplied result with no later change is sent",
			entries: func() []entry {
				ret := ahp.Effect{Type: ahp.EffectReturn, Value: msgsJSON(t, text("r1", ahp.RoleAssistant, "cached"))}
				return []entry{
					{name: "ret", events: []string{"model.request.before"}, policy: &scripted{effect: effects(ret)}},
					{name: "noop", events: []string{"model.request.before"}, policy: &scripted{}},
				}
			},
			event: requestEvent("e8", "hi"),
			caps:  fullCaps(ahp.EventModelRequestBefore),
			want:  result{effects: "return"},
		},
		{
			desc: "fail-open failure: the other policies still answer",
			entries: func() []entry {
				return []entry{
					{name: "broken", events: []string{"model.request.before"}, policy: &scripted{fail: true}},
					{name: "edit", events: []string{"model.request.before"}, policy: &scripted{effect: prefixUser("E:")}},
				}
			},
			event: requestEvent("e9", "hi"),
			caps:  fullCaps(ahp.EventModelRequestBefore),
			want:  result{effects: "modify(requestreplace)"},
		},
		{
			desc: "fail-closed failure is a deny naming the policy backend",
			entries: func() []entry {
				return []entry{
					{name: "broken", failure: registration.FailClosed, events: []string{"tool.before"}, policy: &scripted{fail: true}},
					{name: "never", events: []string{"tool.before"}, policy: &scripted{}},
				}
			},
			event: toolEvent("e10", "Bash", `{"command":"ls"}`),
			caps:  fullCaps(ahp.EventToolBefore),
			want: result{effects: "deny", check: func(t *testing.T, effs []ahp.Effect) {
				if effs[0].Code != chain.CodeFailClosed || !strings.Contains(effs[0].Reason, "test.broken") || strings.Contains(effs[0].Reason, "crashed") {
					t.Errorf("deny = %+v", effs[0])
				}
			}},
		},
		{
			desc: "fail-closed failure where deny is not advertised becomes flow stop",
			entries: func() []entry {
				return []entry{{name: "broken", failure: registration.FailClosed, events: []string{"tool.after"}, policy: &scripted{fail: true}}}
			},
			event: toolAfterEvent("e11", "output"),
			caps:  fullCaps(ahp.EventToolAfter),
			want:  result{effects: "flow(stop)"},
		},
		{
			desc: "fail-closed failure with neither deny nor stop advertised: -32004",
			entries: func() []entry {
				return []entry{{name: "broken", failure: registration.FailClosed, events: []string{"tool.after"}, policy: &scripted{fail: true}}}
			},
			event:   toolAfterEvent("e12", "output"),
			caps:    &ahp.Capabilities{Effects: []string{"modify", "message"}, Modify: map[string]ahp.ModifyOps{"output": {Replace: true, Merge: true}}},
			errCode: ahp.CodeBackendInternalError,
		},
		{
			desc: "no policy asks for anything: an empty effect list",
			entries: func() []entry {
				return []entry{{name: "noop", events: []string{"tool.before"}, policy: &scripted{}}}
			},
			event: toolEvent("e13", "Read", `{"path":"a"}`),
			caps:  fullCaps(ahp.EventToolBefore),
			want:  result{effects: ""},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			es := tc.entries()
			srv := scriptedServer(t, es...)
			out := srv.Respond(context.Background(), interceptFrame(t, tc.event, tc.caps))
			r := decodeReply(t, out)
			if string(r.ID) != `"`+tc.event.ID+`"` {
				t.Errorf("reply id %s, want the event id", r.ID)
			}
			if tc.errCode != 0 {
				if r.Error == nil || r.Error.Code != tc.errCode {
					t.Fatalf("reply %s, want error %d", out, tc.errCode)
				}
				return
			}
			if r.Error != nil {
				t.Fatalf("unexpected error reply %s", out)
			}
			assertValidResult(t, out)
			// The harness-side check of the combined reply: whole-response validation and
			// staging against the event as sent.
			if _, err := chain.ValidateReply(out, replyContext(t, tc.event, tc.caps)); err != nil {
				t.Errorf("a harness rejects the combined reply: %v\n%s", err, out)
			}
			if got := effectTypes(r.Result.Effects); got != tc.want.effects {
				t.Fatalf("effects %q, want %q\n%s", got, tc.want.effects, out)
			}
			if tc.want.check != nil {
				tc.want.check(t, r.Result.Effects)
			}
			if tc.after != nil {
				tc.after(t, es)
			}
		})
	}
}

func replyContext(t testing.TB, ev *ahp.Event, caps *ahp.Capabilities) chain.ReplyContext {
	t.Helper()
	cur := map[string]json.RawMessage{}
	switch target := ahp.EventBounds[ev.Type].Target; target {
	case ahp.TargetInput:
		cur[target] = ev.Tool.Input
	case ahp.TargetRequest, ahp.TargetOutput, ahp.TargetResponse:
		cur[target] = msgsJSON(t, ev.Items...)
	}
	return chain.ReplyContext{RequestID: ev.ID, EventType: ev.Type, Capabilities: caps, Current: cur}
}

func jsonEq(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
