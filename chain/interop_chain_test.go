package chain

// The observation-chain scenarios (observation-chain-scenarios.json, repeated in the
// lifecycle suite): one tool.before boundary through a chain of several subscriptions on
// several backends — interceptors in registration order, an explicit observer on the
// backend that also intercepts — answered by a sequence of replies (the n-th
// hooks/intercept any backend receives gets the n-th). The scenario states which
// subscriptions were called, which failed, which received hooks/observe, the settled
// tool input, and (chainProof) every frame each of them must have received, projected
// through its own content selection. They run through the real chain over loopback HTTP
// backends and over stdio backends that are real child processes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// interopChainArg makes the test binary one stdio backend of a chain scenario:
// <exe> interopChainArg SEQUENCE_FILE COUNTER_FILE RECEIPTS_FILE HOLD.
const interopChainArg = "hookproxy-chain-interop-chain"

type chainSubscription struct {
	ID            string `json:"id"`
	Backend       string `json:"backend"`
	Mode          string `json:"mode"`
	FailurePolicy string `json:"failurePolicy"`
	Content       string `json:"content"`
}

type chainSpec struct {
	Subscriptions []chainSubscription `json:"subscriptions"`
	Interrupt     bool                `json:"interrupt"`
	HoldObservers bool                `json:"holdObservers"`
}

type chainExpected struct {
	Called       []string        `json:"called"`
	Failures     []string        `json:"failures"`
	Observations []string        `json:"observations"`
	Input        json.RawMessage `json:"input"`
}

type chainProof struct {
	Requests     []json.RawMessage `json:"requests"`
	Observations []json.RawMessage `json:"observations"`
}

const reasonInterruptObserved = "contradicts the protocol's own normative texts, which hookproxy follows: after the interceptor's " +
	"exchange is interrupted it expects the remaining subscriptions and the observer to receive hooks/observe, while the seed says " +
	"interruption \"MUST NOT initiate further best-effort observations\"; run with the caller's context ending while the first " +
	"interceptor holds its reply, hookproxy publishes nothing and starts no observation (checked over HTTP and stdio)"

// chainFrame is one frame a chain scenario's backend received.
type chainFrame struct {
	backend string
	raw     []byte
}

// runChainScenario runs one observation-chain scenario over HTTP and over stdio.
// AHP-COMP-001 (serial order; deny, stop and fail-closed end decision-making, uncalled
// interceptors and observers then receive hooks/observe) AHP-RPC-002 AHP-REG-002
func runChainScenario(t *testing.T, sc *interopScenario) interopVerdict {
	var spec chainSpec
	if err := json.Unmarshal(sc.Chain, &spec); err != nil {
		return interopVerdict{"failed", "chain: " + err.Error()}
	}
	var problems []string
	contradicted := ""
	for _, tr := range []string{registration.TransportHTTP, registration.TransportStdio} {
		p, c := runChainOnce(t, sc, &spec, tr)
		if p != "" {
			problems = append(problems, tr+": "+p)
		}
		if c != "" {
			contradicted = c
		}
	}
	if len(problems) > 0 {
		return interopVerdict{"failed", strings.Join(problems, "; ")}
	}
	if contradicted != "" {
		return interopVerdict{"inapplicable", contradicted}
	}
	return interopVerdict{status: "passed"}
}

// chainBackends groups the scenario's subscriptions by backend, in first-seen order:
// the registration order of hookproxy's ordered hooks array.
func chainBackends(spec *chainSpec) (names []string, subs map[string][]chainSubscription) {
	subs = map[string][]chainSubscription{}
	for _, s := range spec.Subscriptions {
		if _, ok := subs[s.Backend]; !ok {
			names = append(names, s.Backend)
		}
		subs[s.Backend] = append(subs[s.Backend], s)
	}
	return names, subs
}

func chainBackendID(name string) string { return "org.ahp.interop.chain." + name }

