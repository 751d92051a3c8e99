package proxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
)

// Approvals is the approval path: where a tool call whose tool.before settles with
// permission ask waits for a person's decision. nil (no admin listener) means there is
// none: ask is not advertised, so a backend answering ask anyway is a protocol fault its
// failure policy handles (AHP: mandatory approval fails closed where no approval path
// exists).
type Approvals struct {
	Service *approvals.Service
	// Generation names the policies in force (a hash of the registration document); it
	// is part of each held call's digest.
	Generation string
}

// ExtAskReason is the result extension a policy may attach to an ask effect (which
// carries no fields of its own): {"reason": "..."}, shown to the person deciding.
const ExtAskReason = "hookproxy.ask_reason"

// approvalKeepAlive is how often a held stream gets a keep-alive: under the 15 s that
// clients and intermediaries commonly tolerate.
var approvalKeepAlive = 10 * time.Second

// ApprovalAudit is the approval part of a tool.before audit record.
type ApprovalAudit struct {
	ID       string
	Decision string // approved | denied | expired | failed
	By       string
	WaitedMs float64
}

// withAsk adds ask to a tool.before advertisement when an approval path exists
// (AHP-CAP-001: advertise only what is enforced).
func (s *Server) withAsk(c ahp.Capabilities) ahp.Capabilities { return withAsk(s.approvals, c) }

func withAsk(a *Approvals, c ahp.Capabilities) ahp.Capabilities {
	if a == nil {
		return c
	}
	c.Effects = append(slices.Clip(c.Effects), ahp.EffectAsk)
	return c
}

// askedBy lists the backends whose accepted reply asked.
func askedBy(st *chain.Settlement) []string {
	var out []string
	for _, r := range st.Records {
		if slices.Contains(r.Effects, ahp.EffectAsk) && !slices.Contains(out, r.BackendID) {
			out = append(out, r.BackendID)
		}
	}
	return out
}

// askReasons are the reasons the asking backends gave (ExtAskReason).
func askReasons(st *chain.Settlement) []string {
	var out []string
	for _, e := range st.Extensions {
		if e.Key != ExtAskReason {
			continue
		}
		var v struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(e.Value, &v) == nil && v.Reason != "" {
			out = append(out, v.Reason)
		}
	}
	return out
}

// holdAsked holds a tool call whose tool.before settled with permission ask until a
// person decides (AHP: a harness satisfies an approval requirement before executing the
// gated operation). Approved: done is false and the caller emits the call exactly as it
// was judged (its audit record carries the approval). Otherwise done is true and v
// removes the call with a note naming the decider, or saying the approval timed out; a
// store failure refuses the call too.
func (x *lifecycle) holdAsked(ev *ahp.Event, st *chain.Settlement, c mapping.ToolCall, wire *streamWire) (v mapping.CallVerdict, done bool, err error) {
	a := x.s.approvals
	refuse := func(note string, ap *ApprovalAudit) (mapping.CallVerdict, bool, error) {
		x.approval = ap
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c.ID, c.Name)
		x.observeResolved(c, ev.ID, "denied", "")
		return mapping.CallVerdict{Remove: true, Note: note}, true, nil
	}
	if a == nil {
		// Not reachable through the chain (ask is not advertised without a path); a
		// settled ask without one still fails closed.
		return refuse("Tool call "+c.Name+" needs approval, and this proxy has no approval path, so it is refused.", nil)
	}
	input := ev.Tool.Input
	if st.Event != nil && st.Event.Tool != nil {
		input = st.Event.Tool.Input // the effective input: what would be emitted
	}
	ask := approvals.Ask{Route: x.rt.prefix, Session: x.session.ID, Tool: c.Name, Input: input,
		Generation: a.Generation, AskedBy: askedBy(st), Reasons: askReasons(st)}
	var tick func()
	if wire != nil {
		// What the stream carried before the call reaches the client now, not after the
		// decision: the text keeps flowing while the call waits.
		wire.drain()
		tick = wire.keepAlive
	}
	o := a.Service.Hold(x.ctx, ask, approvalKeepAlive, tick)
	ap := &ApprovalAudit{ID: o.Record.ID, Decision: o.Decision, By: o.By, WaitedMs: float64(o.Waited.Microseconds()) / 1000}
	x.s.logAt(x.ctx, zapcore.InfoLevel, "held tool call decided", zap.String("approval", o.Record.ID),
		zap.String("tool", c.Name), zap.String("decision", o.Decision), zap.String("by", o.By), zap.Duration("waited", o.Waited))
	if x.ctx.Err() != nil {
		x.approval = ap
		x.audit(ev, st, DeliveryIntercept, enforcement.Refused, c.ID, c.Name)
		return mapping.CallVerdict{}, true, errInterrupted
	}
	if o.Approved {
		x.approval = ap // the forward path's audit record carries it
		return mapping.CallVerdict{}, false, nil
	}
	return refuse(o.Note(c.Name), ap)
}

// serialWriter is the client's ResponseWriter when a stream's tool call may be held: the
// reverse proxy and the held stream's keep-alives (streamWire) both write through it. The
// copying goroutine is the only one that writes, but httputil's ReverseProxy also flushes
// from a timer goroutine of its own (armed at the start of every copy, even for event
// streams), so every write and flush takes one lock; without it a keep-alive written
// while that timer flushed the head interleaved the two on the connection.
type serialWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (s *serialWriter) Header() http.Header { return s.w.Header() }

func (s *serialWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.WriteHeader(code)
}

func (s *serialWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// FlushError is what http.ResponseController's Flush calls first.
func (s *serialWriter) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return http.NewResponseController(s.w).Flush()
}

// Unwrap gives http.ResponseController the writer's other controls (deadlines).
func (s *serialWriter) Unwrap() http.ResponseWriter { return s.w }

// streamWire lets a stream whose tool call is held keep its client informed: what the
// editor produced before the call goes out at once, then a keep-alive in the provider's
// own form at every tick. It writes to the client's ResponseWriter from the goroutine
// that copies the stream (inside editedBody.Read), so nothing else writes concurrently.
type streamWire struct {
	b  *editedBody
	w  http.ResponseWriter
	ka []byte
}

// newStreamWire is nil when there is nothing to write to or no keep-alive form.
func newStreamWire(b *editedBody, w http.ResponseWriter, tr mapping.Translator, contentType string) *streamWire {
	k, ok := tr.(mapping.KeepAliver)
	if w == nil || !ok {
		return nil
	}
	return &streamWire{b: b, w: w, ka: k.KeepAlive(contentType)}
}

// drain writes what the editor has produced and the client has not read.
func (sw *streamWire) drain() {
	b := sw.b
	if b.out == nil || b.out.Len() == 0 {
		return
	}
	p := b.out.Bytes()
	if b.client != nil {
		_, _ = b.client.Write(p)
	}
	_, _ = sw.w.Write(p)
	b.out.Reset()
	_ = http.NewResponseController(sw.w).Flush()
}

func (sw *streamWire) keepAlive() {
	sw.drain()
	_, _ = sw.w.Write(sw.ka)
	_ = http.NewResponseController(sw.w).Flush()
}
