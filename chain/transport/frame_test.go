package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// jsonFrame is how the frames were built before the event encoder: encoding/json with
// HTML escaping off, the newline trimmed. Backends and retries saw these bytes.
func jsonFrame(t testing.TB, req ahp.Request) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// frameEvent is a model.request.before event of about 32 KiB: 64 messages of ~370 bytes
// of text, with a tool call and the escapes agent text is full of.
func frameEvent() *ahp.Event {
	var items []ahp.Message
	roles := []string{ahp.RoleUser, ahp.RoleAssistant}
	for i := range 64 {
		text := fmt.Sprintf("message %d: %s\n\t\"quoted\" <tag> & é", i, strings.Repeat("lorem ipsum dolor sit amet, ", 12))
		items = append(items, ahp.Message{ID: fmt.Sprintf("m%02d", i), Role: roles[i%2],
			Parts: []ahp.Part{ahp.TextPart(fmt.Sprintf("m%02d.p0", i), text)}})
	}
	latency := 12.5
	return &ahp.Event{ID: "evt_frame", Source: "hookproxy", Type: ahp.EventModelRequestBefore, Time: "2026-09-15T12:00:00Z",
		Session: &ahp.Session{ID: "sess_1"}, Model: &ahp.Model{ID: "claude-test", Provider: "anthropic"},
		Attempt: &ahp.Attempt{ID: "evt_frame.a1", Number: 1}, LatencyMs: &latency,
		Params: json.RawMessage(`{"max_tokens": 16, "tools": [{"name": "Bash"}]}`), Items: items}
}

func frameParams() *ahp.InterceptParams {
	return &ahp.InterceptParams{ProtocolVersion: ahp.ProtocolVersion, Event: frameEvent(),
		Capabilities: &ahp.Capabilities{Effects: []string{ahp.EffectDeny, ahp.EffectModify},
			Modify: map[string]ahp.ModifyOps{ahp.TargetRequest: {Replace: true}}},
		State: &ahp.State{Permission: ahp.PermissionAllow}}
}

// TestFramesAreWhatEncodingJSONSent: the frames a backend receives are the bytes the
// encoding/json frames were, for an intercept (whose id is marshalled with HTML escaping,
// as before) and for an observation; and a frame stays intact after later frames are
// encoded (the encoding buffer is reused, the frame handed to the transport is not).
func TestFramesAreWhatEncodingJSONSent(t *testing.T) {
	p := frameParams()
	for _, id := range []string{"evt_frame", "evt_<&>\u2028"} {
		rawID, _ := json.Marshal(id)
		want := jsonFrame(t, ahp.Request{JSONRPC: "2.0", ID: rawID, Method: ahp.MethodIntercept, Params: p})
		got, err := interceptFrame(id, p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("intercept frame for id %q differs from encoding/json's:\n%s\n%s", id, got, want)
		}
	}
	op := &ahp.ObserveParams{ProtocolVersion: ahp.ProtocolVersion, Event: p.Event}
	want := jsonFrame(t, ahp.Request{JSONRPC: "2.0", Method: ahp.MethodObserve, Params: op})
	first, err := observeFrame(op)
	if err != nil || !bytes.Equal(first, want) {
		t.Fatalf("observe frame differs from encoding/json's (err %v)", err)
	}
	kept := bytes.Clone(first)
	for range 4 {
		if _, err := interceptFrame("evt_other", &ahp.InterceptParams{Event: &ahp.Event{ID: strings.Repeat("x", 40000)}}); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(first, kept) {
		t.Fatal("an earlier frame was overwritten by a later encoding")
	}
}

// TestFrameRefusesWhatEncodingJSONRefuses: a value encoding/json cannot encode is a
// malformed-request failure, as it was, and the frame is not sent.
func TestFrameRefusesWhatEncodingJSONRefuses(t *testing.T) {
	nan := math.NaN()
	for name, ev := range map[string]*ahp.Event{
		"NaN latency": {ID: "e", LatencyMs: &nan},
		"bad params":  {ID: "e", Params: json.RawMessage(`{"max_tokens":}`)},
	} {
		frame, err := interceptFrame("e", &ahp.InterceptParams{Event: ev})
		var te *Error
		if !errors.As(err, &te) || te.Kind != KindMalformed || frame != nil {
			t.Errorf("%s: frame %q, error %v; want a malformed-request failure", name, frame, err)
		}
		if _, err := observeFrame(&ahp.ObserveParams{Event: ev}); !errors.As(err, &te) || te.Kind != KindMalformed {
			t.Errorf("%s: observation error %v; want a malformed-request failure", name, err)
		}
		// Control: encoding/json refuses the same value.
		if _, err := json.Marshal(ev); err == nil {
			t.Errorf("%s: encoding/json encodes it", name)
		}
	}
}

// toolParams is a Claude-Code-shaped params member: 32 tool definitions, about 35 KiB.
func toolParams() json.RawMessage {
	var tools []map[string]any
	for i := range 32 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("Tool%d", i),
			"description": strings.Repeat("Runs the given command in a sandbox.\n- Use it \"carefully\". ", 16),
			"input_schema": map[string]any{"type": "object", "required": []string{"command"},
				"properties": map[string]any{"command": map[string]any{"type": "string", "description": "The command"},
					"timeout": map[string]any{"type": "number"}}}})
	}
	raw, _ := json.Marshal(map[string]any{"max_tokens": 32000, "tools": tools, "stream": true})
	return raw
}