// reasonAllowNotCarried: the only difference from the chainProof is the state the later
// interceptors receive after an accepted allow.
const reasonAllowNotCarried = "contradicts the protocol's own normative texts, which hookproxy follows: its chainProof sends " +
	"state.permission \"none\" to the interceptors after one whose accepted reply was modify and allow, while the staging of " +
	"AHP-EDIT-001 (modifications first, then allow: permission \"allow\", bound to the modified input) and the chain state " +
	"(params.state: the updated state goes to every later interceptor) give them \"allow\"; everything else of the scenario (called, failures, " +
	"observations, input and every other frame) is checked and passes"

// runChainOnce runs one chain scenario over one transport. It returns the problems ("" =
// passed) and, when the only difference is one the protocol's texts decide against the
// scenario, why.
func runChainOnce(t *testing.T, sc *interopScenario, spec *chainSpec, tr string) (problem, contradicted string) {
	var req interopRequest
	if err := json.Unmarshal(sc.Requests["a"], &req); err != nil {
		return "request a: " + err.Error(), ""
	}
	var ev ahp.Event
	if err := json.Unmarshal(req.Params.Event, &ev); err != nil {
		return "event: " + err.Error(), ""
	}
	var caps ahp.Capabilities
	if err := json.Unmarshal(req.Params.Capabilities, &caps); err != nil {
		return "capabilities: " + err.Error(), ""
	}
	var expected chainExpected
	raw, _ := json.Marshal(sc.Expected)
	if err := json.Unmarshal(raw, &expected); err != nil {
		return "expected: " + err.Error(), ""
	}
	seq := sc.ResponseSequences["a"]

	names, bySub := chainBackends(spec)
	var mu sync.Mutex
	var frames []chainFrame
	var interruptNow context.CancelFunc // set before the chain runs
	next := 0
	var hooks []registration.Backend
	dir := t.TempDir()
	seqFile := filepath.Join(dir, "sequence.json")
	counterFile := filepath.Join(dir, "counter")
	if tr == registration.TransportStdio {
		b, _ := json.Marshal(seq)
		if err := os.WriteFile(seqFile, b, 0o600); err != nil {
			return err.Error(), ""
		}
	}
	receiptsOf := map[string]string{}
	for _, name := range names {
		var transportOf registration.Transport
		switch tr {
		case registration.TransportHTTP:
			name := name
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal(body, &m)
				mu.Lock()
				frames = append(frames, chainFrame{backend: name, raw: body})
				n := next
				if m.ID != nil {
					next++
				}
				mu.Unlock()
				if m.ID == nil {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				if spec.Interrupt {
					interruptNow()
					<-r.Context().Done()
					return
				}
				if n >= len(seq) {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(seq[n])
			}))
			defer srv.Close()
			transportOf = registration.Transport{Type: registration.TransportHTTP, URL: srv.URL + "/ahp"}
		case registration.TransportStdio:
			exe, err := os.Executable()
			if err != nil {
				return err.Error(), ""
			}
			rf := filepath.Join(dir, "receipts-"+name+".jsonl")
			receiptsOf[name] = rf
			transportOf = registration.Transport{Type: registration.TransportStdio, Command: exe,
				Args: []string{interopChainArg, seqFile, counterFile, rf, strconv.FormatBool(spec.Interrupt)}, Lifecycle: registration.LifecyclePerEvent}
		}
		b := registration.Backend{ID: chainBackendID(name), Transport: transportOf}
		for _, s := range bySub[name] {
			sub := registration.Subscription{Events: []string{ev.Type}, Mode: s.Mode, Content: map[string]string{"default": s.Content}}
			if s.Mode == registration.ModeIntercept {
				sub.FailurePolicy = s.FailurePolicy
				sub.TimeoutMs = 10000
			}
			b.Subscriptions = append(b.Subscriptions, sub)
		}
		hooks = append(hooks, b)
	}
	c, err := New(docOf(hooks...), Options{Source: "urn:hookproxy:interop", ObserveTimeout: testObserveTimeout})
	if err != nil {
		return "chain: " + err.Error(), ""
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if spec.Interrupt {
		// The interruption comes while the first interceptor holds its reply: the HTTP
		// backend ends the caller's context itself; a stdio child records the request
		// and never answers, and the context ends once that receipt exists.
		interruptNow = cancel
		if tr == registration.TransportStdio {
			go func() {
				for ctx.Err() == nil {
					for _, rf := range receiptsOf {
						if b, _ := os.ReadFile(rf); len(b) > 0 {
							cancel()
							return
						}
					}
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
		}
	}
	st := c.Intercept(ctx, &ev, caps)
	st.Wait()
	if tr == registration.TransportStdio {
		for _, name := range names {
			data, err := os.ReadFile(receiptsOf[name])
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err.Error(), ""
			}
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if line != "" {
					frames = append(frames, chainFrame{backend: name, raw: []byte(line)})
				}
			}
		}
	}

	// Every frame a backend received is valid against the draft's own schema.
	for _, f := range frames {
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(f.raw, &m)
		schema := "observe-notification.schema.json"
		if m.Method == ahp.MethodIntercept {
			schema = "intercept-request.schema.json"
		}
		if err := ahptest.ValidIfAvailable(t, schema, f.raw); err != nil {
			return fmt.Sprintf("backend %s received a frame that fails %s: %v", f.backend, schema, err), ""
		}
	}

	// What the chain recorded, by scenario subscription id.
	var called, failures, observed []string
	subID := func(r *Record) string {
		for _, name := range names {
			if chainBackendID(name) == r.BackendID && r.Subscription < len(bySub[name]) {
				return bySub[name][r.Subscription].ID
			}
		}
		return r.BackendID + "#" + strconv.Itoa(r.Subscription)
	}
	for i := range st.Records {
		r := &st.Records[i]
		switch {
		case r.Outcome == OutcomeObserved:
			observed = append(observed, subID(r))
		case r.Outcome == OutcomeNotCalled:
		case r.Mode == registration.ModeIntercept:
			called = append(called, subID(r))
			if r.Outcome == OutcomeFailed {
				failures = append(failures, subID(r))
			}
		}
	}
	var diffs []string
	if spec.Interrupt {
		// The seed decides against the scenario's observations: none may start.
		if !st.Interrupted {
			diffs = append(diffs, "the chain did not report the interruption")
		}
		if len(observed) > 0 {
			diffs = append(diffs, fmt.Sprintf("observations %q started after the interruption", observed))
		}
		for _, f := range frames {
			if !strings.Contains(string(f.raw), `"method":"hooks/intercept"`) {
				diffs = append(diffs, "backend "+f.backend+" received a notification after the interruption")
			}
		}
		if !slices.Equal(called, expected.Called) {
			diffs = append(diffs, fmt.Sprintf("called = %q, want %q", called, expected.Called))
		}
		if st.Event == nil || st.Event.Tool == nil || !jsonEqual(st.Event.Tool.Input, expected.Input) {
			diffs = append(diffs, "the interrupted exchange's reply was published")
		}
		if len(diffs) > 0 {
			return strings.Join(diffs, "; "), ""
		}
		return "", reasonInterruptObserved
	}
	if !slices.Equal(called, expected.Called) {
		diffs = append(diffs, fmt.Sprintf("called = %q, want %q", called, expected.Called))
	}
	if !slices.Equal(failures, expected.Failures) && !(len(failures) == 0 && len(expected.Failures) == 0) {
		diffs = append(diffs, fmt.Sprintf("failures = %q, want %q", failures, expected.Failures))
	}
	// Observers may be dispatched concurrently, in any order (seed, Observers).
	if !slices.Equal(sortedCopy(observed), sortedCopy(expected.Observations)) {
		diffs = append(diffs, fmt.Sprintf("observations = %q, want %q", observed, expected.Observations))
	}
	if st.Event == nil || st.Event.Tool == nil || !jsonEqual(st.Event.Tool.Input, expected.Input) {
		var got json.RawMessage
		if st.Event != nil && st.Event.Tool != nil {
			got = st.Event.Tool.Input
		}
		diffs = append(diffs, fmt.Sprintf("input = %s, want %s", got, expected.Input))
	}
	if proof := checkChainProof(sc, names, bySub, &expected, frames, false); len(proof) > 0 {
		if len(diffs) == 0 && len(checkChainProof(sc, names, bySub, &expected, frames, true)) == 0 {
			return "", reasonAllowNotCarried
		}
		diffs = append(diffs, proof...)
	}
	return strings.Join(diffs, "; "), ""
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// checkChainProof compares what every backend received with the scenario's chainProof:
// the i-th proof request is what called[i] must have received by hooks/intercept, the
// i-th proof observation what observations[i] must have received by hooks/observe —
// each deeply, event, capabilities and state alike. Intercepts of one backend are
// compared in order, its observations as a multiset (their order is not specified).
// With allowAsNone, a received state permission "allow" compares as "none".
func checkChainProof(sc *interopScenario, names []string, bySub map[string][]chainSubscription, expected *chainExpected, frames []chainFrame, allowAsNone bool) []string {
	var proof chainProof
	if err := json.Unmarshal(sc.ChainProof, &proof); err != nil {
		return []string{"chainProof: " + err.Error()}
	}
	if len(proof.Requests) != len(expected.Called) || len(proof.Observations) != len(expected.Observations) {
		return []string{"chainProof does not pair with expected called/observations"}
	}
	backendOf := map[string]string{}
	for _, name := range names {
		for _, s := range bySub[name] {
			backendOf[s.ID] = name
		}
	}
	wantIcpt, wantObs := map[string][]any{}, map[string][]any{}
	for i, id := range expected.Called {
		wantIcpt[backendOf[id]] = append(wantIcpt[backendOf[id]], generic(proof.Requests[i]))
	}
	for i, id := range expected.Observations {
		wantObs[backendOf[id]] = append(wantObs[backendOf[id]], generic(proof.Observations[i]))
	}
	var diffs []string
	for _, name := range names {
		var gotIcpt, gotObs []any
		for _, f := range frames {
			if f.backend != name {
				continue
			}
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(f.raw, &m) != nil {
				diffs = append(diffs, name+" received a frame that is not JSON")
				continue
			}
			if m.Method == ahp.MethodIntercept {
				g := generic(f.raw)
				if allowAsNone {
					m, _ := g.(map[string]any)
					params, _ := m["params"].(map[string]any)
					if st, ok := params["state"].(map[string]any); ok && st["permission"] == ahp.PermissionAllow {
						st["permission"] = ahp.PermissionNone
					}
				}
				gotIcpt = append(gotIcpt, g)
			} else {
				gotObs = append(gotObs, generic(f.raw))
			}
		}
		if !reflect.DeepEqual(gotIcpt, wantIcpt[name]) && !(len(gotIcpt) == 0 && len(wantIcpt[name]) == 0) {
			g, _ := json.Marshal(gotIcpt)
			w, _ := json.Marshal(wantIcpt[name])
			diffs = append(diffs, fmt.Sprintf("backend %s received intercepts %s, want %s", name, g, w))
		}
		if !sameMultiset(gotObs, wantObs[name]) {
			g, _ := json.Marshal(gotObs)
			w, _ := json.Marshal(wantObs[name])
			diffs = append(diffs, fmt.Sprintf("backend %s received observations %s, want %s", name, g, w))
		}
	}
	return diffs
}

// generic decodes a frame for comparison. A hooks/intercept's state is normalized to the
// meaning the protocol gives it: an absent state is the initial one (the AHP SDKs
// omit it on the first interceptor; the vectors spell it out), and flow "none" or empty
// instructions/injections say nothing.
func generic(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid JSON: " + err.Error()
	}
	m, _ := v.(map[string]any)
	if m == nil || m["method"] != ahp.MethodIntercept {
		return v
	}
	params, _ := m["params"].(map[string]any)
	if params == nil {
		return v
	}
	st, _ := params["state"].(map[string]any)
	if st == nil {
		st = map[string]any{"permission": ahp.PermissionNone, "candidate": nil}
		params["state"] = st
	}
	if st["flow"] == ahp.FlowNone {
		delete(st, "flow")
	}
	for _, k := range []string{"instructions", "injections"} {
		if l, ok := st[k].([]any); ok && len(l) == 0 {
			delete(st, k)
		}
	}
	return v
}

