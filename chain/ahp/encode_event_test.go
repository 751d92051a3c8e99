package ahp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// refFrame is the reference the encoder must equal: the JSON-RPC request as the transport
// built it with encoding/json before (an Encoder with HTML escaping off, the newline
// trimmed, the id marshalled on its own with json.Marshal).
func refFrame(intercept bool, id string, params any) ([]byte, error) {
	req := ahp.Request{JSONRPC: "2.0", Params: params}
	if intercept {
		rawID, err := json.Marshal(id)
		if err != nil {
			return nil, err
		}
		req.ID = rawID
		req.Method = ahp.MethodIntercept
	} else {
		req.Method = ahp.MethodObserve
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// compareFrames encodes p both ways as a hooks/intercept request (id) and the event as a
// hooks/observe notification, and reports any difference: in the bytes, or in whether
// the value is refused at all.
func compareFrames(t testing.TB, name, id string, p *ahp.InterceptParams) {
	t.Helper()
	want, werr := refFrame(true, id, p)
	got, gerr := ahp.AppendInterceptRequest([]byte("prefix"), id, p)
	check := func(kind string, want, got []byte, werr, gerr error) {
		t.Helper()
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s %s: encoding/json error %v, encoder error %v", name, kind, werr, gerr)
		}
		if werr != nil {
			return
		}
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("%s %s: the encoder did not append to dst", name, kind)
		}
		if got = got[len("prefix"):]; !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s %s differs at byte %d:\nencoding/json: %s\nencoder:       %s", name, kind, i,
				clip(want, i), clip(got, i))
		}
	}
	check("intercept", want, got, werr, gerr)
	var op *ahp.ObserveParams
	if p != nil {
		op = &ahp.ObserveParams{ProtocolVersion: p.ProtocolVersion, Event: p.Event}
	}
	want, werr = refFrame(false, "", op)
	got, gerr = ahp.AppendObserveNotification([]byte("prefix"), op)
	check("observe", want, got, werr, gerr)
	if p != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		werr = enc.Encode(p.Event)
		got, gerr = ahp.AppendEvent([]byte("prefix"), p.Event)
		check("event", bytes.TrimSuffix(buf.Bytes(), []byte("\n")), got, werr, gerr)
	}
}

func clip(b []byte, at int) string {
	lo, hi := max(0, at-60), min(len(b), at+60)
	return fmt.Sprintf("…%q…", b[lo:hi])
}