// BenchmarkInterceptFrame compares the frame encoding with encoding/json's (the way frames
// were built before): a 32 KiB conversation, and the same with 35 KiB of tool definitions
// in params (a raw value, validated and copied).
func BenchmarkInterceptFrame(b *testing.B) {
	withTools := frameParams()
	withTools.Event.Params = toolParams()
	for _, c := range []struct {
		name string
		p    *ahp.InterceptParams
	}{{"conversation", frameParams()}, {"conversation+tools", withTools}} {
		p := c.p
		rawID, _ := json.Marshal(p.Event.ID)
		size := len(jsonFrame(b, ahp.Request{JSONRPC: "2.0", ID: rawID, Method: ahp.MethodIntercept, Params: p}))
		b.Run(c.name+"/encoding_json", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				rawID, _ := json.Marshal(p.Event.ID)
				if err := enc.Encode(ahp.Request{JSONRPC: "2.0", ID: rawID, Method: ahp.MethodIntercept, Params: p}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/encoder", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := interceptFrame(p.Event.ID, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFramesEncodedConcurrently: deliveries to several backends encode at once through
// the shared encoding buffers; each frame is still its own event's bytes.
func TestFramesEncodedConcurrently(t *testing.T) {
	const workers = 8
	errs := make(chan error, workers)
	for w := range workers {
		p := frameParams()
		p.Event.ID = fmt.Sprintf("evt_worker_%d", w)
		p.Event.Items = p.Event.Items[:8*(w+1)]
		rawID, _ := json.Marshal(p.Event.ID)
		want := jsonFrame(t, ahp.Request{JSONRPC: "2.0", ID: rawID, Method: ahp.MethodIntercept, Params: p})
		go func() {
			for range 50 {
				got, err := interceptFrame(p.Event.ID, p)
				if err != nil || !bytes.Equal(got, want) {
					errs <- fmt.Errorf("worker %d: frame differs from its event's (err %v)", w, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestResponseFrameIsWhatEncodingJSONWrites: the in-process result frame is the bytes
// json.Marshal of the JSON-RPC response wrote, for ids and results with characters
// encoding/json escapes (HTML, line separators) and with extensions.
func TestResponseFrameIsWhatEncodingJSONWrites(t *testing.T) {
	results := []*ahp.InterceptResult{
		{ProtocolVersion: ahp.ProtocolVersion},
		{ProtocolVersion: ahp.ProtocolVersion, Effects: []ahp.Effect{}}, // no opinion: written without reflection
		{ProtocolVersion: "v<1>", Effects: []ahp.Effect{}},
		{Effects: []ahp.Effect{}, Extensions: map[string]json.RawMessage{}},
		{ProtocolVersion: ahp.ProtocolVersion, Effects: []ahp.Effect{{Type: ahp.EffectDeny, Reason: "no <rm> & \u2028 é", Code: "x.y"}},
			Extensions: map[string]json.RawMessage{"b.ext": json.RawMessage(`{"a": "<b>" }`), "a.ext": json.RawMessage(`[1, 2]`)}},
	}
	for _, id := range []string{"evt_1", "evt_<&>\u2028", "evt_\"q\\", "evt_\x7f", "evt_<", "evt_>", "evt_&"} {
		for _, r := range results {
			rawID, _ := json.Marshal(id)
			rawResult, _ := json.Marshal(r)
			want, _ := json.Marshal(ahp.Response{JSONRPC: "2.0", ID: rawID, Result: rawResult})
			got, err := responseFrame(id, r)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("id %q: frame\n%s\nwant\n%s (err %v)", id, got, want, err)
			}
		}
	}
	if _, ok := emptyResultFrame("evt_1", results[1]); !ok {
		t.Fatal("a result without effects was not written by the shortcut") // what the loop above checked
	}
}