func sameMultiset(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
outer:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && reflect.DeepEqual(x, y) {
				used[j] = true
				continue outer
			}
		}
		return false
	}
	return true
}

// runInteropChainBackend is one stdio backend of a chain scenario (per_event: one process
// per delivery). It records the frame it receives, and answers a hooks/intercept with the
// reply the shared counter points at: the chain calls interceptors one at a time
// (AHP-COMP-001), so the n-th call of any backend reads and advances the counter alone.
func runInteropChainBackend(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: SEQUENCE_FILE COUNTER_FILE RECEIPTS_FILE HOLD")
		return 2
	}
	hold := args[3] == "true" // record the request and never answer (interruption scenarios)
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var seq []json.RawMessage
	if err := json.Unmarshal(data, &seq); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rf, err := os.OpenFile(args[2], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rf.Close()
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := rf.Write(line); werr != nil {
				fmt.Fprintln(os.Stderr, werr)
				return 2
			}
			var m struct {
				ID     *string `json:"id"`
				Method string  `json:"method"`
			}
			if hold {
				// Never answer and never exit on its own: the interruption ends it (the
				// chain kills a per_event process whose exchange is cancelled).
				time.Sleep(time.Hour)
				return 2
			}
			if json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method == ahp.MethodIntercept {
				cb, _ := os.ReadFile(args[1])
				n, _ := strconv.Atoi(strings.TrimSpace(string(cb)))
				if err := os.WriteFile(args[1], []byte(strconv.Itoa(n+1)), 0o600); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 2
				}
				if n >= len(seq) {
					fmt.Fprintf(os.Stderr, "no reply %d in the sequence\n", n)
					return 2
				}
				var compact bytes.Buffer
				if cerr := json.Compact(&compact, seq[n]); cerr != nil {
					fmt.Fprintln(os.Stderr, cerr)
					return 2
				}
				compact.WriteByte('\n')
				if _, werr := os.Stdout.Write(compact.Bytes()); werr != nil {
					return 2
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
}

// TestInteropChainCanFail is the control of the chain-scenario runner: over both
// transports it reports a wrong expected call list, failure list, observer set or input,
// and a frame that differs from the chainProof (an omitted part that would have been
// sent), and an unmodified scenario passes.
func TestInteropChainCanFail(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(ahptest.AHPDir(t), "interop", "observation-chain-scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sf interopFile
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	var base *interopScenario
	for i := range sf.Scenarios {
		if sf.Scenarios[i].ID == "observation-chain-fail-open" {
			base = &sf.Scenarios[i]
		}
	}
	if base == nil {
		t.Fatal("observation-chain-fail-open not found")
	}
	var spec chainSpec
	if err := json.Unmarshal(base.Chain, &spec); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc   string
		mutate func(sc *interopScenario)
		want   string // in the reported problem; "" = passes
	}{
		{desc: "unmodified", mutate: func(*interopScenario) {}},
		{desc: "a different call list", want: "called",
			mutate: func(sc *interopScenario) {
				sc.Expected["called"] = json.RawMessage(`["observation-chain-fail-open:a"]`)
			}},
		{desc: "no failure expected", want: "failures",
			mutate: func(sc *interopScenario) { sc.Expected["failures"] = json.RawMessage(`[]`) }},
		{desc: "a missing observer", want: "observations",
			mutate: func(sc *interopScenario) {
				sc.Expected["observations"] = json.RawMessage(`["observation-chain-fail-open:c"]`)
			}},
		{desc: "a different settled input", want: "input",
			mutate: func(sc *interopScenario) { sc.Expected["input"] = json.RawMessage(`{"value":"original"}`) }},
		{desc: "the omit subscriber expected to see the part", want: "backend b received intercepts",
			mutate: func(sc *interopScenario) {
				var p chainProof
				_ = json.Unmarshal(sc.ChainProof, &p)
				var compact bytes.Buffer
				_ = json.Compact(&compact, p.Requests[1])
				p.Requests[1] = json.RawMessage(strings.Replace(compact.String(), `"items":[]`,
					`"items":[{"id":"observation-chain-fail-open:item","kind":"text","mediaType":"text/plain","selection":"omit"}]`, 1))
				sc.ChainProof, _ = json.Marshal(p)
			}},
		{desc: "the first reply accepted instead of rejected", want: "failures",
			mutate: func(sc *interopScenario) {
				seq := slices.Clone(sc.ResponseSequences["a"])
				seq[0] = json.RawMessage(`{"jsonrpc":"2.0","id":"observation-chain-fail-open","result":{"protocolVersion":"draft","effects":[]}}`)
				sc.ResponseSequences = map[string][]json.RawMessage{"a": seq}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, tr := range []string{registration.TransportHTTP, registration.TransportStdio} {
				sc := *base
				sc.Expected = maps.Clone(base.Expected)
				tc.mutate(&sc)
				got, contradicted := runChainOnce(t, &sc, &spec, tr)
				if contradicted != "" {
					t.Errorf("%s: reported a contradiction: %s", tr, contradicted)
				}
				if tc.want == "" && got != "" {
					t.Errorf("%s: unmodified scenario reported %q", tr, got)
				}
				if tc.want != "" && !strings.Contains(got, tc.want) {
					t.Errorf("%s: reported %q, want a failure mentioning %q", tr, got, tc.want)
				}
			}
		})
	}
}

// TestInteropChainInterruptIsChecked: the interruption scenario is run, not skipped — the
// unmodified one ends as the seed's contradiction over both transports, and a different
// expected call list or published input is reported as a failure.
func TestInteropChainInterruptIsChecked(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(ahptest.AHPDir(t), "interop", "observation-chain-scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sf interopFile
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(sf.Scenarios, func(s interopScenario) bool { return s.ID == "observation-chain-interrupt" })
	if i < 0 {
		t.Fatal("observation-chain-interrupt not found")
	}
	base := &sf.Scenarios[i]
	var spec chainSpec
	if err := json.Unmarshal(base.Chain, &spec); err != nil || !spec.Interrupt {
		t.Fatalf("chain %s: %v", base.Chain, err)
	}
	for _, tr := range []string{registration.TransportHTTP, registration.TransportStdio} {
		if p, c := runChainOnce(t, base, &spec, tr); p != "" || c != reasonInterruptObserved {
			t.Errorf("%s: unmodified: problem %q, contradiction %q", tr, p, c)
		}
		for key, bad := range map[string]string{"called": `[]`, "input": `{"value":"settled"}`} {
			sc := *base
			sc.Expected = maps.Clone(base.Expected)
			sc.Expected[key] = json.RawMessage(bad)
			if p, _ := runChainOnce(t, &sc, &spec, tr); p == "" {
				t.Errorf("%s: expected %s altered: no failure reported", tr, key)
			}
		}
	}
}
