package chain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// sharedAHP is the protocol material shared by the project (never copied into the repo).
const sharedAHP = "../../shared/ahp"

type fixtureCase struct {
	ID                      string `json:"id"`
	Path                    string `json:"path"`
	Schema                  string `json:"schema"`
	ExpectedValid           bool   `json:"expectedValid"`
	AggregateExpectedValid  bool   `json:"aggregateExpectedValid"`
	ContextualExpectedValid *bool  `json:"contextualExpectedValid"`
	EditContext             *struct {
		Event   string                     `json:"event"`
		Current map[string]json.RawMessage `json:"current"`
		Mode    string                     `json:"mode"`
		Action  string                     `json:"action"`
	} `json:"editContext"`
}

// responseSchemas are the schemas of fixtures that are intercept replies.
var responseSchemas = []string{
	"intercept-response.schema.json",
	"intercept-deny-response.schema.json",
	"intercept-no-effect-response.schema.json",
	"json-rpc-message.schema.json",
}

// TestResponseFixtures runs every response fixture of the draft through ValidateReply:
// valid ones are accepted, invalid ones rejected — at wire level, and in the boundary
// context given by editContext for the contextual-* cases.
func TestResponseFixtures(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(sharedAHP, "fixtures/draft/manifest.json"))
	if err != nil {
		t.Skipf("shared fixtures not available: %v", err)
	}
	var manifest struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fc := range manifest.Cases {
		if !slices.Contains(responseSchemas, filepath.Base(fc.Schema)) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(sharedAHP, fc.Path))
		if err != nil {
			t.Fatalf("%s: %v", fc.ID, err)
		}
		frames := [][]byte{data}
		if strings.HasSuffix(fc.Path, ".jsonl") {
			frames = nil
			for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
				frames = append(frames, []byte(l))
			}
		}
		for _, frame := range frames {
			n++
			t.Run(fc.ID, func(t *testing.T) {
				// A JSON-RPC error response is a well-formed message, but for an intercept
				// it is always an operational failure (rpc_error).
				isRPCError := strings.Contains(fc.ID, "error-response") && fc.AggregateExpectedValid
				_, err := ValidateReply(frame, ReplyContext{})
				switch {
				case isRPCError:
					if transport.KindOf(err) != transport.KindRPCError {
						t.Fatalf("error response: err = %v, want kind rpc_error", err)
					}
				case fc.AggregateExpectedValid && err != nil:
					t.Fatalf("valid reply rejected: %v", err)
				case !fc.AggregateExpectedValid && err == nil:
					t.Fatalf("invalid reply accepted")
				}
				if fc.EditContext == nil || fc.ContextualExpectedValid == nil {
					return
				}
				rc := ReplyContext{
					EventType: fc.EditContext.Event, Current: fc.EditContext.Current,
					ElicitationMode: fc.EditContext.Mode, ElicitationAction: fc.EditContext.Action,
				}
				st, err := ValidateReply(frame, rc)
				if *fc.ContextualExpectedValid != (err == nil) {
					t.Fatalf("in context %s: err = %v, want valid=%v", fc.EditContext.Event, err, *fc.ContextualExpectedValid)
				}
				if err == nil && len(st.Values) == 0 {
					t.Fatalf("accepted modification staged no value")
				}
			})
		}
	}
	if n < 25 {
		t.Fatalf("only %d response fixtures found", n)
	}
	t.Logf("%d response fixture frames checked", n)
}

