package config

import "time"

// API kinds a route can carry.
const (
	APIOpenAI      = "openai"
	APIAnthropic   = "anthropic"
	APIGemini      = "gemini"
	APIMCP         = "mcp"
	APIPassthrough = "passthrough"
)

// Config is the whole configuration file. The keys listen, admin, registration, audit
// and routes are the fixed configuration contract; the others are hookproxy additions.
type Config struct {
	Listen string `yaml:"listen" json:"listen"`
	Admin  string `yaml:"admin" json:"admin"`
	// AdminAuth is the rest of a mapping-form admin key (admin.token, admin.tokenRef,
	// admin.tokens): who may use the admin listener's protected endpoints. Its listen is
	// copied to Admin.
	AdminAuth AdminAuth `yaml:"-" json:"adminAuth"`
	// Registration is the AHP registration document: a file (absolute, or relative to this
	// configuration). Omitted, the built-in default chain applies (DefaultRegistration:
	// the tools and secrets policies), so a copied or hand-written configuration cannot
	// lose its policies by accident; RegistrationNone ("none") says so explicitly and makes
	// a plain proxy. Parse turns both into the fields below: "none" leaves Registration
	// and RegistrationInline empty, an omitted key fills RegistrationInline.
	Registration string  `yaml:"registration" json:"registration"`
	Audit        Audit   `yaml:"audit" json:"audit"`
	Routes       []Route `yaml:"routes" json:"routes"`

	// Source is the AHP event source URI of this installation (default urn:hookproxy:<host>).
	Source string `yaml:"source" json:"source"`
	// Limits and timeouts of the proxy itself.
	Limits Limits `yaml:"limits" json:"limits"`
	// Log configures zap.
	Log Log `yaml:"log" json:"log"`
	// Tracing configures OpenTelemetry (off unless an endpoint is set).
	Tracing Tracing `yaml:"tracing" json:"tracing"`
	// UpstreamProxy is the outbound HTTP(S) proxy for upstream calls ("" = connect
	// directly; HTTPS_PROXY and the like in the environment are not used).
	UpstreamProxy string `yaml:"upstreamProxy" json:"upstreamProxy"`
	// State is where conversation state lives across requests (settled tool results and
	// prompts, deferred injections): memory by default, Redis for several replicas.
	State State `yaml:"state" json:"state"`
	// Shadow runs a second registration on every boundary the live chain settles, off
	// the request path, enforcing nothing: its settlements go to the audit log and metrics.
	Shadow Shadow `yaml:"shadow" json:"shadow"`
	// Capture records settled boundaries in full for `hookproxy replay`.
	Capture Capture `yaml:"capture" json:"capture"`
	// Approvals holds tool calls a policy asks a person about (on with the admin listener).
	Approvals Approvals `yaml:"approvals" json:"approvals"`
	// Pinning pins tool definitions (nil: off); see pinning.go.
	Pinning *Pinning `yaml:"pinning" json:"pinning"`

	// Path is the file this configuration was read from ("" for the embedded default);
	// a relative Registration is resolved against its directory.
	Path string `yaml:"-" json:"-"`
	// RegistrationInline is set instead of Registration when the configuration names no
	// registration file: the built-in default registration document (JSON). It is not a
	// file key.
	RegistrationInline []byte `yaml:"-" json:"-"`
}

// RegistrationNone is the value of the registration key that turns every policy off: a
// plain proxy. It must be written out; an omitted key means the built-in default chain.
const RegistrationNone = "none"

// Plain reports whether c runs no policies at all (`registration: none`).
func (c *Config) Plain() bool { return c.Registration == "" && len(c.RegistrationInline) == 0 }

