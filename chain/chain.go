package chain

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// newTransport builds the transport of one backend. It is the single construction seam:
// tests replace it with fakes, production uses transport.New.
var newTransport = func(b registration.Backend, opts Options) (transport.Transport, error) {
	return transport.New(b, transport.Options{
		Policies:      opts.Policies,
		MaxReplyBytes: opts.MaxReplyBytes,
		Logger:        opts.Logger,
		RootCAs:       opts.RootCAs,
	})
}

// Chain is the AHP interceptor chain of one registration document: the ordered
// subscriptions, their transports, and per-event dispatch plans computed once. A Chain is
// safe for concurrent use; each Intercept call runs its own serial chain.
type Chain struct {
	opts     Options
	log      *zap.Logger
	backends []*backend
	plans    map[string]*plan // by event type, for every catalogue event

	closeOnce sync.Once
	closeErr  error
}

// backend is one entry of the ordered hooks array.
type backend struct {
	id     string
	kind   string // registration.Transport* of its transport
	policy string // the built-in policy of an in-process backend
	tr     transport.Transport
}

// subscription is one registered subscription with everything the hot path needs
// precomputed.
type subscription struct {
	backend    *backend
	index      int // position in the backend's subscriptions
	mode       string
	timeout    time.Duration
	failClosed bool
	policy     string // fail-open | fail-closed ("" for observe)
	sel        selection
	reg        *registration.Subscription
}

// plan is the ordered list of subscriptions that match one event type.
type plan struct {
	// entries are the matching subscriptions in registration order (backend order, then
	// subscription order): intercept subscriptions for interceptable events and observe
	// subscriptions, interleaved as registered.
	entries   []*subscription
	observers []*subscription // the observe-mode entries only
	intercept bool
	observe   bool
}

var emptyPlan = &plan{}

