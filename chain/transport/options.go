package transport

import (
	"crypto/x509"
	"fmt"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/registration"
)

// DefaultMaxReplyBytes caps one reply frame (HTTP body or stdio line) when Options leaves
// MaxReplyBytes unset. It matches the AHP Go SDK's frame limit.
const DefaultMaxReplyBytes int64 = 4 << 20

// Options configure the transports built by New. Zero values take the documented defaults.
type Options struct {
	// Policies builds in_process backends by policy name.
	Policies map[string]PolicyFactory
	// MaxReplyBytes caps one reply frame; a larger reply fails with KindOversized and is
	// never truncated (default DefaultMaxReplyBytes).
	MaxReplyBytes int64
	// Logger receives transport diagnostics at debug level (default: no-op).
	Logger *zap.Logger
	// RootCAs replaces the platform trust for HTTPS backends and OAuth issuers (nil: the
	// platform's roots). Verification itself is never turned off.
	RootCAs *x509.CertPool
}

// Readier is implemented by transports that own a long-lived resource whose state is worth
// reporting, such as a persistent stdio process. Callers discover it by type assertion.
type Readier interface {
	// Ready returns nil when the resource is up. It may bring it up (start a process that
	// was never started or has died) and then reports whether that worked.
	Ready() error
}

// New builds the transport of one registered backend. It only prepares the transport:
// connections are opened and processes started at first delivery, and credentials are
// resolved at every delivery, never here (AHP spec, capability-auth.md "Explicit endpoint
// bindings": if resolution fails, the request is not sent).
func New(b registration.Backend, opts Options) (Transport, error) {
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	log := opts.Logger.With(zap.String("backend", b.ID), zap.String("transport", b.Transport.Type))
	switch b.Transport.Type {
	case registration.TransportHTTP:
		return newHTTP(b, opts, log)
	case registration.TransportStdio:
		return newStdio(b, opts, log)
	case registration.TransportInProcess:
		return newInProcess(b, opts, log)
	default:
		return nil, fmt.Errorf("backend %s: unsupported transport type %q", b.ID, b.Transport.Type)
	}
}