// Route maps a path prefix to an upstream of one API kind.
type Route struct {
	Prefix   string `yaml:"prefix" json:"prefix"`
	API      string `yaml:"api" json:"api"`
	Upstream string `yaml:"upstream" json:"upstream"`
	// ServerID names the MCP server in tool.mcp.server.id (mcp routes; default: the prefix).
	ServerID string `yaml:"serverId" json:"serverId"`
	// AllowRedirects passes the upstream's 3xx redirects to the client. Off by default: a
	// client that follows one re-sends its original, unexamined body elsewhere.
	AllowRedirects bool `yaml:"allowRedirects" json:"allowRedirects"`
	// Unmapped says what an openai, anthropic or gemini route does with a POST, PUT or PATCH to an
	// endpoint it does not map (files, batches, audio, moderations, ...):
	// "refuse" (default: the input would reach the model unexamined) or "forward".
	Unmapped string `yaml:"unmapped" json:"unmapped"`
}

// Values of Route.Unmapped.
const (
	UnmappedRefuse  = "refuse"
	UnmappedForward = "forward"
)

// Audit configures the decision audit log.
type Audit struct {
	Path string `yaml:"path" json:"path"` // "" = off, "-" = stdout
	// QueueSize bounds the in-memory queue between request handling and the writer.
	QueueSize int `yaml:"queueSize" json:"queueSize"`
	// OnFull is "wait" (default: block up to WaitTimeout, then drop and count) or "drop".
	OnFull      string        `yaml:"onFull" json:"onFull"`
	WaitTimeout time.Duration `yaml:"waitTimeout" json:"waitTimeout"`
	// IncludeContent writes canonical content into audit records (off by default).
	IncludeContent bool `yaml:"includeContent" json:"includeContent"`
}

// Shadow configures the shadow chain (off unless Registration is set).
type Shadow struct {
	// Registration is the shadow's AHP registration document: a file (absolute, or
	// relative to this configuration), validated like the live one and reloaded with it.
	Registration string `yaml:"registration" json:"registration"`
}

// Capture configures the capture of settled boundaries (off unless Dir is set).
type Capture struct {
	Dir string `yaml:"dir" json:"dir"` // relative to this configuration
	// Sample is the fraction of sessions captured, 0 < sample <= 1 (default 1).
	Sample float64 `yaml:"sample" json:"sample"`
	// MaxBytes bounds one capture file (default 64 MiB); MaxAge the time it stays open
	// for writing (default 1h). Lines are never truncated.
	MaxBytes int64         `yaml:"maxBytes" json:"maxBytes"`
	MaxAge   time.Duration `yaml:"maxAge" json:"maxAge"`
	// Redact stores events after the built-in secrets redaction (default true).
	Redact *bool `yaml:"redact" json:"redact"`
}

// Enabled reports whether boundaries are captured.
func (c Capture) Enabled() bool { return c.Dir != "" }

// Redacting reports whether captured events are stored after secrets redaction.
func (c Capture) Redacting() bool { return c.Redact == nil || *c.Redact }

// Limits of the proxy.
type Limits struct {
	MaxRequestBytes       int64         `yaml:"maxRequestBytes" json:"maxRequestBytes"`             // default 32 MiB
	MaxResponseBytes      int64         `yaml:"maxResponseBytes" json:"maxResponseBytes"`           // held responses, default 64 MiB
	DialTimeout           time.Duration `yaml:"dialTimeout" json:"dialTimeout"`                     // default 10s
	TLSHandshakeTimeout   time.Duration `yaml:"tlsHandshakeTimeout" json:"tlsHandshakeTimeout"`     // default 10s
	ResponseHeaderTimeout time.Duration `yaml:"responseHeaderTimeout" json:"responseHeaderTimeout"` // default 10m
	ShutdownTimeout       time.Duration `yaml:"shutdownTimeout" json:"shutdownTimeout"`             // default 30s
	ObserveTimeout        time.Duration `yaml:"observeTimeout" json:"observeTimeout"`               // default 5s
	// A request body must arrive within RequestBodyGrace plus one second per
	// MinRequestBodyRate bytes received: a client trickling bytes cannot hold a connection.
	RequestBodyGrace   time.Duration `yaml:"requestBodyGrace" json:"requestBodyGrace"`     // default 10s
	MinRequestBodyRate int64         `yaml:"minRequestBodyRate" json:"minRequestBodyRate"` // bytes/s, default 16384
	// MaxConcurrentRequests caps the requests served at once (default 4096; beyond it 503).
	MaxConcurrentRequests int64 `yaml:"maxConcurrentRequests" json:"maxConcurrentRequests"`
	// MaxHeldBytes caps the request and response bodies held in memory at once, over all
	// requests (default 1 GiB; beyond it 503).
	MaxHeldBytes int64 `yaml:"maxHeldBytes" json:"maxHeldBytes"`
	// MaxPolicyScanBytes bounds the work of the built-in policies for one request, over
	// all of them and every boundary: the bytes their scanners examine, windows re-read
	// and regular-expression passes weighted by cost (default 1 GiB, about a second of
	// CPU; beyond it the request is refused with code hookproxy.limits.policy_work).
	MaxPolicyScanBytes int64 `yaml:"maxPolicyScanBytes" json:"maxPolicyScanBytes"`
}

