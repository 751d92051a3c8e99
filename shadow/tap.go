package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/audit"
	"github.com/hookproxy/hookproxy/capture"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/metrics"
)

// Defaults of Options.
const (
	DefaultQueueSize = 1024
	DefaultWorkers   = 4
	// drainTimeout bounds how long Close lets queued shadow work finish before it
	// interrupts the shadow chain.
	drainTimeout = 5 * time.Second
)

// Options configure a Tap. Every part is optional: without Chain there is no shadow,
// without Capture no capture, and a Tap with neither is not worth building (New returns
// nil).
type Options struct {
	Chain   *chain.Chain    // the shadow chain
	Capture *capture.Writer // the capture writer
	Audit   *audit.Writer
	Metrics *metrics.Metrics
	// OnSettled, when set, is told of each shadow settlement with the live outcome of the
	// same boundary, on a shadow worker (the console's window of recent decisions). The
	// record is the one the audit log gets, whether or not the audit log is on.
	OnSettled func(rec audit.Record, live enforcement.Action)
	Logger    *zap.Logger
	QueueSize int // shadow queue bound (default DefaultQueueSize)
	Workers   int // shadow chains run at once (default DefaultWorkers)
}

// Tap is the live chain's chain.Options.Tap of one configuration generation.
type Tap struct {
	o      Options
	q      chan *job
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex // guards closed against sends
	closed bool
	once   sync.Once
}

// job is one settled boundary handed to the shadow workers.
type job struct {
	ev      json.RawMessage // the event as the live chain received it
	caps    json.RawMessage // the offer, encoded
	ext     []string
	live    capture.Decision
	records []chain.Record
	line    *capture.Line // non-nil when the boundary is captured
	id      identity
}

// identity is what the audit record of a boundary carries besides the decision.
type identity struct {
	eventID, eventType, session, turn, call, model, tool string
}

// New builds the tap, or returns nil when there is nothing to tap for.
func New(o Options) *Tap {
	if o.Chain == nil && o.Capture == nil {
		return nil
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	t := &Tap{o: o}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if o.Chain != nil {
		t.q = make(chan *job, o.QueueSize)
		for range o.Workers {
			t.wg.Add(1)
			go t.work()
		}
	}
	return t
}

// Func is the function to pass as chain.Options.Tap (nil for a nil Tap).
func (t *Tap) Func() func(*chain.Tapped) {
	if t == nil {
		return nil
	}
	return t.Settled
}

// Settled is told of one settled boundary of the live chain, on the request path. It
// copies the event and the offer (their JSON encodings: they belong to the request once
// this returns) and returns without waiting for anything.
func (t *Tap) Settled(b *chain.Tapped) {
	if b.Settlement.Interrupted {
		// The client went away while the chain ran: nothing was enforced, so there is no
		// decision to compare or to replay.
		return
	}
	ev := b.Event
	session := capture.SessionOf(ev)
	captured := t.o.Capture.Sampled(session)
	shadow := t.o.Chain != nil
	if shadow && len(t.q) == cap(t.q) {
		// Full: the shadow loses this event; the capture keeps its line.
		t.o.Metrics.ShadowDropped()
		shadow = false
	}
	if !captured && !shadow {
		return
	}
	raw, err := json.Marshal(ev)
	var caps []byte
	if err == nil {
		caps, err = json.Marshal(b.Capabilities)
	}
	if err != nil {
		if captured {
			t.o.Capture.Fail("encode", err)
		}
		return
	}
	ext := append([]string(nil), b.Extensions...)
	live := capture.Summarize(b.Settlement)
	var line *capture.Line
	if captured {
		line = &capture.Line{
			Time: time.Now().UTC(), Boundary: ev.Type, EventID: ev.ID, Session: session,
			Subject: capture.SubjectOf(ev), Event: raw, Capabilities: caps, Extensions: ext, Live: live,
		}
	}
	if !shadow {
		t.o.Capture.Write(line)
		return
	}
	j := &job{ev: raw, caps: caps, ext: ext, live: live,
		records: append([]chain.Record(nil), b.Settlement.Records...), line: line, id: identityOf(ev)}
	if !t.send(j) {
		t.o.Metrics.ShadowDropped()
		if line != nil {
			t.o.Capture.Write(line)
		}
	}
}

// send queues j without blocking; false when the queue is full or the tap closed.
func (t *Tap) send(j *job) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return false
	}
	select {
	case t.q <- j:
		return true
	default:
		return false
	}
}

