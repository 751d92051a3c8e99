package chain

// The protocol's harness-side interop vectors (../shared/ahp/interop/*.json, adapter
// contract CONTRACT.md) run through hookproxy's real chain: for every scenario the
// scenario's event and capabilities go through Chain.Intercept to a loopback HTTP backend
// and to a stdio backend (this test binary re-executed as a real child process), each
// answering with the scenario's response; the settlement is turned into the application
// result of the contract and every expected key is compared deeply. The vectors are read
// from the shared folder, never copied into the repository.

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
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/ahptest"
	"github.com/hookproxy/hookproxy/internal/docsync"
)

// interopBackendArg makes the test binary act as the interop stdio backend:
// <exe> interopBackendArg SCENARIO_FILE RECEIPTS_FILE.
const interopBackendArg = "hookproxy-chain-interop-backend"

// interopScenario is one entry of a central scenario file. Scenarios of the other suites
// (catalogue, lifecycle, observation chains) carry steps or a chain instead of a request.
type interopScenario struct {
	ID          string                     `json:"id"`
	Category    string                     `json:"category"`
	Request     json.RawMessage            `json:"request"`
	Response    json.RawMessage            `json:"response"`
	Expected    map[string]json.RawMessage `json:"expected"`
	ExpectError bool                       `json:"expectError"`
	Steps       []struct {
		Op string `json:"op"`
	} `json:"-"`
	rawSteps json.RawMessage
	Chain    json.RawMessage `json:"chain"`
	Tags     []string        `json:"tags"`
	// Lifecycle scenarios: requests and responses by key, and the bindings they apply to.
	Requests   map[string]json.RawMessage `json:"requests"`
	Responses  map[string]json.RawMessage `json:"responses"`
	Transports []string                   `json:"transports"`
	// Observation-chain scenarios: the replies in call order and the frames each
	// subscription must receive.
	ResponseSequences map[string][]json.RawMessage `json:"responseSequences"`
	ChainProof        json.RawMessage              `json:"chainProof"`

	httpStatus int // adapter controls only: the HTTP backend answers this status instead
}

// UnmarshalJSON keeps the raw steps beside their ops.
func (s *interopScenario) UnmarshalJSON(b []byte) error {
	type plain interopScenario
	var aux struct {
		plain
		Steps json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*s = interopScenario(aux.plain)
	s.rawSteps = aux.Steps
	if len(aux.Steps) > 0 {
		return json.Unmarshal(aux.Steps, &s.Steps)
	}
	return nil
}

type interopFile struct {
	Version   int               `json:"version"`
	Suite     string            `json:"suite"`
	Scenarios []interopScenario `json:"scenarios"`
}

// interopRequest is the part of a scenario's hooks/intercept request the adapter uses.
type interopRequest struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	Params struct {
		Event        json.RawMessage `json:"event"`
		Capabilities json.RawMessage `json:"capabilities"`
		State        *struct {
			Permission string `json:"permission"`
			Candidate  *struct {
				Value json.RawMessage `json:"value"`
			} `json:"candidate"`
			Flow string `json:"flow"`
		} `json:"state"`
	} `json:"params"`
}

// interopVerdict is the outcome of one scenario.
type interopVerdict struct {
	status string // passed | failed | inapplicable
	reason string
}

