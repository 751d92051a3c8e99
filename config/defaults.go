package config

import (
	"os"
	"strings"
	"time"
)

// Defaults of the keys a file may omit (documented beside the fields in config.go).
const (
	DefaultListen                = "127.0.0.1:8080"
	DefaultMaxRequestBytes       = 32 << 20
	DefaultMaxResponseBytes      = 64 << 20
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 10 * time.Minute
	DefaultShutdownTimeout       = 30 * time.Second
	DefaultObserveTimeout        = 5 * time.Second
	DefaultRequestBodyGrace      = 10 * time.Second
	DefaultMinRequestBodyRate    = 16 << 10
	DefaultMaxConcurrentRequests = 4096
	DefaultMaxHeldBytes          = 1 << 30
	DefaultMaxPolicyScanBytes    = 1 << 30
	DefaultAuditQueueSize        = 1024
	DefaultAuditWaitTimeout      = 100 * time.Millisecond
	DefaultLogLevel              = "info"
	DefaultLogFormat             = "auto"
	DefaultServiceName           = "hookproxy"
	DefaultSampleRatio           = 1.0
	DefaultStateMaxSessions      = 10000
	DefaultStateTTL              = 24 * time.Hour
	DefaultStateKeyPrefix        = "hookproxy:"
	DefaultStateTimeoutMs        = 250
	DefaultCaptureSample         = 1.0
	DefaultCaptureMaxBytes       = 64 << 20
	DefaultCaptureMaxAge         = time.Hour

	AuditStdout  = "-"
	AuditOnWait  = "wait"
	AuditOnDrop  = "drop"
	LogAuto      = "auto" // console when stderr is a terminal, else json
	LogJSON      = "json"
	LogConsole   = "console"
	sourcePrefix = "urn:hookproxy:"
)

// applyDefaults fills every zero value that has a documented default. Admin stays empty
// when omitted: the admin listener is optional and off unless configured.
func applyDefaults(c *Config) {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Source == "" {
		c.Source = DefaultSource()
	}
	applyApprovalDefaults(c)
	l := &c.Limits
	setInt64(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	setInt64(&l.MaxResponseBytes, DefaultMaxResponseBytes)
	setDuration(&l.DialTimeout, DefaultDialTimeout)
	setDuration(&l.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	setDuration(&l.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	setDuration(&l.ShutdownTimeout, DefaultShutdownTimeout)
	setDuration(&l.ObserveTimeout, DefaultObserveTimeout)
	setDuration(&l.RequestBodyGrace, DefaultRequestBodyGrace)
	setInt64(&l.MinRequestBodyRate, DefaultMinRequestBodyRate)
	setInt64(&l.MaxConcurrentRequests, DefaultMaxConcurrentRequests)
	setInt64(&l.MaxHeldBytes, DefaultMaxHeldBytes)
	setInt64(&l.MaxPolicyScanBytes, DefaultMaxPolicyScanBytes)
	if c.Audit.QueueSize == 0 {
		c.Audit.QueueSize = DefaultAuditQueueSize
	}
	if c.Audit.OnFull == "" {
		c.Audit.OnFull = AuditOnWait
	}
	setDuration(&c.Audit.WaitTimeout, DefaultAuditWaitTimeout)
	if c.Capture.Sample == 0 {
		c.Capture.Sample = DefaultCaptureSample
	}
	setInt64(&c.Capture.MaxBytes, DefaultCaptureMaxBytes)
	setDuration(&c.Capture.MaxAge, DefaultCaptureMaxAge)
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.Tracing.ServiceName == "" {
		c.Tracing.ServiceName = DefaultServiceName
	}
	if c.Tracing.SampleRatio == 0 {
		// Tracing is switched off by leaving endpoint empty, not by a zero ratio.
		c.Tracing.SampleRatio = DefaultSampleRatio
	}
	st := &c.State
	if st.Backend == "" {
		st.Backend = StateMemoryBackend
	}
	if st.OnStoreFailure == "" {
		st.OnStoreFailure = StateReSettle
	}
	if st.Memory.MaxSessions == 0 {
		st.Memory.MaxSessions = DefaultStateMaxSessions
	}
	setDuration(&st.Memory.TTL, DefaultStateTTL)
	setDuration(&st.Redis.TTL, DefaultStateTTL)
	if st.Redis.KeyPrefix == "" {
		st.Redis.KeyPrefix = DefaultStateKeyPrefix
	}
	if st.Redis.TimeoutMs == 0 {
		st.Redis.TimeoutMs = DefaultStateTimeoutMs
	}
	applyPinningDefaults(c.Pinning)
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.API == APIMCP && r.ServerID == "" {
			r.ServerID = r.Prefix
		}
	}
}

// WithDefaults returns l with every limit that is unset (zero, or negative) replaced by its
// default. Load already applied the defaults to a file (and refused negative values); this
// is for Limits built in code, such as proxy.Options of tests and embedders, so that the
// defaults are declared here only.
func (l Limits) WithDefaults() Limits {
	orDefault(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	orDefault(&l.MaxResponseBytes, DefaultMaxResponseBytes)
	orDefault(&l.DialTimeout, DefaultDialTimeout)
	orDefault(&l.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	orDefault(&l.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	orDefault(&l.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&l.ObserveTimeout, DefaultObserveTimeout)
	orDefault(&l.RequestBodyGrace, DefaultRequestBodyGrace)
	orDefault(&l.MinRequestBodyRate, DefaultMinRequestBodyRate)
	orDefault(&l.MaxConcurrentRequests, DefaultMaxConcurrentRequests)
	orDefault(&l.MaxHeldBytes, DefaultMaxHeldBytes)
	orDefault(&l.MaxPolicyScanBytes, DefaultMaxPolicyScanBytes)
	return l
}

func orDefault[T int64 | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

func setInt64(p *int64, d int64) {
	if *p == 0 {
		*p = d
	}
}

func setDuration(p *time.Duration, d time.Duration) {
	if *p == 0 {
		*p = d
	}
}

// DefaultSource is the AHP event source of this installation: urn:hookproxy:<hostname>,
// with characters outside the URN-safe set replaced. It identifies the runtime, never a
// user, and carries no secret.
func DefaultSource() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '-'
	}, host)
	return sourcePrefix + clean
}
