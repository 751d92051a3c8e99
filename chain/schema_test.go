package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// wireRecorder is a backend that keeps the exact JSON-RPC frames a remote backend would
// receive, encoded the way the transports encode them.
type wireRecorder struct {
	*fakeTransport
	mu     sync.Mutex
	frames [][]byte
	kinds  []string // "intercept" | "observe"
}

func (w *wireRecorder) Intercept(ctx context.Context, id string, p *ahp.InterceptParams) ([]byte, error) {
	rawID, _ := json.Marshal(id)
	w.keep("intercept", ahp.Request{JSONRPC: "2.0", ID: rawID, Method: ahp.MethodIntercept, Params: p})
	return w.fakeTransport.Intercept(ctx, id, p)
}

func (w *wireRecorder) Observe(ctx context.Context, p *ahp.ObserveParams) error {
	w.keep("observe", ahp.Request{JSONRPC: "2.0", Method: ahp.MethodObserve, Params: p})
	return w.fakeTransport.Observe(ctx, p)
}

func (w *wireRecorder) keep(kind string, req ahp.Request) {
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	w.frames = append(w.frames, b)
	w.kinds = append(w.kinds, kind)
	w.mu.Unlock()
}

// loadSchemas compiles the draft request and notification schemas from the shared
// directory (the schemas $ref each other by relative URL against their $id).
func loadSchemas(t *testing.T) (intercept, observe *jsonschema.Schema) {
	t.Helper()
	dir := filepath.Join(sharedAHP, "schema/draft")
	files, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Skipf("shared schemas not available: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	ids := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			t.Fatalf("%s has no $id", f)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ids[filepath.Base(f)] = id
	}
	intercept, err = c.Compile(ids["intercept-request.schema.json"])
	if err != nil {
		t.Fatal(err)
	}
	observe, err = c.Compile(ids["observe-notification.schema.json"])
	if err != nil {
		t.Fatal(err)
	}
	return intercept, observe
}

// TestRequestsValidateAgainstSchemas: every hooks/intercept request and hooks/observe
// notification the engine builds — projected views, narrowed capabilities, accumulated
// state, downgrades and hook.failure — validates against the draft schemas.
func TestRequestsValidateAgainstSchemas(t *testing.T) {
	icpSchema, obsSchema := loadSchemas(t)

	msgs := `[{"id":"inj1","role":"system","parts":[{"id":"inj1.p","kind":"text","mediaType":"text/plain","selection":"body","text":"Never force-push."}]}]`
	rec := func(effects ...string) *wireRecorder {
		return &wireRecorder{fakeTransport: &fakeTransport{onIntercept: respond(effects...)}}
	}
	failing := &wireRecorder{fakeTransport: &fakeTransport{onIntercept: func(context.Context, int, string, *ahp.InterceptParams) ([]byte, error) {
		return nil, &transport.Error{Kind: transport.KindTimeout, Err: context.DeadlineExceeded}
	}}}
	backends := map[string]*wireRecorder{
		"com.a":     rec(`{"type":"modify","target":"input","operation":"merge","value":{"timeout":30}}`, `{"type":"allow"}`, `{"type":"return","value":{"ok":true}}`),
		"com.b":     rec(`{"type":"inject","target":"context","operation":"append","deliverAt":"next_turn","value":`+msgs+`}`, `{"type":"message","text":"noted"}`),
		"com.f":     failing,
		"com.c":     rec(`{"type":"flow","operation":"continue","instruction":"Run the tests."}`),
		"com.d":     rec(`{"type":"deny","reason":"blocked"}`),
		"com.e":     rec(),
		"com.audit": rec(),
	}
	meta := map[string]string{"default": "metadata", "text": "body"}
	doc := docOf(
		fakeBackend("com.a", icpt("fail-open", 1000, "tool.*", "model.*", "turn.*")),
		fakeBackend("com.b", withContent(icpt("fail-open", 1000, "*"), meta)),
		fakeBackend("com.f", icpt("fail-open", 1000, "*")),
		fakeBackend("com.c", icpt("fail-open", 1000, "tool.after", "turn.finish.before")),
		fakeBackend("com.d", icpt("fail-open", 1000, "tool.before", "model.request.before")),
		fakeBackend("com.e", withContent(icpt("fail-closed", 1000, "*"), map[string]string{"default": "omit"})),
		fakeBackend("com.audit", withContent(obsv("*"), map[string]string{"default": "metadata", "reasoning": "omit"})),
	)
	orig := newTransport
	newTransport = func(b registration.Backend, _ Options) (transport.Transport, error) { return backends[b.ID], nil }
	c, err := New(doc, Options{ObserveTimeout: testObserveTimeout})
	newTransport = orig
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	mixed := mixedRequest()
	mixed.Native = json.RawMessage(`{"raw":true}`)
	for _, ev := range []*ahp.Event{toolBefore("evt_s1"), mixed, toolAfter("evt_s3"), turnFinish("evt_s4", 1)} {
		st := c.Intercept(ctx, ev, hostCaps(ev.Type, 1))
		st.Wait()
	}
	c.Observe(ctx, turnEnd("evt_s5"))

	n := map[string]int{}
	for name, r := range backends {
		for i, frame := range r.frames {
			var v any
			if err := json.Unmarshal(frame, &v); err != nil {
				t.Fatal(err)
			}
			sch := icpSchema
			if r.kinds[i] == "observe" {
				sch = obsSchema
			}
			n[r.kinds[i]]++
			if strings.Contains(string(frame), `"type":"hook.failure"`) {
				n["hook.failure"]++
			}
			if strings.Contains(string(frame), `"state":`) {
				n["with state"]++
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s %s frame does not validate:\n%s\n%v", name, r.kinds[i], frame, err)
			}
		}
	}
	// Make sure the scenario really produced every kind of message.
	for _, k := range []string{"intercept", "observe", "hook.failure", "with state"} {
		if n[k] == 0 {
			t.Errorf("no %s message was produced", k)
		}
	}
	t.Logf("validated %v", n)

	// The schemas really are enforced, formats included: a compact timestamp and an
	// over-wide advertisement are rejected.
	var req map[string]any
	if err := json.Unmarshal(backends["com.a"].frames[0], &req); err != nil {
		t.Fatal(err)
	}
	params := req["params"].(map[string]any)
	params["event"].(map[string]any)["time"] = "20260915T120000Z"
	if icpSchema.Validate(req) == nil {
		t.Errorf("format assertions are off: compact date-time accepted")
	}
	params["event"].(map[string]any)["time"] = "2026-09-15T12:00:00Z"
	params["capabilities"] = map[string]any{"effects": []any{"flow"}, "flow": map[string]any{"operations": []any{"continue"}, "remainingContinuations": 1, "continuationCount": 0}}
	if icpSchema.Validate(req) == nil {
		t.Errorf("per-event capability bound not enforced: continue at tool.before accepted")
	}
}