// TestInteropScenarios is the interop scenario adapter. Every scenario of every file
// is reported passed, failed or inapplicable (with its reason); the tally line is what CI
// greps. AHP-COMP-001 AHP-DEC-001 AHP-DEC-002 AHP-DEC-003 AHP-CAP-001 AHP-CORE-003
// AHP-VER-001 AHP-RPC-001 AHP-RPC-002 AHP-HTTP-001 AHP-STDIO-001 AHP-SEC-001
func TestInteropScenarios(t *testing.T) {
	dir := filepath.Join(ahptest.AHPDir(t), "interop")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files in %s (%v)", dir, err)
	}
	sort.Strings(files)
	total, passed, failed, inapplicable := 0, 0, 0, 0
	var reasons []string              // in first-seen order
	byReason := map[string][]string{} // reason -> scenario names
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sf interopFile
		if err := json.Unmarshal(data, &sf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range sf.Scenarios {
			sc := &sf.Scenarios[i]
			total++
			v := runInteropScenario(t, f, sc)
			name := filepath.Base(f) + ":" + sc.ID
			switch v.status {
			case "passed":
				passed++
			case "inapplicable":
				inapplicable++
				t.Logf("inapplicable %s: %s", name, v.reason)
				if _, ok := byReason[v.reason]; !ok {
					reasons = append(reasons, v.reason)
				}
				byReason[v.reason] = append(byReason[v.reason], name)
			default:
				failed++
				t.Errorf("failed %s: %s", name, v.reason)
			}
		}
	}
	fmt.Printf("AHP interop: %d scenarios, %d passed, %d failed, %d inapplicable\n", total, passed, failed, inapplicable)
	if passed == 0 {
		t.Errorf("no scenario passed")
	}
	// docs/conformance.md names every inapplicable scenario with its reason; this keeps it true.
	var b strings.Builder
	for _, r := range reasons {
		names := byReason[r]
		fmt.Fprintf(&b, "- %d: %s.", len(names), r)
		for i, n := range names {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s `%s`", sep, n)
		}
		b.WriteString("\n")
	}
	docsync.Check(t, "docs/conformance.md", "interop-inapplicable", b.String())
}

// Reasons for the scenarios a proxy cannot run; docs/conformance.md lists the same reasons.
const (
	reasonCatalogueNotify = "drives a harness SDK's observation API (notify steps): hookproxy emits events only from native traffic it proxies, and it never emits " +
		"events outside its mapping, so there is no API through which a test can make it send an arbitrary catalogue event"
	reasonLifecycle = "drives a harness SDK's staged-acceptance lifecycle (a received reply held until the application accepts it, cancel and " +
		"fail-open applied from outside): hookproxy's chain publishes a reply atomically when it is received, and an interruption is its " +
		"caller's context ending, after which no new delivery or observation starts (seed: \"it MUST NOT initiate further best-effort observations\")"
	reasonUpload = "uses the content-upload binding, which hookproxy does not implement (attachments reach backends as metadata; " +
		"docs/limitations.md)"
	reasonMissingCredential = "the AHP spec (capability-auth.md \"Explicit endpoint bindings\") lets a harness either reject an unresolvable credential at load or fail the delivery " +
		"under the failure policy; hookproxy accepts with a warning at the credential's path (checked) and fails each delivery as credentials, " +
		"so a registration loaded before its secret exists still starts"
	reasonHookFailureEmitted = "expects a host that does not emit hook.failure; hookproxy emits it for observation (checked against the " +
		"events it emits), so the subscription is rightly accepted"
	reasonApplicationTool = "the edit is invalid only under the scenario application's own tool contract (task must be a positive integer), " +
		"which the event does not carry: a proxy does not own the tool, forwards the edited input, and the tool's own input validation applies"
)

// contradictedBy names scenarios that contradict a golden fixture of the same draft, with
// that fixture (ahp/fixtures/draft). The exemption holds only while the manifest still
// says the fixture is valid; should the protocol change its mind, the scenario runs.
var contradictedBy = map[string]string{
	"flow-continue-missing-instruction": "http/continue-no-instruction.valid.json",
}

// contradiction says why a scenario contradicts the draft's schemas or golden fixtures
// ("" when it does not). Each reason is re-checked against the shared texts on every
// run, so an exemption disappears when the texts change.
func contradiction(t *testing.T, sc *interopScenario) string {
	if fixture, ok := contradictedBy[sc.ID]; ok && fixtureExpectedValid(t, fixture) {
		return "golden fixture " + fixture + " is valid and effect.schema.json makes flow continue's instruction optional " +
			"(seed: \"flow.continue may carry an instruction\")"
	}
	if sc.ExpectError {
		return ""
	}
	replies := []json.RawMessage{sc.Response}
	for _, k := range slices.Sorted(maps.Keys(sc.Responses)) {
		replies = append(replies, sc.Responses[k])
	}
	var effects []json.RawMessage
	for _, raw := range replies {
		var resp struct {
			Result struct {
				Effects []json.RawMessage `json:"effects"`
			} `json:"result"`
		}
		if len(raw) > 0 && json.Unmarshal(raw, &resp) == nil {
			effects = append(effects, resp.Result.Effects...)
		}
	}
	for _, e := range effects {
		if ahptest.Validate(t, "effect.schema.json", e) == nil {
			continue
		}
		// A reply the scenario expects to be accepted carries an effect the draft's own
		// schema rejects; hookproxy rejects it too, rightly.
		typ := effectTypeOf(e)
		if typ == ahp.EffectInject {
			// Seed: "inject(context).value is a canonical message list, not arbitrary JSON".
			return "its inject value is not a canonical message list, so the effect fails effect.schema.json (inject value is content-item#/$defs/messages; " +
				"seed: \"inject(context).value is a canonical message list, not arbitrary JSON\")"
		}
		return fmt.Sprintf("its %q effect fails effect.schema.json, which the scenario expects accepted", typ)
	}
	return ""
}