// Log configures logging.
type Log struct {
	Level string `yaml:"level" json:"level"` // debug | info | warn | error (default info)
	// Format is auto (default: console lines when stderr is a terminal, JSON lines when
	// it is not, as under a service manager or in a container) | json | console.
	Format string `yaml:"format" json:"format"`
}

// Tracing configures OpenTelemetry export.
type Tracing struct {
	Endpoint    string  `yaml:"endpoint" json:"endpoint"` // OTLP/HTTP endpoint; "" = off
	Insecure    bool    `yaml:"insecure" json:"insecure"`
	ServiceName string  `yaml:"serviceName" json:"serviceName"`
	SampleRatio float64 `yaml:"sampleRatio" json:"sampleRatio"`
}

// State configures the conversation state store (package state). Whatever the backend,
// a tool result or prompt the store does not know is settled again as new: forgetting
// costs a repeated hook call, never a leak.
type State struct {
	Backend string `yaml:"backend" json:"backend"` // memory (default) | redis
	// OnStoreFailure says what a request does when the store cannot be read or written
	// (Redis down or slower than redis.timeoutMs): "re-settle" (default: treat every tool
	// result and prompt as unknown and run their hooks again) or "fail-closed" (refuse the
	// request with 503 hookproxy.state_unavailable).
	OnStoreFailure string      `yaml:"onStoreFailure" json:"onStoreFailure"`
	Memory         StateMemory `yaml:"memory" json:"memory"`
	Redis          StateRedis  `yaml:"redis" json:"redis"`
}

// StateMemory bounds the in-memory store.
type StateMemory struct {
	MaxSessions int           `yaml:"maxSessions" json:"maxSessions"` // default 10000; the least recently used goes
	TTL         time.Duration `yaml:"ttl" json:"ttl"`                 // from a session's last request, default 24h
}

// StateRedis configures the Redis store.
type StateRedis struct {
	URL string `yaml:"url" json:"url"` // redis://host:port/db or rediss:// (TLS); no password in it
	// PasswordEnv names the environment variable holding the Redis password (or ACL
	// user's password; the user goes in the URL). The password is never a literal.
	PasswordEnv string        `yaml:"passwordEnv" json:"passwordEnv"`
	KeyPrefix   string        `yaml:"keyPrefix" json:"keyPrefix"` // default "hookproxy:"
	TTL         time.Duration `yaml:"ttl" json:"ttl"`             // from a session's last request, default 24h
	TimeoutMs   int           `yaml:"timeoutMs" json:"timeoutMs"` // per store round trip, default 250
	TLS         StateTLS      `yaml:"tls" json:"tls"`
}

// StateTLS configures TLS to Redis (a rediss:// URL turns it on too).
type StateTLS struct {
	Enabled    bool   `yaml:"enabled" json:"enabled"`
	CAFile     string `yaml:"caFile" json:"caFile"`         // PEM CAs to trust ("" = system roots)
	ServerName string `yaml:"serverName" json:"serverName"` // expected certificate name ("" = the URL's host)
}

// Values of State.Backend and State.OnStoreFailure.
const (
	StateMemoryBackend = "memory"
	StateRedisBackend  = "redis"
	StateReSettle      = "re-settle"
	StateFailClosed    = "fail-closed"
)
