package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Bounds of approvals.timeout.
const (
	DefaultTimeout = 120 * time.Second
	MaxTimeout     = 10 * time.Minute
)

// recheckEvery is the waiter's re-read of its record, the safety net for a change
// notification lost on the way (a Redis reconnect). Never faster than 1 s.
const recheckEvery = 2 * time.Second

// Metrics receives the approvals' measurements (hookproxy_approvals_total{decision},
// hookproxy_approvals_pending).
type Metrics interface {
	ApprovalPending(delta int)
	ApprovalDecided(decision string)
}

// Options configure a Service.
type Options struct {
	Store   Store
	Timeout time.Duration // how long a call waits (default DefaultTimeout)
	// Notify receives a POST per new pending record (never blocking the hold).
	Notify []Notify
	// LinkBase is the base URL of the admin listener, for the link a notification carries
	// ("" = none).
	LinkBase string
	Metrics  Metrics
	Logger   *zap.Logger
}

// Service creates records, holds calls until they are decided, and takes decisions.
type Service struct {
	store    Store
	timeout  time.Duration
	notifier *notifier
	metrics  Metrics
	log      *zap.Logger

	mu      sync.Mutex
	waiters map[string]chan Record
	subs    map[chan Record]struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// New starts a Service: it watches the store's changes until Close.
func New(o Options) (*Service, error) {
	if o.Store == nil {
		return nil, errors.New("approvals: no store")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{store: o.Store, timeout: o.Timeout, metrics: o.Metrics, log: o.Logger,
		waiters: map[string]chan Record{}, subs: map[chan Record]struct{}{}, stop: cancel, done: make(chan struct{})}
	s.notifier = newNotifier(o.Notify, o.LinkBase, o.Logger)
	changes, err := o.Store.Watch(ctx)
	if err != nil {
		// Without the feed a held call still learns its decision by re-reading.
		o.Logger.Warn("approvals: no change feed from the store; held calls re-read every 2s", zap.Error(err))
		close(s.done)
		return s, nil
	}
	go s.fanOut(changes)
	return s, nil
}

// Timeout is how long a call waits for a decision.
func (s *Service) Timeout() time.Duration { return s.timeout }

// Close stops the change feed and the notifications in flight.
func (s *Service) Close() error {
	s.stop()
	<-s.done
	s.notifier.close()
	return nil
}

func (s *Service) fanOut(changes <-chan Record) {
	defer close(s.done)
	for rec := range changes {
		s.mu.Lock()
		if w, ok := s.waiters[rec.ID]; ok && rec.Decided() {
			select {
			case w <- rec:
			default:
			}
		}
		for ch := range s.subs {
			select {
			case ch <- rec:
			default: // a slow reader of the event stream misses changes, never blocks others
			}
		}
		s.mu.Unlock()
	}
}

// Subscribe delivers every record change until cancel is called.
func (s *Service) Subscribe() (<-chan Record, func()) {
	ch := make(chan Record, watchQueueSize)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

// Ask is one call to hold.
type Ask struct {
	Route, Session, Tool string
	Input                json.RawMessage // the effective input, as it would be emitted
	Generation           string          // the policy generation that judged it
	AskedBy, Reasons     []string
}

// Outcome is how a hold ended.
type Outcome struct {
	Record   Record
	Approved bool
	// Decision is approved, denied or expired; "failed" when the store failed (the call is
	// then refused: fail closed).
	Decision string
	By       string
	Waited   time.Duration
	Err      error // the store error of a failed hold
}

// Note is what the agent is told about a call that was not approved.
func (o Outcome) Note(tool string) string {
	switch o.Decision {
	case StateDenied:
		n := "Tool call " + tool + " was denied by " + o.By
		if o.Record.Reason != "" {
			n += ": " + o.Record.Reason
		}
		return n + "."
	case StateExpired:
		return "Tool call " + tool + " was not run: " + TimedOutReason + "."
	}
	return "Tool call " + tool + " was not run: its approval could not be recorded."
}

// Decision outcomes besides the record states.
const DecisionFailed = "failed"

// Hold creates the record of a and waits until it is decided, expires, or ctx ends (the
// record then expires). tick, when not nil, is called about every keepAlive while waiting
// (the caller keeps its connection alive). Only an approval of this record, whose digest
// is the one computed here, releases the call.
func (s *Service) Hold(ctx context.Context, a Ask, keepAlive time.Duration, tick func()) Outcome {
	start := time.Now()
	now := start.UTC()
	input := a.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	rec := Record{ID: newID(), State: StatePending, CreatedAt: now, ExpiresAt: now.Add(s.timeout),
		Route: a.Route, Session: a.Session, Tool: Tool{Name: a.Tool, Input: input},
		Digest:  Digest(a.Route, a.Session, a.Tool, input, a.Generation),
		AskedBy: nonNil(a.AskedBy), Reasons: nonNil(a.Reasons)}
	w := make(chan Record, 1)
	s.mu.Lock()
	s.waiters[rec.ID] = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, rec.ID)
		s.mu.Unlock()
	}()
	if err := s.store.Create(ctx, rec); err != nil {
		s.log.Error("approvals: the record of a held call cannot be stored; the call is refused", zap.String("tool", a.Tool), zap.Error(err))
		s.decided(DecisionFailed)
		return Outcome{Record: rec, Decision: DecisionFailed, Waited: time.Since(start), Err: err}
	}
	if s.metrics != nil {
		s.metrics.ApprovalPending(1)
		defer s.metrics.ApprovalPending(-1)
	}
	s.notifier.pending(rec)

	expire := time.NewTimer(time.Until(rec.ExpiresAt))
	defer expire.Stop()
	recheck := time.NewTicker(recheckEvery)
	defer recheck.Stop()
	var ka <-chan time.Time
	if tick != nil && keepAlive > 0 {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		ka = t.C
	}
	var final Record
	var err error
wait:
	for {
		select {
		case final = <-w:
			break wait
		case <-ka:
			tick()
		case <-recheck.C:
			r, gerr := s.store.Get(context.WithoutCancel(ctx), rec.ID)
			if gerr == nil && r.Decided() {
				final = r
				break wait
			}
		case <-expire.C:
			final, err = s.store.Settle(context.WithoutCancel(ctx), rec.ID, StateExpired, "", TimedOutReason, time.Now())
			break wait
		case <-ctx.Done():
			final, err = s.store.Settle(context.WithoutCancel(ctx), rec.ID, StateExpired, "", AbandonedReason, time.Now())
			break wait
		}
	}
	if IsStoreError(err) {
		s.log.Error("approvals: a held call's record cannot be settled; the call is refused", zap.String("id", rec.ID), zap.Error(err))
		s.decided(DecisionFailed)
		return Outcome{Record: rec, Decision: DecisionFailed, Waited: time.Since(start), Err: err}
	}
	o := Outcome{Record: final, Decision: final.State, By: final.DecidedBy, Waited: time.Since(start)}
	// The decision is bound to the call judged here: a record whose digest is not this
	// call's (never expected: the id is unguessable and single use) releases nothing.
	o.Approved = final.State == StateApproved && final.Digest == rec.Digest && final.ID == rec.ID
	if final.State == StateApproved && !o.Approved {
		o.Decision = StateDenied
	}
	s.decided(o.Decision)
	return o
}

func (s *Service) decided(decision string) {
	if s.metrics != nil {
		s.metrics.ApprovalDecided(decision)
	}
}

// Decide applies a person's decision ("approve" or "deny") to a pending record. digest,
// when not "", must be the record's (a decider approves what they saw). ErrNotFound,
// ErrSettled (already decided or expired, with the record), ErrDigestMismatch, or a store
// error.
func (s *Service) Decide(ctx context.Context, id, decision, by, reason, digest string) (Record, error) {
	to := StateDenied
	switch decision {
	case DecisionApprove:
		to = StateApproved
	case DecisionDeny:
	default:
		return Record{}, ErrBadDecision
	}
	if digest != "" {
		cur, err := s.store.Get(ctx, id)
		if err != nil {
			return Record{}, err
		}
		if cur.Digest != digest {
			return cur, ErrDigestMismatch
		}
	}
	return s.store.Settle(ctx, id, to, by, reason, time.Now())
}

// More errors of Decide.
var (
	ErrBadDecision    = errors.New(`decision must be "approve" or "deny"`)
	ErrDigestMismatch = errors.New("the digest is not this approval's: it was asked for another call")
)

// Get returns one record.
func (s *Service) Get(ctx context.Context, id string) (Record, error) { return s.store.Get(ctx, id) }

// List returns the records in filter's state class: pending, decided, or all.
func (s *Service) List(ctx context.Context, filter string) ([]Record, error) {
	all, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, r := range all {
		if filter == "all" || filter == "pending" && !r.Decided() || filter == "decided" && r.Decided() {
			out = append(out, r)
		}
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
