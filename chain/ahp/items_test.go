package ahp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The eight part variants of content-item.schema.json, as bare items of a generic slot.
var barePartVariants = []string{
	`{"id":"p1","kind":"text","mediaType":"text/plain","selection":"body","text":"hello","category":"reasoning","synthesized":true}`,
	`{"id":"p2","kind":"text","mediaType":"text/plain","selection":"body","gap":{"reason":"size limit","path":"x"},"size":3,"sha256":"` + strings.Repeat("a", 64) + `"}`,
	`{"id":"p3","kind":"text","mediaType":"text/plain","selection":"metadata","size":5,"sha256":"` + strings.Repeat("b", 64) + `"}`,
	`{"id":"p4","kind":"text","mediaType":"text/plain","selection":"omit"}`,
	`{"id":"p5","kind":"attachment","mediaType":"image/png","selection":"body","body":{"ref":"ref_1"}}`,
	`{"id":"p6","kind":"attachment","mediaType":"image/png","selection":"body","gap":{"reason":"receiver unavailable"}}`,
	`{"id":"p7","kind":"attachment","mediaType":"application/pdf","selection":"metadata","size":0}`,
	`{"id":"p8","kind":"attachment","mediaType":"audio/wav","selection":"omit","category":"audio"}`,
	// An empty text body stays distinguishable from no text.
	`{"id":"p9","kind":"text","mediaType":"text/plain","selection":"body","text":""}`,
}

func toolBeforeWithItems(items string) string {
	return `{"id":"evt_1","source":"urn:x","type":"tool.before","time":"2026-01-01T00:00:00Z","call":{"id":"c1"},` +
		`"path":"native","tool":{"name":"task","input":{"value":"v"},"origin":"native"},"items":` + items + `}`
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestBarePartItemsRoundTrip: a tool.before event whose items are bare parts decodes into
// Event, encodes back to the same JSON, is valid, and exposes each item as a part.
func TestBarePartItemsRoundTrip(t *testing.T) {
	for _, variant := range barePartVariants {
		raw := toolBeforeWithItems("[" + variant + "]")
		var ev Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, out, []byte(raw)) {
			t.Errorf("round trip changed the event:\n got %s\nwant %s", out, raw)
		}
		if err := ValidateEvent(out); err != nil {
			t.Errorf("%s: %v", variant, err)
		}
		p, ok := ev.Items[0].AsPart()
		if !ok {
			t.Fatalf("%s: item is not a part", variant)
		}
		// Through the Part type and back: the same JSON.
		again, _ := json.Marshal(PartItem(p))
		if !jsonEqual(t, again, []byte(variant)) {
			t.Errorf("PartItem(AsPart) = %s, want %s", again, variant)
		}
	}
	// An empty part list stays present as [].
	var ev Event
	if err := json.Unmarshal([]byte(toolBeforeWithItems("[]")), &ev); err != nil {
		t.Fatal(err)
	}
	if out, _ := json.Marshal(&ev); !strings.Contains(string(out), `"items":[]`) {
		t.Errorf("empty items lost: %s", out)
	}
}

// TestMessageItemsEncodingUnchanged: message items encode as before the union (no part
// member appears, an empty part list stays []) and are never reported as parts.
func TestMessageItemsEncodingUnchanged(t *testing.T) {
	msgs := []Message{{ID: "m1", Role: RoleUser, Parts: []Part{TextPart("m1.0", "hi")}}, {ID: "m2", Role: RoleAssistant, Parts: []Part{}}}
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"m1","role":"user","parts":[{"id":"m1.0","kind":"text","mediaType":"text/plain","selection":"body","text":"hi"}]},{"id":"m2","role":"assistant","parts":[]}]`
	if string(b) != want {
		t.Fatalf("messages encode as\n%s\nwant\n%s", b, want)
	}
	var back []Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for i := range back {
		if _, ok := back[i].AsPart(); ok {
			t.Errorf("message %s decoded as a part", back[i].ID)
		}
	}
}

// TestItemsFormFollowsTheSlot: validation holds each event to its slot's form — bare
// parts where items are generic, messages where they are model-visible.
func TestItemsFormFollowsTheSlot(t *testing.T) {
	msg := `{"id":"m1","role":"user","parts":[{"id":"m1.0","kind":"text","mediaType":"text/plain","selection":"body","text":"hi"}]}`
	part := barePartVariants[0]
	toolAfter := func(items string) string {
		return `{"id":"evt_2","source":"urn:x","type":"tool.after","time":"2026-01-01T00:00:00Z","call":{"id":"c1"},"path":"native",` +
			`"tool":{"name":"task","input":{},"origin":"native"},"outcome":"ok","execution":{"status":"executed"},"items":` + items + `}`
	}
	tests := []struct {
		desc  string
		event string
		valid bool
	}{
		{desc: "tool.before with a bare part", event: toolBeforeWithItems("[" + part + "]"), valid: true},
		{desc: "tool.before with a message", event: toolBeforeWithItems("[" + msg + "]"), valid: false},
		{desc: "tool.after with a message", event: toolAfter("[" + msg + "]"), valid: true},
		{desc: "tool.after with a bare part", event: toolAfter("[" + part + "]"), valid: false},
		{desc: "tool.before with a text part that carries both text and gap", valid: false,
			event: toolBeforeWithItems(`[{"id":"p","kind":"text","mediaType":"text/plain","selection":"body","text":"x","gap":{"reason":"r"}}]`)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// Through the Go type, as the chain sends it.
			var ev Event
			if err := json.Unmarshal([]byte(tc.event), &ev); err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(&ev)
			err := ValidateEvent(out)
			if (err == nil) != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", err == nil, tc.valid, err)
			}
		})
	}
}

// TestBarePartItemsCloneShareNothing: a clone of a part-list event is equal and shares no
// pointer with the original.
func TestBarePartItemsCloneShareNothing(t *testing.T) {
	items := "[" + strings.Join(barePartVariants, ",") + "]"
	var orig Event
	if err := json.Unmarshal([]byte(toolBeforeWithItems(items)), &orig); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(&orig)
	c := orig.Clone()
	after, _ := json.Marshal(c)
	if string(before) != string(after) {
		t.Fatalf("clone differs:\n%s\n%s", before, after)
	}
	if path := shared(reflect.ValueOf(&orig).Elem(), reflect.ValueOf(c).Elem(), "Event"); path != "" {
		t.Fatalf("clone shares %s with the original", path)
	}
	*c.Items[0].Text = "changed"
	*c.Items[2].Size = 99
	c.Items[4].Body.Ref = "other"
	if now, _ := json.Marshal(&orig); string(now) != string(before) {
		t.Fatalf("original changed through the clone:\n%s", now)
	}
}