func fixtureExpectedValid(t *testing.T, path string) bool {
	m := ahptest.LoadManifest(t)
	for i := range m.Cases {
		if strings.HasSuffix(m.Cases[i].Path, path) {
			return m.Cases[i].Expected()
		}
	}
	return false
}

func runInteropScenario(t *testing.T, file string, sc *interopScenario) interopVerdict {
	switch {
	case len(sc.Request) > 0:
	case sc.Chain != nil:
		return runChainScenario(t, sc)
	case sc.Category == "registration":
		return runRegistrationScenario(sc)
	case len(sc.Steps) > 0 && (sc.Steps[0].Op == "notify" || sc.Steps[0].Op == "rawNotify"):
		return interopVerdict{"inapplicable", reasonCatalogueNotify}
	case len(sc.Steps) > 0 && slices.Equal(sc.Transports, []string{registration.TransportStdio}) && onlyOps(sc, "send", "wait", "emit", "release", "receive", "accept"):
		return runStdioFramingScenario(t, file, sc)
	case len(sc.Steps) > 0 && onlyOps(sc, "send", "wait", "release", "receive", "accept", "observe") && hasOp(sc, "observe"):
		if reason := contradiction(t, sc); reason != "" {
			return interopVerdict{"inapplicable", "contradicts the protocol's own normative texts, which hookproxy follows: " + reason}
		}
		return runObservedScenario(t, sc)
	case hasOp(sc, "upload"):
		return interopVerdict{"inapplicable", reasonUpload}
	case len(sc.Steps) > 0:
		return interopVerdict{"inapplicable", reasonLifecycle}
	default:
		return interopVerdict{"failed", "scenario has neither a request nor steps the adapter knows"}
	}
	if slices.Contains(sc.Tags, "application-invalid") && slices.Contains(sc.Tags, "modify") {
		return interopVerdict{"inapplicable", reasonApplicationTool}
	}
	if reason := contradiction(t, sc); reason != "" {
		return interopVerdict{"inapplicable", "contradicts the protocol's own normative texts, which hookproxy follows: " + reason}
	}
	var req interopRequest
	if err := json.Unmarshal(sc.Request, &req); err != nil {
		return interopVerdict{"failed", "request: " + err.Error()}
	}
	var problems []string
	for _, tr := range []string{registration.TransportHTTP, registration.TransportStdio} {
		if p := runInteropOnce(t, file, sc, &req, tr); p != "" {
			problems = append(problems, tr+": "+p)
		}
	}
	if len(problems) > 0 {
		return interopVerdict{"failed", strings.Join(problems, "; ")}
	}
	return interopVerdict{status: "passed"}
}

