package chain

// This file declares the engine's public surface; the implementation lives beside it:
// chain.go (construction, matching plans), engine.go (the serial interceptor chain),
// capabilities.go (honest narrowing), projection.go (content selection), staging*.go and
// decode.go (strict reply validation and atomic staging; ValidateReply — canonical content
// itself is validated and decoded by chain/ahp), values.go (edit semantics) and
// observers.go (owned observation delivery, hook.failure).

import (
	"crypto/x509"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/enforcement"
)

// Outcome of one subscription at one boundary, as recorded in a Settlement: the one
// declaration of that vocabulary, used by the proxy, the audit log and the metrics.
type Outcome string

const (
	OutcomeNoEffect  Outcome = "no_effect" // called, accepted, no effects
	OutcomeAccepted  Outcome = "accepted"  // called, whole response accepted with effects
	OutcomeFailed    Outcome = "failed"    // operational failure (policy applied)
	OutcomeNotCalled Outcome = "not_called"
	OutcomeObserved  Outcome = "observed" // delivered by hooks/observe after settlement
)

// Known reports whether o is one of the Outcome* values.
func (o Outcome) Known() bool {
	switch o {
	case OutcomeNoEffect, OutcomeAccepted, OutcomeFailed, OutcomeNotCalled, OutcomeObserved:
		return true
	}
	return false
}

// MarshalText writes a value outside the vocabulary as enforcement.Unknown, so that a
// mistaken assignment can never put free text in the audit log.
func (o Outcome) MarshalText() ([]byte, error) {
	if !o.Known() {
		return []byte(enforcement.Unknown), nil
	}
	return []byte(o), nil
}

// Denial codes of settlements: an explicit deny without its own code gets
// CodeDenied; a fail-closed operational failure is a synthetic denial with CodeFailClosed,
// except when the backend did answer and its reply was refused for a protocol reason
// (unadvertised effect, schema violation, wrong id): that is CodeBackendInvalidReply, so an
// operator can tell a protocol fault of the backend from an outage.
const (
	CodeDenied              = "hookproxy.denied"
	CodeFailClosed          = "hookproxy.fail_closed"
	CodeBackendInvalidReply = "hookproxy.backend_invalid_reply"
)

// Record is what happened to one matching subscription.
type Record struct {
	BackendID    string         `json:"backendId"`
	Subscription int            `json:"subscription"` // index in the backend's subscriptions
	Mode         string         `json:"mode"`
	Outcome      Outcome        `json:"outcome"`
	Effects      []string       `json:"effects,omitempty"`     // accepted effect types, in order
	FailureKind  transport.Kind `json:"failureKind,omitempty"` // transport.Kind*
	// Violation and OffendingEffect say why a reply the backend did send was refused
	// (transport.Violation*, and the type of the effect to blame, if one is).
	Violation       transport.Violation `json:"violation,omitempty"`
	OffendingEffect string              `json:"offendingEffect,omitempty"`
	Policy          string              `json:"failurePolicy,omitempty"`
	Latency         time.Duration       `json:"latency"`
	Detail          string              `json:"-"` // local diagnostic; never sent to models or clients
}

// ReplyExtension is one member of an accepted reply's result.extensions.
type ReplyExtension struct {
	BackendID string
	Key       string
	Value     json.RawMessage
}

// Denial says why an operation was refused.
type Denial struct {
	Reason    string
	Code      string
	BackendID string
	Synthetic bool // fail-closed failure, not an explicit deny effect
}

// Settlement is the single result of one boundary's interceptor chain: what the host must
// enforce (AHP-DEC-002: a denied operation is not executed). Event is the effective event
// (accepted modifications applied).
type Settlement struct {
	Event      *ahp.Event
	Permission string // ahp.Permission*
	Denial     *Denial
	Flow       string // ahp.Flow*
	StopReason string
	Candidate  *ahp.Candidate
	// Instructions are the accepted continuation instructions, in order. They take effect
	// only when Flow is continue: a later stop wins and the agent is not continued, but
	// the record of what was asked survives (interop scenario flow-stop-wins-over-continue).
	Instructions []string
	Injections   []ahp.Effect // accepted inject effects, in order
	Messages     []string     // user-facing message effects, in order
	Modified     bool         // the effective target differs from the original
	Records      []Record
	Interrupted  bool
	// Extensions are the result extensions of the accepted replies, in chain order. The
	// chain passes them through uninterpreted (AHP-EXT-001) except hookproxy.redact_text
	// where the host offered it (Intercept's ext; applied to Event like a modify, and kept
	// here as well); the host acts only on the ones it declares (hookproxy.redact_params,
	// ahp.ExtRedactParams).
	Extensions []ReplyExtension

	wait func()
}

// Wait blocks until every observation this settlement's call dispatched has completed or
// reached its bounded deadline. A hook call owns its deliveries: callers must call Wait
// (typically deferred) so that no delivery outlives the call. Until Wait returns, Event
// is read by the observations and must not be mutated.
func (s *Settlement) Wait() {
	if s != nil && s.wait != nil {
		s.wait()
	}
}

// Refused reports whether the operation must not run (deny or fail-closed).
func (s *Settlement) Refused() bool { return s.Permission == ahp.PermissionDeny }

// Stopped reports whether flow stop was accepted.
func (s *Settlement) Stopped() bool { return s.Flow == ahp.FlowStop }

// Options configure a Chain. Zero values take the documented defaults.
type Options struct {
	// Source is the event source URI stamped on events the chain itself creates
	// (hook.failure); boundary events carry the source their builder set.
	Source string
	// Policies builds in_process backends by policy name.
	Policies map[string]transport.PolicyFactory
	// ObserveTimeout bounds each observation delivery; it is required (New refuses zero),
	// and the caller chooses it (hookproxy: the configuration's limits.observeTimeout).
	ObserveTimeout time.Duration
	// MaxReplyBytes caps a backend reply frame (default 4 MiB).
	MaxReplyBytes int64
	// Logger receives operational diagnostics (default: no-op).
	Logger *zap.Logger
	// RootCAs replaces the platform trust for HTTPS backends and OAuth issuers (nil: the
	// platform's roots; tests pass their loopback TLS servers' certificates).
	RootCAs *x509.CertPool
	// Tap, when set, is told of every settled boundary of Intercept, synchronously, on the
	// request path: the shadow chain and the capture (hookproxy's rollout tools) copy
	// what they keep and return. It must not block, must not mutate what it is given and
	// must not keep its pointers past the call.
	Tap func(*Tapped)
}

// Tapped is one settled boundary as Options.Tap sees it: the canonical event exactly as
// the chain received it (before any accepted modification), what the host offered, and
// the settlement.
type Tapped struct {
	Event        *ahp.Event
	Capabilities *ahp.Capabilities
	Extensions   []string
	Settlement   *Settlement
}