// fixtureParams returns every event and every hooks/intercept params object of the
// protocol's fixtures, interop vectors, conformance suite and schema examples, each as
// intercept params (an event found alone is wrapped with a capability advertisement and
// a state, so that those members are exercised too). The raw values keep the fixtures'
// own layout, so pretty-printed params and tool inputs exercise the compaction.
func fixtureParams(t *testing.T) map[string]*ahp.InterceptParams {
	root := ahptest.AHPDir(t)
	out := map[string]*ahp.InterceptParams{}
	add := func(where string, node map[string]any) {
		if node["method"] == ahp.MethodIntercept || node["method"] == ahp.MethodObserve {
			if raw, err := json.Marshal(node["params"]); err == nil {
				var p ahp.InterceptParams
				if json.Unmarshal(raw, &p) == nil && p.Event != nil {
					out[where+" params"] = &p
				}
			}
		}
	}
	var walk func(where string, v any, raw json.RawMessage)
	walk = func(where string, v any, raw json.RawMessage) {
		switch n := v.(type) {
		case map[string]any:
			add(where, n)
			var members map[string]json.RawMessage
			_ = json.Unmarshal(raw, &members)
			for k, c := range n {
				if k == "event" {
					var ev ahp.Event
					if _, ok := c.(map[string]any); ok && json.Unmarshal(members[k], &ev) == nil {
						out[where+"/event"] = fullParams(&ev)
					}
				}
				walk(where+"/"+k, c, members[k])
			}
		case []any:
			var elems []json.RawMessage
			_ = json.Unmarshal(raw, &elems)
			for i, c := range n {
				if i < len(elems) {
					walk(fmt.Sprintf("%s[%d]", where, i), c, elems[i])
				}
			}
		}
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl")) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		docs := [][]byte{data}
		if strings.HasSuffix(p, ".jsonl") {
			docs = nil
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(nil, 1<<24)
			for sc.Scan() {
				docs = append(docs, append([]byte(nil), sc.Bytes()...))
			}
		}
		for i, doc := range docs {
			var v any
			if json.Unmarshal(doc, &v) == nil {
				walk(fmt.Sprintf("%s#%d", rel, i), v, doc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fullParams wraps an event with every member of the params populated.
func fullParams(ev *ahp.Event) *ahp.InterceptParams {
	one := 1
	msg := "Checked by policy <a&b>."
	return &ahp.InterceptParams{
		ProtocolVersion: ahp.ProtocolVersion,
		Event:           ev,
		Capabilities: &ahp.Capabilities{
			Effects: []string{"deny", "modify", "inject", "flow"},
			Modify:  map[string]ahp.ModifyOps{"request": {Replace: true}, "input": {Merge: true}},
			Flow:    &ahp.FlowCaps{Operations: []string{"stop"}, RemainingContinuations: &one},
			Inject:  &ahp.InjectCaps{Context: ahp.InjectContextCaps{Append: true, DeliverAt: []string{"now"}}},
		},
		State: &ahp.State{Permission: ahp.PermissionAllow, Flow: ahp.FlowNone, Instructions: []string{"be brief"},
			Injections: []ahp.Effect{{Type: ahp.EffectInject, Target: "context", Operation: ahp.OpAppend,
				Value: json.RawMessage(` { "text" : "x" } `), Text: &msg}}},
		Extensions: map[string]json.RawMessage{ahp.ExtRedactText: json.RawMessage(`{"target": "request"}`), "a.b": nil},
	}
}

// TestEncoderMatchesEncodingJSON: every event of the protocol's own material encodes to
// the bytes encoding/json gives, in both frames.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	all := fixtureParams(t)
	events, withItems, withTool := 0, 0, 0
	for name, p := range all {
		compareFrames(t, name, "evt_"+name, p)
		events++
		if p.Event.Items != nil {
			withItems++
		}
		if p.Event.Tool != nil {
			withTool++
		}
	}
	t.Logf("%d events compared (%d with items, %d with a tool)", events, withItems, withTool)
	// The material holds the whole catalogue many times over; far fewer means the walk
	// stopped finding events, not that they match.
	if events < 150 || withItems < 20 || withTool < 10 {
		t.Fatalf("only %d events (%d with items, %d with a tool) found in the protocol material", events, withItems, withTool)
	}
}

// TestEncoderEdgeValues covers the values where encoding/json has its own rules, one by
// one, and the values it refuses.
func TestEncoderEdgeValues(t *testing.T) {
	texts := []string{"", "plain", "<a href=\"x\">&amp;</a>", "tab\tnl\ncr\rbs\bff\fnul\x00us\x1f del\x7f",
		"quote\" back\\ slash/", "line\u2028para\u2029", "bad \xff\xfe utf8 \xe2\x80", "\xe2\x80\xa8\xe2\x80",
		"émoji 😀 and 日本語", strings.Repeat("abcdefg\"", 9), strings.Repeat("x", 1000) + "\x01"}
	for i := 0; i < 24; i++ { // a special byte at every offset of a word
		texts = append(texts, strings.Repeat("a", i)+"\n"+strings.Repeat("b", 17-i%17), strings.Repeat("a", i)+"é\u2029")
	}
	floats := []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789.125, 1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64}
	raws := []string{`{}`, ` {"a" : [1, 2 ,{"b":null}] } `, `"s\u00e9"`, "\"\xff\"", `1e5`, `-0`, `[true,false]`, "\t\n 7 \r",
		`{"a":1,"a":2}`, `{"dup" : 1, "dup":2}`, `"\u2028<>&"`, "\"\u2028\"", // duplicates stay; raw strings are not re-escaped
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), // encoding/json's deepest
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001)} // one deeper: refused by both
	for i, s := range texts {
		ev := &ahp.Event{ID: s, Source: s, Type: s, Time: s, Items: []ahp.Message{{ID: s, Role: s,
			Parts: []ahp.Part{{ID: s, Kind: s, MediaType: s, Selection: s, Text: &s}}}}}
		compareFrames(t, fmt.Sprintf("text %d", i), s, fullParams(ev))
	}
	for i, f := range floats {
		ev := &ahp.Event{ID: "e", LatencyMs: &f, DurationMs: &f}
		compareFrames(t, fmt.Sprintf("float %d (%v)", i, f), "e", fullParams(ev))
	}
	for i, r := range raws {
		ev := &ahp.Event{ID: "e", Params: json.RawMessage(r), Native: json.RawMessage(r),
			Tool:       &ahp.Tool{Name: "t", Input: json.RawMessage(r)},
			Extensions: map[string]json.RawMessage{"k\u2028<": json.RawMessage(r), "a": json.RawMessage(r)}}
		compareFrames(t, fmt.Sprintf("raw %d", i), "e", fullParams(ev))
	}
	compareFrames(t, "nil params", "e", nil)
	compareFrames(t, "nil event and capabilities", "e", &ahp.InterceptParams{})
	compareFrames(t, "empty items, parts and lists", "e", &ahp.InterceptParams{Event: &ahp.Event{Items: []ahp.Message{{Parts: []ahp.Part{}}}},
		Capabilities: &ahp.Capabilities{Effects: []string{}, Modify: map[string]ahp.ModifyOps{}, Elicitation: &ahp.ElicitationCaps{URL: &struct{}{}}},
		State:        &ahp.State{Instructions: []string{}, Injections: []ahp.Effect{}}, Extensions: map[string]json.RawMessage{}})

	// Refused by both: the frame carries no half-written value.
	nan, inf := math.NaN(), math.Inf(-1)
	for name, ev := range map[string]*ahp.Event{
		"NaN latency":      {LatencyMs: &nan},
		"infinite":         {DurationMs: &inf},
		"bad params":       {Params: json.RawMessage(`{"a":}`)},
		"two values":       {Native: json.RawMessage(`1 2`)},
		"empty tool input": {Tool: &ahp.Tool{Input: json.RawMessage{}}},
		"empty extension":  {Extensions: map[string]json.RawMessage{"x": {}}},
	} {
		if _, err := ahp.AppendInterceptRequest(nil, "e", &ahp.InterceptParams{Event: ev}); err == nil {
			t.Errorf("%s: encoded without error", name)
		}
		compareFrames(t, name, "e", &ahp.InterceptParams{Event: ev})
	}
}