// runRegistrationScenario loads the scenario's registration document with hookproxy's own
// validation, in the scenario's environment, and compares acceptance.
func runRegistrationScenario(sc *interopScenario) interopVerdict {
	var steps []struct {
		Op           string            `json:"op"`
		Registration json.RawMessage   `json:"registration"`
		Requirements []json.RawMessage `json:"requirements"`
		Context      struct {
			Environment map[string]string `json:"environment"`
		} `json:"context"`
	}
	if err := json.Unmarshal(sc.rawSteps, &steps); err != nil || len(steps) != 1 || steps[0].Op != "register" {
		return interopVerdict{"failed", fmt.Sprintf("steps: want one register step (%v)", err)}
	}
	var expected struct {
		Registrations []struct {
			Accepted bool `json:"accepted"`
		} `json:"registrations"`
	}
	raw, _ := json.Marshal(sc.Expected)
	if err := json.Unmarshal(raw, &expected); err != nil || len(expected.Registrations) != 1 {
		return interopVerdict{"failed", fmt.Sprintf("expected.registrations: want one (%v)", err)}
	}
	st := steps[0]
	// The registering party's requirements are judged against hookproxy's published
	// manifest, the upper bound every per-request advertisement narrows: a requirement it
	// cannot enforce refuses the registration rather than degrading it.
	m := admin.Manifest()
	for _, r := range st.Requirements {
		if why := unmetRequirement(&m, r); why != "" {
			if expected.Registrations[0].Accepted {
				return interopVerdict{"failed", "requirement not met by hookproxy's manifest: " + why}
			}
			return interopVerdict{status: "passed"}
		}
	}
	env := st.Context.Environment
	_, problems, err := registration.Parse(st.Registration, registration.Options{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		LookPath:  func(string) (string, error) { return "", errors.New("no commands in the scenario's host") },
	})
	accepted := err == nil
	want := expected.Registrations[0].Accepted
	if accepted == want {
		return interopVerdict{status: "passed"}
	}
	switch sc.ID {
	case "registration-missing-credential":
		for _, p := range problems {
			if p.Warning && strings.HasSuffix(p.Path, ".authentication.tokenEnv") {
				return interopVerdict{"inapplicable", reasonMissingCredential}
			}
		}
	case "registration-unsupported-event":
		if accepted && registration.Emitted[ahp.EventHookFailure] && strings.Contains(string(st.Registration), `"hook.failure"`) {
			return interopVerdict{"inapplicable", reasonHookFailureEmitted}
		}
	}
	return interopVerdict{"failed", fmt.Sprintf("registration accepted = %v, want %v (%v)", accepted, want, err)}
}