func TestValidateReply(t *testing.T) {
	msgs := func(role, text string) string {
		return `[{"id":"n1","role":"` + role + `","parts":[{"id":"n1.p","kind":"text","mediaType":"text/plain","selection":"body","text":"` + text + `"}]}]`
	}
	frame := func(effects ...string) []byte { return reply("evt1", effects...) }
	tb := ReplyContext{RequestID: "evt1", EventType: ahp.EventToolBefore, Current: map[string]json.RawMessage{"input": json.RawMessage(`{"a":{"x":1},"b":2}`)}}
	tbCaps := func(c ahp.Capabilities) ReplyContext { r := tb; r.Capabilities = &c; return r }
	tests := []struct {
		desc    string
		frame   []byte
		rc      ReplyContext
		wantErr string // substring; "" = accepted
		check   func(t *testing.T, st *Staged)
	}{
		{desc: "no effects", frame: frame(), rc: tb},
		{desc: "not UTF-8", frame: []byte("{\"jsonrpc\":\"2.0\",\"id\":\"evt1\",\"result\":{\"protocolVersion\":\"draft\",\"effects\":[{\"type\":\"message\",\"text\":\"\xff\"}]}}"), rc: tb, wantErr: "UTF-8"},
		{desc: "batch", frame: []byte(`[` + string(frame()) + `]`), rc: tb, wantErr: "single JSON-RPC object"},
		{desc: "wrong jsonrpc", frame: []byte(`{"jsonrpc":"1.0","id":"evt1","result":{"protocolVersion":"draft","effects":[]}}`), rc: tb, wantErr: "jsonrpc"},
		{desc: "method present", frame: []byte(`{"jsonrpc":"2.0","id":"evt1","method":"hooks/intercept","result":{"protocolVersion":"draft","effects":[]}}`), rc: tb, wantErr: "method"},
		{desc: "id mismatch", frame: reply("evt2"), rc: tb, wantErr: "id does not match"},
		{desc: "numeric id never equals the string id", frame: []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"draft","effects":[]}}`), rc: tb, wantErr: "id does not match"},
		{desc: "null effects", frame: []byte(`{"jsonrpc":"2.0","id":"evt1","result":{"protocolVersion":"draft","effects":null}}`), rc: tb, wantErr: "effects must be an array"},
		{desc: "missing effects", frame: []byte(`{"jsonrpc":"2.0","id":"evt1","result":{"protocolVersion":"draft"}}`), rc: tb, wantErr: "effects is required"},
		{desc: "manifest in result", frame: []byte(`{"jsonrpc":"2.0","id":"evt1","result":{"protocolVersion":"draft","effects":[],"manifest":{}}}`), rc: tb, wantErr: "manifest"},
		{desc: "case-variant member is unknown, not effects", frame: []byte(`{"jsonrpc":"2.0","id":"evt1","result":{"protocolVersion":"draft","Effects":[]}}`), rc: tb, wantErr: "effects is required"},
		{desc: "allow with a reason is not allow", frame: frame(`{"type":"allow","reason":"x"}`), rc: tb, wantErr: "unknown member"},
		{desc: "empty deny reason", frame: frame(`{"type":"deny","reason":""}`), rc: tb, wantErr: "reason"},
		{desc: "deny code not reverse-DNS", frame: frame(`{"type":"deny","reason":"x","code":"nope"}`), rc: tb, wantErr: "reverse-DNS"},
		{desc: "empty continue instruction", frame: frame(`{"type":"flow","operation":"continue","instruction":""}`), rc: ReplyContext{}, wantErr: "instruction"},
		{desc: "stop with instruction", frame: frame(`{"type":"flow","operation":"stop","reason":"r","instruction":"i"}`), rc: ReplyContext{}, wantErr: "unknown member"},
		{desc: "inject value not messages", frame: frame(`{"type":"inject","target":"context","operation":"append","deliverAt":"now","value":{"a":1}}`), rc: ReplyContext{}, wantErr: "inject"},
		{desc: "inject deliverAt unknown", frame: frame(`{"type":"inject","target":"context","operation":"append","deliverAt":"later","value":[]}`), rc: ReplyContext{}, wantErr: "deliverAt"},
		{desc: "extension effect type", frame: frame(`{"type":"com.example.quarantine"}`), rc: ReplyContext{}, wantErr: "unsupported effect"},
		{desc: "effect not in the event bound", frame: frame(`{"type":"return","value":1}`), rc: ReplyContext{RequestID: "evt1", EventType: "task.change.before"}, wantErr: "not allowed"},
		{desc: "effect not advertised", frame: frame(`{"type":"ask"}`), rc: tbCaps(ahp.Capabilities{Effects: []string{"deny"}}), wantErr: "not advertised"},
		{desc: "modify operation not advertised", frame: frame(`{"type":"modify","target":"input","operation":"replace","value":{}}`),
			rc: tbCaps(ahp.Capabilities{Effects: []string{"modify"}, Modify: map[string]ahp.ModifyOps{"input": {Merge: true}}}), wantErr: "not advertised"},
		{desc: "modify target of another boundary", frame: frame(`{"type":"modify","target":"output","operation":"merge","value":[]}`), rc: tb, wantErr: "not the target"},
		{desc: "flow continue at tool.before", frame: frame(`{"type":"flow","operation":"continue"}`), rc: tb, wantErr: "not allowed"},
		{desc: "text part with size", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":[{"id":"m","role":"assistant","parts":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"body","text":"t","size":1}]}]}`),
			rc: ReplyContext{}, wantErr: "unknown member"},
		{desc: "metadata part leaking text", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":[{"id":"m","role":"assistant","parts":[{"id":"p","kind":"text","mediaType":"text/plain","selection":"metadata","text":"t"}]}]}`),
			rc: ReplyContext{}, wantErr: "unknown member"},
		{desc: "attachment of JSON media", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":[{"id":"m","role":"assistant","parts":[{"id":"p","kind":"attachment","mediaType":"application/vnd.x+json; charset=utf-8","selection":"body","body":{"ref":"r"}}]}]}`),
			rc: ReplyContext{}, wantErr: "not allowed"},
		{desc: "bad sha256", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":[{"id":"m","role":"assistant","parts":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"metadata","sha256":"ABC"}]}]}`),
			rc: ReplyContext{}, wantErr: "sha256"},
		{desc: "negative size", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":[{"id":"m","role":"assistant","parts":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"omit","size":-1}]}]}`),
			rc: ReplyContext{}, wantErr: "size"},
		{desc: "integer-valued size 1.0 counts as integer", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":[{"id":"m","role":"assistant","parts":[{"id":"p","kind":"attachment","mediaType":"image/png","selection":"metadata","size":1.0}]}]}`),
			rc: ReplyContext{}},
		{desc: "unknown role", frame: frame(`{"type":"modify","target":"response","operation":"merge","value":` + msgs("robot", "x") + `}`), rc: ReplyContext{}, wantErr: "role"},
		{desc: "outbound content must be assistant messages", frame: frame(`{"type":"modify","target":"content","operation":"merge","value":` + msgs("user", "x") + `}`),
			rc: ReplyContext{EventType: ahp.EventUserMessageOutbound, Current: map[string]json.RawMessage{"content": json.RawMessage(`[]`)}}, wantErr: "role"},
		{desc: "model result must be assistant messages", frame: frame(`{"type":"return","value":` + msgs("user", "x") + `}`),
			rc: ReplyContext{EventType: ahp.EventModelRequestBefore}, wantErr: "role"},
		{desc: "compaction return must be text parts", frame: frame(`{"type":"return","value":` + msgs("assistant", "x") + `}`),
			rc: ReplyContext{EventType: "context.compact.before"}, wantErr: "return"},
		{desc: "elicitation return with deny conflicts", frame: frame(`{"type":"deny","reason":"no"}`, `{"type":"return","value":{"action":"decline"}}`),
			rc: ReplyContext{EventType: "user.elicitation.request", ElicitationMode: "form"}, wantErr: "conflict"},
		{desc: "elicitation return content only for an accepted form", frame: frame(`{"type":"return","value":{"action":"accept","content":{"a":"b"}}}`),
			rc: ReplyContext{EventType: "user.elicitation.request", ElicitationMode: "url"}, wantErr: "accepted form"},
		{desc: "elicitation return accepted form", frame: frame(`{"type":"return","value":{"action":"accept","content":{"a":"b","n":1,"l":["x"]}}}`),
			rc: ReplyContext{EventType: "user.elicitation.request", ElicitationMode: "form"}},
		{desc: "elicitation control needs the mode advertised", frame: frame(`{"type":"deny","reason":"no"}`),
			rc: ReplyContext{EventType: "user.elicitation.request", ElicitationMode: "form", Capabilities: &ahp.Capabilities{Effects: []string{"deny"}}}, wantErr: "elicitation mode"},
		{desc: "continue with allowance 0 rejected", frame: frame(`{"type":"flow","operation":"continue"}`),
			rc:      ReplyContext{EventType: ahp.EventToolAfter, Capabilities: &ahp.Capabilities{Effects: []string{"flow"}, Flow: &ahp.FlowCaps{Operations: []string{"continue"}, RemainingContinuations: intPtr(0), ContinuationCount: intPtr(2)}}},
			wantErr: "allowance"},
		{desc: "continue with allowance 0 joins an accepted continue", frame: frame(`{"type":"flow","operation":"continue"}`),
			rc: ReplyContext{EventType: ahp.EventToolAfter, State: &ahp.State{Permission: "none", Flow: "continue"}, Capabilities: &ahp.Capabilities{Effects: []string{"flow"}, Flow: &ahp.FlowCaps{Operations: []string{"continue"}, RemainingContinuations: intPtr(0), ContinuationCount: intPtr(2)}}}},
		{desc: "object merge is shallow with literal null", frame: frame(`{"type":"modify","target":"input","operation":"merge","value":{"a":{"y":2},"c":null}}`), rc: tb,
			check: func(t *testing.T, st *Staged) {
				if got := string(st.Values["input"]); got != `{"a":{"y":2},"b":2,"c":null}` || !st.Changed {
					t.Fatalf("input = %s changed=%v", got, st.Changed)
				}
			}},
		{desc: "object merge needs an object current value", frame: frame(`{"type":"modify","target":"input","operation":"merge","value":{"a":1}}`),
			rc: ReplyContext{EventType: ahp.EventToolBefore}, wantErr: "not an object"},
		{desc: "list merge appends duplicates", frame: frame(`{"type":"modify","target":"output","operation":"merge","value":`+msgs("tool", "x")+`}`, `{"type":"modify","target":"output","operation":"merge","value":`+msgs("tool", "x")+`}`),
			rc: ReplyContext{EventType: ahp.EventToolAfter, Current: map[string]json.RawMessage{"output": json.RawMessage(msgs("tool", "x"))}},
			check: func(t *testing.T, st *Staged) {
				var got []ahp.Message
				_ = json.Unmarshal(st.Values["output"], &got)
				if len(got) != 3 || got[0].ID != "n1" || got[2].ID != "n1" {
					t.Fatalf("output = %s", st.Values["output"])
				}
			}},
		{desc: "state: modify drops allow and candidate, then later effects bind", rc: ReplyContext{EventType: ahp.EventToolBefore, Current: tb.Current,
			State: &ahp.State{Permission: "allow", Candidate: &ahp.Candidate{Value: json.RawMessage(`1`)}, Flow: "none"}},
			frame: frame(`{"type":"message","text":"hi"}`, `{"type":"modify","target":"input","operation":"replace","value":{"z":1}}`, `{"type":"inject","target":"context","operation":"append","deliverAt":"now","value":[]}`),
			check: func(t *testing.T, st *Staged) {
				if st.State.Permission != "none" || st.State.Candidate != nil || len(st.State.Injections) != 1 || !slices.Equal(st.Messages, []string{"hi"}) {
					t.Fatalf("state = %+v messages=%q", st.State, st.Messages)
				}
				var types []string
				for _, e := range st.Effects {
					types = append(types, e.Type)
				}
				if !slices.Equal(types, []string{"message", "modify", "inject"}) {
					t.Fatalf("effects = %v", types)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			st, err := ValidateReply(tc.frame, tc.rc)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if tc.check != nil {
					tc.check(t, st)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

// TestValidateReplyDoesNotAliasState: staging never appends into the caller's state slices.
func TestValidateReplyDoesNotAliasState(t *testing.T) {
	ins := make([]string, 1, 4)
	ins[0] = "first"
	prev := &ahp.State{Permission: "none", Flow: "continue", Instructions: ins}
	rc := ReplyContext{EventType: ahp.EventToolAfter, State: prev}
	a, err := ValidateReply(reply("e", `{"type":"flow","operation":"continue","instruction":"a"}`), rc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ValidateReply(reply("e", `{"type":"flow","operation":"continue","instruction":"b"}`), rc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.State.Instructions, []string{"first", "a"}) || !slices.Equal(b.State.Instructions, []string{"first", "b"}) || len(prev.Instructions) != 1 {
		t.Fatalf("a=%q b=%q prev=%q", a.State.Instructions, b.State.Instructions, prev.Instructions)
	}
}

// FuzzValidateReply: no input makes validation panic, and anything accepted stays
// consistent (accepted effects are core effects; a deny always yields permission deny).
func FuzzValidateReply(f *testing.F) {
	f.Add(reply("evt1", `{"type":"deny","reason":"x"}`), ahp.EventToolBefore)
	f.Add(reply("evt1", `{"type":"modify","target":"input","operation":"merge","value":{"a":null}}`), ahp.EventToolBefore)
	f.Add(reply("evt1", `{"type":"modify","target":"request","operation":"merge","value":[{"id":"a","role":"user","parts":[]}]}`), ahp.EventModelRequestBefore)
	f.Add([]byte(`{"jsonrpc":"2.0","id":"evt1","error":{"code":1,"message":"m"}}`), "")
	f.Fuzz(func(t *testing.T, frame []byte, eventType string) {
		rc := ReplyContext{RequestID: "evt1", EventType: eventType, Current: map[string]json.RawMessage{
			"input": json.RawMessage(`{"a":1}`), "request": json.RawMessage(`[]`),
		}}
		st, err := ValidateReply(frame, rc)
		if err != nil {
			return
		}
		for _, e := range st.Effects {
			if e.Type == ahp.EffectDeny && st.State.Permission != ahp.PermissionDeny {
				t.Fatalf("deny accepted but permission %s", st.State.Permission)
			}
		}
	})
}