func identityOf(ev *ahp.Event) identity {
	id := identity{eventID: ev.ID, eventType: ev.Type, session: capture.SessionOf(ev)}
	if ev.Turn != nil {
		id.turn = ev.Turn.ID
	}
	if ev.Call != nil {
		id.call = ev.Call.ID
	}
	if ev.Model != nil {
		id.model = ev.Model.ID
	}
	if ev.Tool != nil {
		id.tool = ev.Tool.Name
	}
	return id
}

func (t *Tap) work() {
	defer t.wg.Done()
	for j := range t.q {
		t.settle(j)
	}
}

// settle runs the shadow chain on one event and records the result.
func (t *Tap) settle(j *job) {
	var ev ahp.Event
	var caps ahp.Capabilities
	if err := errors.Join(json.Unmarshal(j.ev, &ev), json.Unmarshal(j.caps, &caps)); err != nil {
		// The encodings came from the same types a moment ago; this is a bug, not input.
		t.o.Logger.Error("shadow: cannot decode a tapped event", zap.Error(err))
		return
	}
	st := t.o.Chain.Intercept(t.ctx, &ev, caps, j.ext...)
	st.Wait()
	dec := capture.Summarize(st)
	differs, diff := capture.Compare(ev.Type, j.live, dec)
	t.o.Metrics.ShadowDecision(dec.Outcome)
	if differs {
		t.o.Metrics.ShadowDisagreement(ev.Type)
	}
	if j.line != nil {
		j.line.Shadow = &dec
		t.o.Capture.Write(j.line)
	}
	if !t.o.Audit.Enabled() && t.o.OnSettled == nil {
		return
	}
	live := &chain.Settlement{Records: j.records, Permission: j.live.Permission, Flow: j.live.Flow}
	if d := j.live.Denial; d != nil {
		live.Denial = &chain.Denial{Code: d.Code, BackendID: d.BackendID, Reason: d.Reason, Synthetic: d.Synthetic}
	}
	rec := audit.FromSettlement(live)
	rec.EventID, rec.EventType = audit.Text(j.id.eventID), audit.EventType(j.id.eventType)
	rec.SessionID, rec.TurnID, rec.CallID = audit.Text(j.id.session), audit.Text(j.id.turn), audit.Text(j.id.call)
	rec.Model, rec.Tool = audit.Text(j.id.model), audit.Text(j.id.tool)
	effects := make([]audit.EffectType, len(dec.Effects))
	for i, e := range dec.Effects {
		effects[i] = audit.EffectType(e)
	}
	rec.Shadow = &audit.Shadow{
		Effects: effects, Permission: audit.Permission(dec.Permission), Flow: audit.Flow(dec.Flow),
		Outcome: dec.Outcome, Differs: differs, Diff: audit.Text(diff),
		Denial: audit.DenialOf(st.Denial), Interceptors: audit.Interceptors(st.Records),
	}
	rec.Time = time.Now().UTC()
	if t.o.OnSettled != nil {
		t.o.OnSettled(rec, j.live.Outcome)
	}
	if t.o.Audit.Enabled() {
		// Not t.ctx: a shadow line of a settled event is kept even while closing; the
		// writer bounds its own wait.
		_ = t.o.Audit.Write(context.Background(), rec)
	}
}

// Close stops taking events, lets queued shadow work finish for a few seconds, then
// interrupts the shadow chain, and closes the capture writer. The caller closes the
// chains.
func (t *Tap) Close() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		t.mu.Lock()
		t.closed = true
		if t.q != nil {
			close(t.q)
		}
		t.mu.Unlock()
		done := make(chan struct{})
		go func() { t.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(drainTimeout):
			t.cancel()
			<-done
		}
		t.cancel()
		t.o.Capture.Close()
	})
}
