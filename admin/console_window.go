package admin

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Decision is one settled boundary as the console shows it. Whoever adds it (app, from the
// same record the audit log is written from) has already scrubbed every text of it:
// credentials never enter the window, and a redacted secret is present only masked
// (Redaction.Before). The console renders these fields as text, never as markup.
type Decision struct {
	Seq            uint64                `json:"seq"`
	Time           time.Time             `json:"time"`
	RequestID      string                `json:"requestId,omitempty"`
	Route          string                `json:"route,omitempty"`
	API            string                `json:"api,omitempty"`
	Session        string                `json:"session,omitempty"`
	Turn           string                `json:"turn,omitempty"`
	EventID        string                `json:"eventId"`
	EventType      string                `json:"eventType"`
	Delivery       string                `json:"delivery,omitempty"`
	CallID         string                `json:"callId,omitempty"`
	Tool           string                `json:"tool,omitempty"`
	Model          string                `json:"model,omitempty"`
	Enforcement    string                `json:"enforcement"`
	Permission     string                `json:"permission,omitempty"`
	Flow           string                `json:"flow,omitempty"`
	Held           string                `json:"held,omitempty"`
	UpstreamStatus int                   `json:"upstreamStatus,omitempty"`
	Denial         *DecisionDenial       `json:"denial,omitempty"`
	Interceptors   []DecisionInterceptor `json:"interceptors"`
	// Redactions are the text changes the settlement made, each with a little context:
	// Before has the removed text masked, After is the text as it went on.
	Redactions []Redaction `json:"redactions,omitempty"`
	// ToolInput is the (scrubbed) JSON arguments of a tool.* event's call: for a removed
	// call, what the agent asked to run.
	ToolInput  string `json:"toolInput,omitempty"`
	Injections int    `json:"injections,omitempty"`
	Reapplied  int    `json:"reapplied,omitempty"`
	Resettled  bool   `json:"resettled,omitempty"`
	// Shadow is set on a shadow settlement: the shadow chain's settlement of the boundary
	// beside the live one. These arrive after the live decision (the shadow chain runs off
	// the request path) and are kept apart from it: the window stores only those that
	// differ, and the live view, sessions and backend statistics leave them out.
	Shadow *DecisionShadow `json:"shadow,omitempty"`
	// ToolDefinitions is set on the decisions of tool-definition pinning (EventType
	// hookproxy.tool_definitions): what differs from the pins of Scope. Names, kinds and
	// digests, never a description.
	ToolDefinitions []ToolDefinitionChange `json:"toolDefinitions,omitempty"`
	Scope           string                 `json:"scope,omitempty"`
}

// DecisionShadow is what the shadow chain settled, against what the proxy did live.
type DecisionShadow struct {
	LiveOutcome  string                `json:"liveOutcome"`
	Outcome      string                `json:"outcome"`
	Effects      []string              `json:"effects"`
	Differs      bool                  `json:"differs"`
	Diff         string                `json:"diff,omitempty"`
	Denial       *DecisionDenial       `json:"denial,omitempty"`
	Interceptors []DecisionInterceptor `json:"interceptors"`
}

// ToolDefinitionChange is one difference between a tool definition shown to an agent and
// its pin.
type ToolDefinitionChange struct {
	Tool   string   `json:"tool"`
	Kind   string   `json:"kind"`
	Like   string   `json:"like,omitempty"`
	Digest string   `json:"digest,omitempty"`
	Pinned string   `json:"pinned,omitempty"`
	Poison []string `json:"poison,omitempty"`
	Action string   `json:"action"`
}

// EventToolDefinitions is the event type of pinning's decisions (the extension event).
const EventToolDefinitions = "hookproxy.tool_definitions"

// DecisionDenial says why a boundary was refused.
type DecisionDenial struct {
	Reason    string `json:"reason"`
	Code      string `json:"code,omitempty"`
	Backend   string `json:"backend,omitempty"`
	Synthetic bool   `json:"synthetic"`
}

// DecisionInterceptor is one matching subscription at the boundary.
type DecisionInterceptor struct {
	Backend       string   `json:"backend"`
	Transport     string   `json:"transport,omitempty"`
	Subscription  int      `json:"subscription"`
	Outcome       string   `json:"outcome"`
	Effects       []string `json:"effects"`
	LatencyMs     float64  `json:"latencyMs"`
	FailureKind   string   `json:"failureKind,omitempty"`
	Violation     string   `json:"violation,omitempty"`
	FailurePolicy string   `json:"failurePolicy,omitempty"`
}

// Redaction is one changed stretch of text: Where names the message part or argument.
type Redaction struct {
	Where  string `json:"where"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Refused reports whether the boundary's operation was refused or stopped.
func (d *Decision) Refused() bool { return d.Enforcement == "refused" || d.Enforcement == "stopped" }

// Rule is the most specific name of what refused it: the denial code, else "".
func (d *Decision) Rule() string {
	if d.Denial == nil {
		return ""
	}
	return d.Denial.Code
}

// Policies lists the backends that were called at the boundary, in chain order.
func (d *Decision) Policies() []string {
	var out []string
	for _, ic := range d.Interceptors {
		if ic.Outcome != "not_called" && !slices.Contains(out, ic.Backend) {
			out = append(out, ic.Backend)
		}
	}
	return out
}

// Filter selects decisions; an empty field matches everything.
type Filter struct {
	Route, Session, Boundary, Outcome, Policy string
}

// Match reports whether d passes the filter.
func (f Filter) Match(d *Decision) bool {
	if f.Route != "" && d.Route != f.Route || f.Session != "" && d.Session != f.Session ||
		f.Boundary != "" && d.EventType != f.Boundary || f.Outcome != "" && d.Enforcement != f.Outcome {
		return false
	}
	if f.Policy != "" {
		return slices.ContainsFunc(d.Interceptors, func(ic DecisionInterceptor) bool { return ic.Backend == f.Policy })
	}
	return true
}

// DefaultWindowSize is how many recent decisions the console keeps by default.
const DefaultWindowSize = 2000

// subscriberBuffer is how many decisions a live view may fall behind before it misses
// some: a slow browser never slows a request down.
const subscriberBuffer = 256

// Window is the bounded in-memory window of recent decisions the console reads, and the
// fan-out of new ones to live views. Add runs on the request path: it takes one lock,
// copies nothing large and never blocks on a reader. Safe for concurrent use; a nil
// *Window accepts and forgets.
type Window struct {
	mu   sync.Mutex
	size int
	buf  []Decision // ring: buf[(start+i)%len] is the i-th oldest once full
	pos  int        // next slot to write once full
	seq  uint64
	// subs are the live viewers; true for one that also takes shadow disagreements (the
	// Shadow page), which the live view leaves out.
	subs map[chan Decision]bool
	// shadow counts every shadow settlement added since the start, kept or not.
	shadow ShadowCounts
}

// ShadowCounts are the shadow settlements the window was given since the process started:
// all of them, those that differ from the live one, and the disagreements per boundary.
type ShadowCounts struct {
	Settled, Differs int
	ByBoundary       map[string]int
}

// NewWindow keeps the last size decisions (DefaultWindowSize when size <= 0).
func NewWindow(size int) *Window {
	if size <= 0 {
		size = DefaultWindowSize
	}
	return &Window{size: size, subs: map[chan Decision]bool{}}
}

// Add records d (stamping its Seq) and hands it to every live subscriber that has room.
func (w *Window) Add(d Decision) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if d.Shadow != nil {
		// A shadow settlement is counted; only a disagreement takes a place in the window
		// (the agreeing ones would push live decisions out), and none goes to the live view.
		w.shadow.Settled++
		if !d.Shadow.Differs {
			return
		}
		w.shadow.Differs++
		if w.shadow.ByBoundary == nil {
			w.shadow.ByBoundary = map[string]int{}
		}
		w.shadow.ByBoundary[d.EventType]++
	}
	w.seq++
	d.Seq = w.seq
	if len(w.buf) < w.size {
		w.buf = append(w.buf, d)
	} else {
		w.buf[w.pos] = d
		w.pos = (w.pos + 1) % w.size
	}
	for ch, all := range w.subs {
		if d.Shadow != nil && !all {
			continue // the live view is of live decisions
		}
		select {
		case ch <- d:
		default: // this viewer is behind; it misses d rather than delay the request
		}
	}
}

// snapshot returns the window's live decisions oldest first (shadow settlements are left
// out: see shadowSnapshot).
func (w *Window) snapshot() []Decision { return w.snapshotOf(false) }

// shadowSnapshot returns the window's shadow disagreements oldest first.
func (w *Window) shadowSnapshot() []Decision { return w.snapshotOf(true) }

func (w *Window) snapshotOf(shadow bool) []Decision {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Decision, 0, len(w.buf))
	for _, part := range [][]Decision{w.buf[w.pos:], w.buf[:w.pos]} {
		for i := range part {
			if (part[i].Shadow != nil) == shadow {
				out = append(out, part[i])
			}
		}
	}
	return out
}

// ShadowDisagreements returns up to limit shadow settlements that differ from the live
// one, newest first.
func (w *Window) ShadowDisagreements(limit int) []Decision {
	all := w.shadowSnapshot()
	var out []Decision
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, all[i])
	}
	return out
}

// ShadowCounts returns the shadow settlements counted since the start.
func (w *Window) ShadowCounts() ShadowCounts {
	if w == nil {
		return ShadowCounts{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.shadow
	c.ByBoundary = make(map[string]int, len(w.shadow.ByBoundary))
	for k, v := range w.shadow.ByBoundary {
		c.ByBoundary[k] = v
	}
	return c
}

// ToolDefinitionChanges returns up to limit decisions of tool-definition pinning, newest
// first.
func (w *Window) ToolDefinitionChanges(limit int) []Decision {
	return w.Recent(Filter{Boundary: EventToolDefinitions}, limit)
}

// Recent returns up to limit decisions matching f, newest first.
func (w *Window) Recent(f Filter, limit int) []Decision {
	all := w.snapshot()
	var out []Decision
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		if f.Match(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

// Subscribe returns a channel of the live decisions added from now on, and the function
// that ends the subscription.
func (w *Window) Subscribe() (<-chan Decision, func()) { return w.subscribe(false) }

// SubscribeWithShadow is Subscribe that also takes the shadow disagreements kept.
func (w *Window) SubscribeWithShadow() (<-chan Decision, func()) { return w.subscribe(true) }

func (w *Window) subscribe(shadow bool) (<-chan Decision, func()) {
	ch := make(chan Decision, subscriberBuffer)
	w.mu.Lock()
	w.subs[ch] = shadow
	w.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.subs, ch)
			w.mu.Unlock()
		})
	}
}

// SessionSummary is one session seen in the window.
type SessionSummary struct {
	ID                                      string
	First, Last                             time.Time
	Decisions, Refused, Rewritten, Requests int
	Routes                                  []string
}

// Sessions lists the sessions in the window, most recently active first.
func (w *Window) Sessions() []SessionSummary {
	by := map[string]*SessionSummary{}
	reqs := map[string]map[string]bool{}
	for _, d := range w.snapshot() {
		if d.Session == "" {
			continue
		}
		s := by[d.Session]
		if s == nil {
			s = &SessionSummary{ID: d.Session, First: d.Time}
			by[d.Session] = s
			reqs[d.Session] = map[string]bool{}
		}
		s.Last = d.Time
		s.Decisions++
		if d.Refused() {
			s.Refused++
		}
		if d.Enforcement == "rewritten" {
			s.Rewritten++
		}
		if d.RequestID != "" && !reqs[d.Session][d.RequestID] {
			reqs[d.Session][d.RequestID] = true
			s.Requests++
		}
		if d.Route != "" && !slices.Contains(s.Routes, d.Route) {
			s.Routes = append(s.Routes, d.Route)
		}
	}
	out := make([]SessionSummary, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}

// Session returns the decisions of one session, oldest first.
func (w *Window) Session(id string) []Decision {
	var out []Decision
	for _, d := range w.snapshot() {
		if d.Session == id {
			out = append(out, d)
		}
	}
	return out
}

// BackendStat is what the window says about one backend's calls.
type BackendStat struct {
	Backend, Transport             string
	Calls, Failures                int
	MeanMs, MaxMs                  float64
	LastFailure, LastFailurePolicy string
}

// Backends summarises the interceptor calls in the window per backend.
func (w *Window) Backends() []BackendStat {
	by := map[string]*BackendStat{}
	var order []string
	for _, d := range w.snapshot() {
		for _, ic := range d.Interceptors {
			if ic.Outcome == "not_called" || ic.Outcome == "observed" {
				continue
			}
			s := by[ic.Backend]
			if s == nil {
				s = &BackendStat{Backend: ic.Backend, Transport: ic.Transport}
				by[ic.Backend] = s
				order = append(order, ic.Backend)
			}
			s.Calls++
			s.MeanMs += ic.LatencyMs
			s.MaxMs = max(s.MaxMs, ic.LatencyMs)
			if ic.FailureKind != "" {
				s.Failures++
				s.LastFailure, s.LastFailurePolicy = ic.FailureKind, ic.FailurePolicy
			}
		}
	}
	out := make([]BackendStat, 0, len(order))
	for _, id := range order {
		s := by[id]
		s.MeanMs /= float64(s.Calls)
		out = append(out, *s)
	}
	return out
}