// unmetRequirement says why hookproxy's manifest cannot satisfy one requirement ("" when
// it can): the event in that mode, each effect, each modify target and operation.
func unmetRequirement(m *admin.CapabilityManifest, raw json.RawMessage) string {
	var r struct {
		Event   string                     `json:"event"`
		Mode    string                     `json:"mode"`
		Effects []string                   `json:"effects"`
		Modify  map[string]map[string]bool `json:"modify"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return "unreadable requirement: " + err.Error()
	}
	ev := m.Event(r.Event)
	if ev == nil || !slices.Contains(ev.Modes, r.Mode) {
		return fmt.Sprintf("%s is not offered in %s mode", r.Event, r.Mode)
	}
	for _, e := range r.Effects {
		if ev.Capabilities == nil || !ev.Capabilities.Has(e) {
			return fmt.Sprintf("%s cannot be enforced at %s", e, r.Event)
		}
	}
	for target, ops := range r.Modify {
		have, ok := ev.Capabilities.Modify[target]
		if !ok {
			return fmt.Sprintf("modify(%s) is not a target at %s", target, r.Event)
		}
		if (ops["replace"] && !have.Replace) || (ops["merge"] && !have.Merge) {
			return fmt.Sprintf("modify(%s) %v is not offered at %s", target, ops, r.Event)
		}
	}
	return ""
}

// scenarioBackendID is the backend that answers with the scenario's response.
const scenarioBackendID = "org.ahp.interop.scenario"

// runInteropOnce runs one scenario over one transport; "" means it passed.
func runInteropOnce(t *testing.T, file string, sc *interopScenario, req *interopRequest, tr string) string {
	var ev ahp.Event
	if err := json.Unmarshal(req.Params.Event, &ev); err != nil {
		return "event: " + err.Error()
	}
	var caps ahp.Capabilities
	if err := json.Unmarshal(req.Params.Capabilities, &caps); err != nil {
		return "capabilities: " + err.Error()
	}

	// The incoming state of the scenario is produced the way a harness produces it: by
	// an earlier interceptor of the same chain (a built-in policy answering effects that
	// lead to that state). A scenario without state is the first interceptor.
	var hooks []registration.Backend
	prelude, settlesFirst := preludeEffects(req)
	if req.Params.State != nil {
		hooks = append(hooks, registration.Backend{
			ID:            "org.ahp.interop.earlier",
			Transport:     registration.Transport{Type: registration.TransportInProcess, Policy: "interop-earlier"},
			Subscriptions: []registration.Subscription{icpt(registration.FailClosed, 5000, ev.Type)},
		})
	}
	rec := &receipts{}
	var backendTransport registration.Transport
	switch tr {
	case registration.TransportHTTP:
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			rec.add(body)
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &m)
			if m.ID == nil {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			if sc.httpStatus != 0 {
				w.WriteHeader(sc.httpStatus)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(sc.Response)
		}))
		defer srv.Close()
		backendTransport = registration.Transport{Type: registration.TransportHTTP, URL: srv.URL + "/ahp"}
	case registration.TransportStdio:
		exe, err := os.Executable()
		if err != nil {
			return err.Error()
		}
		rf := filepath.Join(t.TempDir(), "receipts.jsonl")
		rec.file = rf
		// per_event: a reply whose id is not the request's is then a definite protocol
		// fault; a persistent process must skip it as a stale frame instead (stdio binding).
		backendTransport = registration.Transport{Type: registration.TransportStdio, Command: exe,
			Args: []string{interopBackendArg, file, rf}, Lifecycle: registration.LifecyclePerEvent}
	}
	hooks = append(hooks, registration.Backend{ID: scenarioBackendID, Transport: backendTransport,
		Subscriptions: []registration.Subscription{icpt(registration.FailClosed, 10000, ev.Type)}})

	c, err := New(docOf(hooks...), Options{Source: "urn:hookproxy:interop", ObserveTimeout: testObserveTimeout, Policies: map[string]transport.PolicyFactory{
		"interop-earlier": func(json.RawMessage) (ahp.Interceptor, error) { return earlierPolicy(prelude), nil },
	}})
	if err != nil {
		return "chain: " + err.Error()
	}
	defer c.Close()
	st := c.Intercept(context.Background(), &ev, caps)
	st.Wait()
	if err := rec.load(); err != nil {
		return "receipts: " + err.Error()
	}
	var scRec *Record
	for i := range st.Records {
		if st.Records[i].BackendID == scenarioBackendID {
			scRec = &st.Records[i]
			break
		}
	}
	if scRec == nil {
		return "the scenario backend has no record"
	}
	for i := range st.Records {
		if st.Records[i].BackendID != scenarioBackendID && st.Records[i].Outcome == OutcomeFailed {
			return fmt.Sprintf("the earlier interceptor failed: %s", st.Records[i].Detail)
		}
	}

	if settlesFirst {
		// The incoming state already settled the boundary (deny or flow stop): the chain
		// stops decision-making and the scenario backend receives the settled event by
		// hooks/observe, never hooks/intercept (AHP-COMP-001).
		if scRec.Outcome != OutcomeObserved {
			return fmt.Sprintf("after a settling incoming state the scenario backend was %s, want observed", scRec.Outcome)
		}
	} else if p := rec.checkIntercept(t, file, tr, sc, req); p != "" {
		return p
	}

	if sc.ExpectError {
		// Only a rejection of a reply that was acquired qualifies: transport failures,
		// timeouts and spawn failures must fail (CONTRACT.md).
		if scRec.Outcome != OutcomeFailed {
			return fmt.Sprintf("reply was accepted (%s), want it rejected", scRec.Outcome)
		}
		switch scRec.FailureKind {
		case transport.KindInvalid, transport.KindMalformed:
		default:
			return fmt.Sprintf("reply failed as %s (%s), want a protocol rejection", scRec.FailureKind, scRec.Detail)
		}
		// Nothing of a rejected reply is published (AHP-EDIT-001), and fail-closed refuses
		// naming the reply as the fault.
		if len(st.Messages) != 0 || st.Modified || len(st.Injections) != 0 {
			return fmt.Sprintf("rejected reply leaked effects: messages %q modified %v injections %d", st.Messages, st.Modified, len(st.Injections))
		}
		if st.Denial == nil || st.Denial.Code != CodeBackendInvalidReply || st.Denial.BackendID != scenarioBackendID {
			return fmt.Sprintf("denial = %+v, want %s naming %s", st.Denial, CodeBackendInvalidReply, scenarioBackendID)
		}
		return ""
	}
	if scRec.Outcome == OutcomeFailed {
		return fmt.Sprintf("reply rejected (%s: %s)", scRec.FailureKind, scRec.Detail)
	}
	got := applicationResult(st, &ev, &caps)
	var diffs []string
	keys := make([]string, 0, len(sc.Expected))
	for k := range sc.Expected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var want any
		if err := json.Unmarshal(sc.Expected[k], &want); err != nil {
			return "expected." + k + ": " + err.Error()
		}
		have, ok := got[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %s", k, sc.Expected[k]))
			continue
		}
		if !reflect.DeepEqual(normalize(have), want) {
			hb, _ := json.Marshal(have)
			diffs = append(diffs, fmt.Sprintf("%s = %s, want %s", k, hb, sc.Expected[k]))
		}
	}
	return strings.Join(diffs, "; ")
}

// applicationResult is the contract's application result derived from a settlement:
// what a harness enforcing it does.
func applicationResult(st *Settlement, ev *ahp.Event, caps *ahp.Capabilities) map[string]any {
	out := map[string]any{}
	switch st.Permission {
	case ahp.PermissionDeny:
		out["decision"] = "deny"
	case ahp.PermissionAsk:
		out["decision"] = "ask"
	default:
		out["decision"] = "allow"
	}
	// The represented operation runs only at a tool boundary, and only when nothing
	// refused, deferred, replaced or stopped it (AHP-DEC-002, AHP-DEC-003).
	out["executed"] = ev.Type == ahp.EventToolBefore && st.Permission != ahp.PermissionDeny &&
		st.Permission != ahp.PermissionAsk && st.Candidate == nil && st.Flow != ahp.FlowStop
	if st.Event != nil && st.Event.Tool != nil {
		out["input"] = st.Event.Tool.Input
	}
	out["messages"] = append([]string{}, st.Messages...)
	if st.Candidate != nil {
		out["result"] = st.Candidate.Value
	}
	if st.Flow != ahp.FlowNone && st.Flow != "" {
		out["flow"] = st.Flow
	}
	out["injections"] = append([]ahp.Effect{}, st.Injections...)
	out["continuationInstructions"] = append([]string{}, st.Instructions...)
	if caps.Flow != nil && caps.Flow.RemainingContinuations != nil {
		rem := *caps.Flow.RemainingContinuations
		if st.Flow == ahp.FlowContinue {
			rem-- // one continuation, however many continue effects were accepted
		}
		out["continuationRemaining"] = rem
	}
	return out
}

// normalize turns v into the generic JSON form encoding/json decodes into.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return err.Error()
	}
	return out
}

// preludeEffects returns the effects of the earlier interceptor that produce the
// scenario's incoming state, and whether that state settles the boundary by itself.
func preludeEffects(req *interopRequest) (effects []ahp.Effect, settles bool) {
	s := req.Params.State
	if s == nil {
		return nil, false
	}
	if s.Candidate != nil {
		effects = append(effects, ahp.Effect{Type: ahp.EffectReturn, Value: s.Candidate.Value})
	}
	switch s.Permission {
	case ahp.PermissionAllow:
		effects = append(effects, ahp.Effect{Type: ahp.EffectAllow})
	case ahp.PermissionAsk:
		effects = append(effects, ahp.Effect{Type: ahp.EffectAsk})
	case ahp.PermissionDeny:
		effects = append(effects, ahp.Effect{Type: ahp.EffectDeny, Reason: "Denied by an earlier interceptor"})
		settles = true
	}
	if s.Flow == ahp.FlowStop {
		effects = append(effects, ahp.Effect{Type: ahp.EffectFlow, Operation: ahp.OpStop, Reason: "Stopped by an earlier interceptor"})
		settles = true
	}
	return effects, settles
}

// earlierPolicy is the in-process interceptor standing for the earlier subscriptions.
type earlierPolicy []ahp.Effect

func (p earlierPolicy) Intercept(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	return &ahp.InterceptResult{ProtocolVersion: ahp.ProtocolVersion, Effects: append([]ahp.Effect{}, p...)}, nil
}

// receipts are the frames the scenario backend received.
type receipts struct {
	file   string // stdio: the child writes one received line each here
	mu     sync.Mutex
	frames [][]byte
}

// load reads the frames the stdio child recorded. The child writes a request's line
// before it answers, so every request the chain got a reply to is in the file.
func (r *receipts) load() error {
	if r.file == "" {
		return nil
	}
	data, err := os.ReadFile(r.file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line != "" {
			r.add([]byte(line))
		}
	}
	return nil
}

func (r *receipts) add(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, append([]byte(nil), b...))
}

// checkIntercept validates the receipt before judging the reply (CONTRACT.md: "Server
// validates receipt before reply"): exactly one hooks/intercept whose id and event id
// are the scenario id, whose event is the scenario's event, whose capabilities are the
// scenario's advertisement and whose state, when the scenario has one, says the same.
func (r *receipts) checkIntercept(t *testing.T, file, tr string, sc *interopScenario, req *interopRequest) string {
	r.mu.Lock()
	frames := slices.Clone(r.frames)
	r.mu.Unlock()
	var got []interopRequest
	var raw [][]byte
	for _, f := range frames {
		var m interopRequest
		if err := json.Unmarshal(f, &m); err != nil {
			return "backend received a frame that is not JSON: " + err.Error()
		}
		if m.Method == ahp.MethodIntercept {
			got = append(got, m)
			raw = append(raw, f)
		}
	}
	if len(got) != 1 {
		return fmt.Sprintf("backend received %d hooks/intercept requests, want 1", len(got))
	}
	g := got[0]
	if err := ahptest.ValidIfAvailable(t, "intercept-request.schema.json", raw[0]); err != nil {
		return "request fails the canonical schema: " + err.Error()
	}
	var gotEv, wantEv any
	_ = json.Unmarshal(g.Params.Event, &gotEv)
	_ = json.Unmarshal(req.Params.Event, &wantEv)
	if g.ID != req.ID || !reflect.DeepEqual(gotEv, wantEv) {
		return fmt.Sprintf("request id %q / event %s, want %q / %s", g.ID, g.Params.Event, req.ID, req.Params.Event)
	}
	var gotCaps, wantCaps any
	_ = json.Unmarshal(g.Params.Capabilities, &gotCaps)
	_ = json.Unmarshal(req.Params.Capabilities, &wantCaps)
	if !reflect.DeepEqual(gotCaps, wantCaps) {
		return fmt.Sprintf("capabilities %s, want %s", g.Params.Capabilities, req.Params.Capabilities)
	}
	if want := req.Params.State; want != nil {
		have := g.Params.State
		if have == nil {
			return "request carries no state, the scenario's does"
		}
		if have.Permission != want.Permission || (have.Candidate == nil) != (want.Candidate == nil) ||
			(want.Candidate != nil && !jsonEqual(have.Candidate.Value, want.Candidate.Value)) ||
			cmpFlow(have.Flow) != cmpFlow(want.Flow) {
			hb, _ := json.Marshal(have)
			wb, _ := json.Marshal(want)
			return fmt.Sprintf("state %s, want %s", hb, wb)
		}
	}
	return ""
}

func cmpFlow(f string) string {
	if f == "" {
		return ahp.FlowNone
	}
	return f
}

// runInteropBackend is the stdio backend of the adapter: it answers each hooks/intercept
// with the response of the scenario whose id is the request id, records every frame it
// receives (one line each) in the receipts file, and ignores notifications. Diagnostics
// go to stderr only (AHP-STDIO-001).
func runInteropBackend(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: SCENARIO_FILE RECEIPTS_FILE")
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
	responses := map[string]json.RawMessage{}
	for _, s := range sf.Scenarios {
		if len(s.Response) > 0 {
			responses[s.ID] = s.Response
		}
	}
	rf, err := os.OpenFile(args[1], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
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
			if json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method == ahp.MethodIntercept {
				resp, ok := responses[*m.ID]
				if !ok {
					fmt.Fprintf(os.Stderr, "no scenario %q\n", *m.ID)
					return 2
				}
				var compact bytes.Buffer
				if cerr := json.Compact(&compact, resp); cerr != nil {
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

// TestInteropAdapterCanFail is the control of the adapter: the same machinery reports a
// failure when the settlement differs from the expectation, when an expectError
// scenario's reply is accepted, when the "rejection" is really a transport failure, and
// when the advertisement hookproxy sends differs from the scenario's.
func TestInteropAdapterCanFail(t *testing.T) {
	src := filepath.Join(ahptest.AHPDir(t), "interop", "scenarios.json")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var sf interopFile
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	byID := func(id string) interopScenario {
		for _, s := range sf.Scenarios {
			if s.ID == id {
				return s
			}
		}
		t.Fatalf("scenario %s not found", id)
		return interopScenario{}
	}
	tests := []struct {
		desc   string
		id     string
		mutate func(sc *interopScenario)
		want   string // in the reported problem
		stdio  bool   // also over stdio
	}{
		{desc: "a different expected decision", id: "allow-executes", stdio: true, want: "decision",
			mutate: func(sc *interopScenario) { sc.Expected["decision"] = json.RawMessage(`"deny"`) }},
		{desc: "an accepted reply where rejection is expected", id: "deny-missing-reason", stdio: true, want: "want it rejected",
			mutate: func(sc *interopScenario) {
				sc.Response = json.RawMessage(`{"jsonrpc":"2.0","id":"deny-missing-reason","result":{"protocolVersion":"draft","effects":[]}}`)
			}},
		{desc: "a transport failure never satisfies expectError", id: "deny-missing-reason", want: "want a protocol rejection",
			mutate: func(sc *interopScenario) { sc.httpStatus = http.StatusInternalServerError }},
		{desc: "a rejected reply where acceptance is expected", id: "allow-executes", stdio: true, want: "reply rejected",
			mutate: func(sc *interopScenario) {
				sc.Response = json.RawMessage(`{"jsonrpc":"2.0","id":"allow-executes","result":{"protocolVersion":"draft","effects":[{"type":"allow"},{"type":"nope"}]}}`)
			}},
		{desc: "an advertisement that differs from the scenario's", id: "allow-executes", want: "capabilities",
			mutate: func(sc *interopScenario) {
				// A modify target that is not tool.before's: the chain never advertises it.
				var r map[string]any
				_ = json.Unmarshal(sc.Request, &r)
				caps := r["params"].(map[string]any)["capabilities"].(map[string]any)
				caps["modify"].(map[string]any)["output"] = map[string]any{"replace": true, "merge": true}
				sc.Request, _ = json.Marshal(r)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			sc := byID(tc.id)
			sc.Expected = maps.Clone(sc.Expected)
			tc.mutate(&sc)
			// The stdio child reads the (mutated) response from a file of its own.
			file := filepath.Join(t.TempDir(), "scenarios.json")
			b, err := json.Marshal(map[string]any{"version": 1, "scenarios": []any{map[string]any{"id": sc.ID, "response": sc.Response}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			var req interopRequest
			if err := json.Unmarshal(sc.Request, &req); err != nil {
				t.Fatal(err)
			}
			transports := []string{registration.TransportHTTP}
			if tc.stdio {
				transports = append(transports, registration.TransportStdio)
			}
			for _, tr := range transports {
				got := runInteropOnce(t, file, &sc, &req, tr)
				if got == "" || !strings.Contains(got, tc.want) {
					t.Errorf("%s: reported %q, want a failure mentioning %q", tr, got, tc.want)
				}
			}
		})
	}
}

// TestInteropObservedCanFail is the control of the boundary-observation runner: a wrong
// expected observation or state is reported.
func TestInteropObservedCanFail(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(ahptest.AHPDir(t), "interop", "lifecycle-scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sf interopFile
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	for _, s := range sf.Scenarios {
		if s.ID != "denied-boundary-observed" {
			continue
		}
		if v := runObservedScenario(t, &s); v.status != "passed" {
			t.Fatalf("unmodified scenario: %+v", v)
		}
		for key, bad := range map[string]string{
			"observations": `[{"eventId":"denied-boundary-observed:a","subscription":"metadata","input":{"value":"settled"}}]`,
			"states":       `{"denied-boundary-observed:a":{"decision":"allow"}}`,
		} {
			sc := s
			sc.Expected = maps.Clone(s.Expected)
			sc.Expected[key] = json.RawMessage(bad)
			if v := runObservedScenario(t, &sc); v.status != "failed" || !strings.Contains(v.reason, key) {
				t.Errorf("expected %s altered: %+v, want a failure naming it", key, v)
			}
		}
		return
	}
	t.Fatal("denied-boundary-observed not found")
}