// New builds the chain of a validated registration document. Every backend's transport is
// constructed here (connections and processes start lazily, at first delivery).
func New(doc *registration.Document, opts Options) (*Chain, error) {
	if doc == nil {
		return nil, errors.New("chain: nil registration document")
	}
	if opts.ObserveTimeout <= 0 {
		// The bound is the caller's (the assembly passes limits.observeTimeout): the engine
		// neither reads the configuration nor invents a wait of its own.
		return nil, errors.New("chain: Options.ObserveTimeout must be positive")
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = transport.DefaultMaxReplyBytes
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	c := &Chain{opts: opts, log: opts.Logger.Named("chain"), plans: make(map[string]*plan, len(ahp.EventTypes))}

	var subs []*subscription
	for bi := range doc.Hooks {
		b := &doc.Hooks[bi]
		for si := range b.Subscriptions {
			s, err := newSubscription(b, si)
			if err != nil {
				return nil, err
			}
			subs = append(subs, s)
		}
	}
	for bi := range doc.Hooks {
		b := doc.Hooks[bi]
		tr, err := newTransport(b, opts)
		if err != nil {
			_ = c.closeTransports()
			return nil, fmt.Errorf("chain: backend %s: %w", b.ID, err)
		}
		c.backends = append(c.backends, &backend{id: b.ID, kind: b.Transport.Type, policy: b.Transport.Policy, tr: tr})
	}
	// Attach backends to subscriptions (same order as doc.Hooks).
	i := 0
	for bi := range doc.Hooks {
		for range doc.Hooks[bi].Subscriptions {
			subs[i].backend = c.backends[bi]
			i++
		}
	}
	for _, t := range ahp.EventTypes {
		c.plans[t] = buildPlan(t, subs)
	}
	c.addExtensionPlans(subs)
	return c, nil
}

func newSubscription(b *registration.Backend, si int) (*subscription, error) {
	reg := &b.Subscriptions[si]
	s := &subscription{index: si, mode: reg.Mode, reg: reg, sel: newSelection(reg.Content, reg.IncludeNative)}
	switch reg.Mode {
	case registration.ModeIntercept:
		// AHP-FAIL-001 / AHP-FAIL-002: both are mandatory on intercept subscriptions; a
		// document without them is rejected rather than given an invented default.
		if reg.TimeoutMs < 1 {
			return nil, fmt.Errorf("chain: backend %s: subscriptions[%d]: timeoutMs must be >= 1", b.ID, si)
		}
		switch reg.FailurePolicy {
		case registration.FailOpen, registration.FailClosed:
		default:
			return nil, fmt.Errorf("chain: backend %s: subscriptions[%d]: failurePolicy must be fail-open or fail-closed", b.ID, si)
		}
		s.timeout = time.Duration(reg.TimeoutMs) * time.Millisecond
		s.policy = reg.FailurePolicy
		s.failClosed = reg.FailurePolicy == registration.FailClosed
	case registration.ModeObserve:
	default:
		return nil, fmt.Errorf("chain: backend %s: subscriptions[%d]: unknown mode %q", b.ID, si, reg.Mode)
	}
	return s, nil
}

// buildPlan selects the subscriptions matching eventType, in registration order.
// AHP-REG-002: an intercept subscription matches only interceptable events, including
// through "*" and "family.*" wildcards.
func buildPlan(eventType string, subs []*subscription) *plan {
	p := &plan{}
	for _, s := range subs {
		if !s.reg.Matches(eventType) {
			continue
		}
		switch s.mode {
		case registration.ModeIntercept:
			if !ahp.IsInterceptable(eventType) {
				continue
			}
			p.intercept = true
		case registration.ModeObserve:
			p.observe = true
			p.observers = append(p.observers, s)
		}
		p.entries = append(p.entries, s)
	}
	return p
}

func (c *Chain) plan(eventType string) *plan {
	if p, ok := c.plans[eventType]; ok {
		return p
	}
	// Unknown event types are unsupported semantics: nothing subscribes to them.
	return emptyPlan
}

// Subscribed reports whether any intercept or observe subscription matches eventType. It
// is a map lookup, so the proxy can skip building an event nobody receives.
func (c *Chain) Subscribed(eventType string) (intercept, observe bool) {
	p := c.plan(eventType)
	return p.intercept, p.observe
}

// TransportOf returns the transport type (registration.Transport*: in_process, http,
// stdio) of the backend with the given id, or "" when the chain has none by that id.
// Tracing names an interceptor call's span after it: an in-process policy runs inside
// hookproxy, an HTTP or stdio backend is a client call.
func (c *Chain) TransportOf(backendID string) string {
	if c == nil {
		return ""
	}
	for _, b := range c.backends {
		if b.id == backendID {
			return b.kind
		}
	}
	return ""
}

// PolicyOf returns the built-in policy an in-process backend runs ("tools", "secrets",
// ...), or "" for another transport or an unknown id.
func (c *Chain) PolicyOf(backendID string) string {
	if c == nil {
		return ""
	}
	for _, b := range c.backends {
		if b.id == backendID && b.kind == registration.TransportInProcess {
			return b.policy
		}
	}
	return ""
}

// Ready reports whether every backend that owns a long-lived resource (a persistent stdio
// process) is running. Transports without that notion are always ready.
func (c *Chain) Ready() error {
	var errs []error
	for _, b := range c.backends {
		if r, ok := b.tr.(interface{ Ready() error }); ok {
			if err := r.Ready(); err != nil {
				errs = append(errs, fmt.Errorf("backend %s: %w", b.id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Close releases every transport (connections, processes). It is idempotent.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.closeTransports() })
	return c.closeErr
}

func (c *Chain) closeTransports() error {
	var errs []error
	for _, b := range c.backends {
		if err := b.tr.Close(); err != nil {
			errs = append(errs, fmt.Errorf("backend %s: %w", b.id, err))
		}
	}
	return errors.Join(errs...)
}
