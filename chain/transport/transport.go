package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Transport is one backend's delivery channel. Implementations are safe for concurrent use.
type Transport interface {
	// Intercept sends hooks/intercept with JSON-RPC id equal to id (the event id) and
	// returns the raw JSON-RPC response frame. ctx carries the subscription deadline, which
	// covers credential lookup, connect, write, read and retries.
	Intercept(ctx context.Context, id string, params *ahp.InterceptParams) ([]byte, error)
	// Observe sends the hooks/observe notification; no reply is read.
	Observe(ctx context.Context, params *ahp.ObserveParams) error
	// Close releases connections and stops processes.
	Close() error
}

// PolicyFactory builds a built-in policy from its registration config.
type PolicyFactory func(config json.RawMessage) (ahp.Interceptor, error)

// Failure kinds of an operational failure, used in records, hook.failure and metrics.
// The text never carries backend-supplied content or credentials.
const (
	KindTimeout     = "timeout"      // deadline exceeded
	KindConnection  = "connection"   // refused, reset, DNS, TLS
	KindHTTPStatus  = "http_status"  // non-200 for intercept, non-2xx for observe
	KindRedirect    = "redirect"     // a redirect was answered; never followed
	KindOversized   = "oversized"    // reply larger than the local limit
	KindCredentials = "credentials"  // tokenEnv unset or empty
	KindProcess     = "process"      // stdio launch failure, crash, non-zero exit, no reply
	KindMalformed   = "malformed"    // not one UTF-8 JSON-RPC object, wrong framing, wrong id
	KindRPCError    = "rpc_error"    // the backend answered with a JSON-RPC error
	KindInvalid     = "invalid"      // the reply failed AHP validation (set by chain)
	KindPolicy      = "policy_error" // an in-process policy returned an error
	KindCancelled   = "cancelled"    // the enclosing operation was interrupted
)

// Violations refine a KindInvalid or KindMalformed failure: which protocol rule the
// backend's reply broke. They are audited and counted beside the kind, so an operator can
// tell a protocol fault of the backend (it answered, wrongly) from an outage.
const (
	ViolationMalformed          = "malformed_reply"     // not one JSON-RPC 2.0 response object
	ViolationWrongID            = "wrong_id"            // the reply answers another request
	ViolationInvalidResult      = "invalid_result"      // result envelope: protocolVersion, effects array
	ViolationUnknownEffect      = "unknown_effect"      // an effect type the draft does not define
	ViolationUnadvertisedEffect = "unadvertised_effect" // an effect the request did not advertise
	ViolationInvalidEffect      = "invalid_effect"      // an effect with a missing, extra or wrong member or value
)

// Error is an operational failure of one delivery.
type Error struct {
	Kind string
	Err  error
	// Violation and Effect are set on replies refused for a protocol reason: the rule
	// broken (Violation*) and the type of the offending effect, when one effect is to blame.
	Violation string
	Effect    string
}

// InvalidReply reports whether err is a refusal of a reply the backend did send, for a
// protocol reason (KindInvalid or KindMalformed), as opposed to an operational failure
// to obtain a reply (timeout, connection, process, HTTP status, JSON-RPC error object).
func InvalidReply(err error) bool {
	k := KindOf(err)
	return k == KindInvalid || k == KindMalformed
}

// ViolationOf returns the protocol rule err's reply broke, or "" for other failures.
func ViolationOf(err error) (violation, effect string) {
	var te *Error
	if !errors.As(err, &te) {
		return "", ""
	}
	switch te.Kind {
	case KindInvalid, KindMalformed:
	default:
		return "", ""
	}
	v := te.Violation
	if v == "" {
		if te.Kind == KindMalformed {
			v = ViolationMalformed
		} else {
			v = ViolationInvalidResult
		}
	}
	return v, te.Effect
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Kind, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the failure kind of err, or KindConnection for an unclassified error.
func KindOf(err error) string {
	var te *Error
	if errors.As(err, &te) {
		return te.Kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return KindTimeout
	}
	if errors.Is(err, context.Canceled) {
		return KindCancelled
	}
	return KindConnection
}
