package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// upstreamFailureMessage is the message of the 502 a client gets when the upstream could
// not be reached or did not answer: what failed (DNS, connection, TLS, timeout), so that a
// newcomer without network, or with a wrong upstream, sees the cause in the answer and
// not only in the proxy's log. It names at most the host and address the configuration
// already holds — never a URL, whose query may carry an API key, nor an upstream proxy's
// credentials — and the error's own text only for the kinds listed here.
func upstreamFailureMessage(err error) string {
	const prefix = "hookproxy could not get an answer from the upstream: "
	if reason := upstreamReason(err); reason != "" {
		return prefix + reason
	}
	return prefix + "upstream request failed"
}

func upstreamReason(err error) string {
	at := ""
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Addr != nil {
		at = " (" + oe.Addr.String() + ")"
	}
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var verifyErr *tls.CertificateVerificationError
	var alert tls.AlertError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr):
		switch {
		case dnsErr.IsNotFound:
			return "DNS lookup of " + dnsErr.Name + " failed: no such host"
		case dnsErr.IsTimeout:
			return "DNS lookup of " + dnsErr.Name + " timed out"
		}
		return "DNS lookup of " + dnsErr.Name + " failed (no network or no DNS server?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused" + at + ": nothing listens at the upstream address"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "network unreachable" + at + " (no network?)"
	case errors.As(err, &unknownCA):
		return "TLS: the upstream's certificate is signed by an unknown authority" + at
	case errors.As(err, &hostErr):
		return "TLS: the upstream's certificate is not valid for " + hostErr.Host + at
	case errors.As(err, &invalidCert):
		return "TLS: the upstream's certificate is invalid (" + certReason(invalidCert.Reason) + ")" + at
	case errors.As(err, &verifyErr):
		return "TLS: the upstream's certificate could not be verified" + at
	case errors.As(err, &alert), errors.As(err, &recordErr):
		return "TLS handshake failed" + at + " (does the upstream speak TLS on that port?)"
	case strings.Contains(err.Error(), "TLS handshake timeout"):
		return "TLS handshake timed out" + at + " (limits.tlsHandshakeTimeout)"
	case strings.Contains(err.Error(), "timeout awaiting response headers"):
		return "the upstream sent no response headers within limits.responseHeaderTimeout"
	case oe != nil && oe.Op == "dial" && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || oe.Timeout()):
		return "connecting timed out" + at + " (limits.dialTimeout)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the upstream closed the connection before answering" + at
	}
	return ""
}

func certReason(r x509.InvalidReason) string {
	switch r {
	case x509.Expired:
		return "expired or not yet valid"
	case x509.NotAuthorizedToSign:
		return "not authorized to sign"
	case x509.IncompatibleUsage:
		return "not for server authentication"
	}
	return "rejected"
}
