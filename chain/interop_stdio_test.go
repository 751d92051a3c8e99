package chain

// The stdio-framing scenarios of the lifecycle suite: a persistent stdio backend writes
// unsolicited frames (an old request's reply, an unknown id) before the live reply. The
// harness must ignore them and settle each request from its own reply (stdio binding,
// AHP-STDIO-001). They run through the real chain with a real persistent child process.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// interopFramingArg makes the test binary the framing scenarios' persistent stdio
// backend: <exe> interopFramingArg SCENARIO_FILE SCENARIO_ID EMITTED_FILE.
const interopFramingArg = "hookproxy-chain-interop-framing"

// framingStep is one step of a lifecycle scenario.
type framingStep struct {
	Op       string          `json:"op"`
	Key      string          `json:"key"`
	Response json.RawMessage `json:"response"`
}

func hasOp(sc *interopScenario, op string) bool {
	for _, s := range sc.Steps {
		if s.Op == op {
			return true
		}
	}
	return false
}

func onlyOps(sc *interopScenario, ops ...string) bool {
	for _, s := range sc.Steps {
		if !slices.Contains(ops, s.Op) {
			return false
		}
	}
	return true
}

// framingPlan returns, per request key, the frames the backend writes before that
// request's live reply: the emit steps between "wait key" and "release key".
func framingPlan(steps []framingStep) map[string][]json.RawMessage {
	plan := map[string][]json.RawMessage{}
	waiting := ""
	for _, st := range steps {
		switch st.Op {
		case "wait":
			waiting = st.Key
		case "emit":
			plan[waiting] = append(plan[waiting], st.Response)
		case "release":
			waiting = ""
		}
	}
	return plan
}

func runStdioFramingScenario(t *testing.T, file string, sc *interopScenario) interopVerdict {
	var steps []framingStep
	if err := json.Unmarshal(sc.rawSteps, &steps); err != nil {
		return interopVerdict{"failed", "steps: " + err.Error()}
	}
	exe, err := os.Executable()
	if err != nil {
		return interopVerdict{"failed", err.Error()}
	}
	emitted := filepath.Join(t.TempDir(), "emitted.jsonl")
	doc := docOf(registration.Backend{ID: scenarioBackendID,
		Transport: registration.Transport{Type: registration.TransportStdio, Command: exe,
			Args: []string{interopFramingArg, file, sc.ID, emitted}, Lifecycle: registration.LifecyclePersistent},
		Subscriptions: []registration.Subscription{icpt(registration.FailClosed, 10000, ahp.EventToolBefore)}})
	c, err := New(doc, Options{Source: "urn:hookproxy:interop", ObserveTimeout: testObserveTimeout})
	if err != nil {
		return interopVerdict{"failed", "chain: " + err.Error()}
	}
	defer c.Close()

	got := map[string]any{"published": []string{}, "cancelled": []string{}, "observations": []string{}, "uploadStatuses": []string{}}
	states := map[string]any{}
	for _, st := range steps {
		if st.Op != "send" {
			continue
		}
		var req interopRequest
		if err := json.Unmarshal(sc.Requests[st.Key], &req); err != nil {
			return interopVerdict{"failed", "request " + st.Key + ": " + err.Error()}
		}
		var ev ahp.Event
		var caps ahp.Capabilities
		if json.Unmarshal(req.Params.Event, &ev) != nil || json.Unmarshal(req.Params.Capabilities, &caps) != nil {
			return interopVerdict{"failed", "request " + st.Key + ": event or capabilities"}
		}
		s := c.Intercept(context.Background(), &ev, caps)
		s.Wait()
		if len(s.Records) != 1 || s.Records[0].Outcome != OutcomeAccepted {
			return interopVerdict{"failed", fmt.Sprintf("request %s: records %+v", st.Key, s.Records)}
		}
		got["published"] = append(got["published"].([]string), ev.ID)
		res := applicationResult(s, &ev, &caps)
		delete(res, "injections")
		delete(res, "continuationInstructions")
		states[ev.ID] = res
	}
	got["states"] = states
	// The frames the child really wrote before a live reply were ignored by the chain:
	// each state above is the live reply's.
	var ignored []string
	data, _ := os.ReadFile(emitted)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m struct {
			ID string `json:"id"`
		}
		if line != "" && json.Unmarshal([]byte(line), &m) == nil {
			ignored = append(ignored, "unsolicited:"+m.ID)
		}
	}
	got["ignored"] = ignored

	var diffs []string
	keys := make([]string, 0, len(sc.Expected))
	for k := range sc.Expected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var want any
		if err := json.Unmarshal(sc.Expected[k], &want); err != nil {
			return interopVerdict{"failed", "expected." + k + ": " + err.Error()}
		}
		if !reflect.DeepEqual(normalize(got[k]), normalize(want)) {
			hb, _ := json.Marshal(got[k])
			diffs = append(diffs, fmt.Sprintf("%s = %s, want %s", k, hb, sc.Expected[k]))
		}
	}
	if len(diffs) > 0 {
		return interopVerdict{"failed", strings.Join(diffs, "; ")}
	}
	return interopVerdict{status: "passed"}
}

// runInteropFraming is the persistent stdio backend of a framing scenario: before the
// live reply to a request it writes that request's planned unsolicited frames (and
// records them), then the reply. stdout carries only AHP frames (AHP-STDIO-001).
func runInteropFraming(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: SCENARIO_FILE SCENARIO_ID EMITTED_FILE")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var sf interopFile
	if err := json.Unmarshal(data, &sf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var sc *interopScenario
	for i := range sf.Scenarios {
		if sf.Scenarios[i].ID == args[1] {
			sc = &sf.Scenarios[i]
		}
	}
	if sc == nil {
		fmt.Fprintln(os.Stderr, "no scenario", args[1])
		return 2
	}
	var steps []framingStep
	if err := json.Unmarshal(sc.rawSteps, &steps); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	plan := framingPlan(steps)
	keyOf := map[string]string{} // request id -> key
	for k, raw := range sc.Requests {
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &r)
		keyOf[r.ID] = k
	}
	rec, err := os.OpenFile(args[2], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rec.Close()
	out := bufio.NewWriter(os.Stdout)
	write := func(raw json.RawMessage) error {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := out.Write(b.Bytes())
		return err
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var m struct {
				ID     *string `json:"id"`
				Method string  `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method == ahp.MethodIntercept {
				key, ok := keyOf[*m.ID]
				if !ok {
					fmt.Fprintf(os.Stderr, "unexpected request %q\n", *m.ID)
					return 2
				}
				for _, f := range plan[key] {
					if werr := write(f); werr != nil {
						return 2
					}
					var b bytes.Buffer
					_ = json.Compact(&b, f)
					b.WriteByte('\n')
					_, _ = rec.Write(b.Bytes())
				}
				if werr := write(sc.Responses[key]); werr != nil {
					return 2
				}
				if out.Flush() != nil {
					return 2
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			return 2
		}
	}
}
