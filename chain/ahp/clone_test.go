package ahp

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fullEvent sets every member of Event that can hold a pointer, slice, map or raw JSON.
func fullEvent() *Event {
	i := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	n := 2
	text := "hello"
	size := int64(5)
	return &Event{
		ID: "evt_1", Source: "urn:x", Type: EventToolBefore, Time: "2026-01-01T00:00:00Z",
		Session: &Session{ID: "s"}, Turn: &Turn{ID: "t"}, ParentEventID: "p",
		Model: &Model{ID: "m", Provider: "openai"}, Attempt: &Attempt{ID: "a", Number: 1},
		Params:    json.RawMessage(`{"max_tokens":5}`),
		Execution: &Execution{Status: ExecutionExecuted},
		Usage: &Usage{Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider",
			InputTokens: i(1), OutputTokens: i(2), CacheReadTokens: i(3), CacheWriteTokens: i(4)},
		LatencyMs:         f(1.5),
		Error:             &ErrorInfo{Message: "x", Class: "c", Status: json.RawMessage(`500`)},
		ContinuationCount: &n, LastAssistantItem: &ItemRef{ID: "i"},
		Call: &Call{ID: "c"},
		Tool: &Tool{Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`), Origin: OriginMCP,
			MCP: &MCPTool{Server: MCPServer{ID: "srv"}, ToolName: "Bash", Provenance: "runtime",
				Connection: MCPConnection{Transport: "stdio", Args: []string{"-x"}, Gaps: []Gap{{Path: "url", Reason: "r"}}}}},
		Batch:      &Batch{ID: "b", CallIDs: []string{"c"}},
		DurationMs: f(2),
		Failure:    &Failure{BackendID: "x.y", Reason: "timeout", Policy: "fail-open"},
		Items: []Message{{ID: "m1", Role: RoleUser, Parts: []Part{
			{ID: "p1", Kind: KindText, MediaType: MediaTypeText, Selection: SelectionBody, Text: &text},
			{ID: "p2", Kind: KindAttachment, MediaType: "image/png", Selection: SelectionBody, Body: &Ref{Ref: "r"}},
			{ID: "p3", Kind: KindAttachment, MediaType: "image/png", Selection: SelectionMetadata, Size: &size},
			{ID: "p4", Kind: KindAttachment, MediaType: "image/png", Selection: SelectionBody, Gap: &Gap{Reason: "r"}},
		}}, {ID: "m2", Role: RoleAssistant}, {ID: "m3", Role: RoleAssistant, Parts: []Part{}},
			{ID: "m4", Role: RoleTool, Parts: []Part{{ID: "p5", Kind: KindText, MediaType: MediaTypeText, Selection: SelectionBody, Text: &text}}}},
		Gaps:       []Gap{{Path: "items", Reason: "r"}},
		Native:     json.RawMessage(`{"n":1}`),
		Extensions: map[string]json.RawMessage{"org.w3c.trace_context": json.RawMessage(`{"traceparent":"x"}`)},
	}
}

func TestEventCloneIsEqualAndShareNothing(t *testing.T) {
	orig := fullEvent()
	before, _ := json.Marshal(orig)
	c := orig.Clone()
	after, _ := json.Marshal(c)
	if string(before) != string(after) {
		t.Fatalf("clone differs:\n%s\n%s", before, after)
	}
	// Walk both values: no pointer, slice backing array or map may be shared. A member
	// added to Event later without a deep copy in Clone makes this test fail.
	if path := shared(reflect.ValueOf(orig).Elem(), reflect.ValueOf(c).Elem(), "Event"); path != "" {
		t.Fatalf("clone shares %s with the original", path)
	}
	if c.Items[1].Parts != nil || c.Items[2].Parts == nil {
		t.Fatalf("nil and empty part lists must stay as they were: %#v, %#v", c.Items[1].Parts, c.Items[2].Parts)
	}
	// Mutating the clone leaves the original as it was.
	*c.Items[3].Parts[0].Text = "changed too"
	c.Items[0].Parts = append(c.Items[0].Parts, Part{ID: "extra"})
	*c.Items[0].Parts[0].Text = "changed"
	c.Tool.Input[2] = 'X'
	c.Extensions["org.w3c.trace_context"][2] = 'X'
	if now, _ := json.Marshal(orig); string(now) != string(before) {
		t.Fatalf("original changed through the clone:\n%s", now)
	}
}

func TestCapabilitiesAndStateClone(t *testing.T) {
	rem, cnt := 1, 0
	text := "m"
	caps := &Capabilities{Effects: []string{"deny", "modify", "flow", "inject"},
		Modify: map[string]ModifyOps{"input": {Replace: true, Merge: true}},
		Flow:   &FlowCaps{Operations: []string{"stop", "continue"}, RemainingContinuations: &rem, ContinuationCount: &cnt},
		Inject: &InjectCaps{Context: InjectContextCaps{Append: true, DeliverAt: []string{"now"}}},
	}
	st := &State{Permission: PermissionAllow, Candidate: &Candidate{Value: json.RawMessage(`{"a":1}`)},
		Instructions: []string{"go"}, Injections: []Effect{{Type: EffectInject, Text: &text, Value: json.RawMessage(`[]`)}}}
	for _, tc := range []struct {
		desc string
		a, b any
	}{
		{"capabilities", caps, caps.Clone()},
		{"state", st, st.Clone()},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ja, _ := json.Marshal(tc.a)
			jb, _ := json.Marshal(tc.b)
			if string(ja) != string(jb) {
				t.Fatalf("clone differs:\n%s\n%s", ja, jb)
			}
			if path := shared(reflect.ValueOf(tc.a).Elem(), reflect.ValueOf(tc.b).Elem(), tc.desc); path != "" {
				t.Fatalf("clone shares %s", path)
			}
		})
	}
}

// shared returns the path of the first pointer, non-empty slice or map that a and b share.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := 0; i < a.Len() && i < b.Len(); i++ {
			if p := shared(a.Index(i), b.Index(i), path+"[]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if p := shared(a.MapIndex(k), b.MapIndex(k), path+"{}"); p != "" {
				return p
			}
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}

// A translator's private copy of the items (CloneMessages) must not change when a caller
// edits the items it was handed, in place or by appending.
func TestCloneMessagesIsDeepAndCapped(t *testing.T) {
	size := int64(5)
	in := []Message{
		{ID: "a", Role: RoleUser, Parts: []Part{TextPart("a.p0", "x"),
			{ID: "a.p1", Kind: KindAttachment, Size: &size, SHA256: "s", Body: &Ref{Ref: "r"}}}},
		{ID: "b", Role: RoleAssistant, Parts: []Part{}},
		{ID: "c", Role: RoleUser},
		{ID: "d", Role: RoleTool, Parts: []Part{{ID: "d.p0", Gap: &Gap{Reason: "g"}}, TextPart("d.p1", "y")}},
	}
	out := CloneMessages(in)
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("clone differs: %+v", out)
	}
	for i := range in {
		if cap(out[i].Parts) != len(out[i].Parts) {
			t.Fatalf("message %d: part list not capped", i)
		}
		for j := range in[i].Parts {
			p := &in[i].Parts[j]
			if p.Text != nil {
				*p.Text += "!"
			}
			if p.Size != nil {
				*p.Size++
			}
			if p.Body != nil {
				p.Body.Ref += "!"
			}
			if p.Gap != nil {
				p.Gap.Reason += "!"
			}
			p.ID += "!"
		}
	}
	_ = append(out[0].Parts, TextPart("new", "n")) // must not overwrite out[3].Parts[0], next in the array
	a, b := &out[0].Parts, &out[3].Parts
	if (*a)[0].ID != "a.p0" || *(*a)[0].Text != "x" || (*a)[1].ID != "a.p1" || *(*a)[1].Size != 5 ||
		(*a)[1].Body.Ref != "r" || (*b)[0].ID != "d.p0" || (*b)[0].Gap.Reason != "g" || *(*b)[1].Text != "y" {
		t.Fatalf("edits to the original reached the clone: %+v %+v", *a, *b)
	}
}
