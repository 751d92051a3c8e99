package registration

import "encoding/json"

// Transport types.
const (
	TransportHTTP      = "http"
	TransportStdio     = "stdio"
	TransportInProcess = "in_process"

	LifecyclePersistent = "persistent"
	LifecyclePerEvent   = "per_event"

	ModeIntercept = "intercept"
	ModeObserve   = "observe"

	FailOpen   = "fail-open"
	FailClosed = "fail-closed"
)

// Document is a parsed registration document. Hooks order is interceptor order.
type Document struct {
	ProtocolVersion string    `json:"protocolVersion"`
	Hooks           []Backend `json:"hooks"`
}

// Backend is one entry of the ordered hooks array.
type Backend struct {
	ID             string          `json:"id"`
	Transport      Transport       `json:"transport"`
	Authentication *Authentication `json:"authentication,omitempty"`
	Subscriptions  []Subscription  `json:"subscriptions"`
}

// Transport is the union of the stdio, http and in_process transports.
type Transport struct {
	Type string `json:"type"`
	// http
	URL string `json:"url,omitempty"`
	// stdio
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Lifecycle string   `json:"lifecycle,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	// in_process
	Policy string          `json:"policy,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
}

// Authentication is the bearer or oauth binding of an http backend. Secrets are only ever
// referenced (tokenEnv / tokenRef / clientSecretRef), never written in the document.
type Authentication struct {
	Type            string   `json:"type"`
	TokenEnv        string   `json:"tokenEnv,omitempty"`
	TokenRef        string   `json:"tokenRef,omitempty"`
	Issuer          string   `json:"issuer,omitempty"`
	Resource        string   `json:"resource,omitempty"`
	ClientID        string   `json:"clientId,omitempty"`
	Flow            string   `json:"flow,omitempty"`
	Scopes          []string `json:"scopes,omitempty"`
	ClientSecretRef string   `json:"clientSecretRef,omitempty"`
}

// Subscription selects events and a delivery mode. TimeoutMs and FailurePolicy are set
// only on intercept subscriptions. Content maps a category (or "default") to a selection.
type Subscription struct {
	Events        []string          `json:"events"`
	Mode          string            `json:"mode"`
	TimeoutMs     int               `json:"timeoutMs,omitempty"`
	FailurePolicy string            `json:"failurePolicy,omitempty"`
	Content       map[string]string `json:"content"`
	IncludeNative bool              `json:"includeNative,omitempty"`
	Upload        *Upload           `json:"upload,omitempty"`
	Filters       *Filters          `json:"filters,omitempty"`
	Scope         string            `json:"scope,omitempty"`
	Disableable   *bool             `json:"disableable,omitempty"`
}

// Upload configures the binary upload binding of a subscription.
type Upload struct {
	Endpoint  string          `json:"endpoint"`
	TimeoutMs int             `json:"timeoutMs"`
	MaxBytes  int64           `json:"maxBytes"`
	Auth      *Authentication `json:"auth,omitempty"`
}

// Filters are optimization hints only; they never drop a call.
type Filters struct {
	ToolKinds []string `json:"toolKinds,omitempty"`
	Paths     []string `json:"paths,omitempty"`
}

// Matches reports whether the subscription's events select eventType: an exact name, "*",
// or a whole-family wildcard such as "model.*". For intercept subscriptions a wildcard
// selects only interceptable events; the caller checks that with ahp.IsInterceptable.
func (s *Subscription) Matches(eventType string) bool {
	for _, e := range s.Events {
		if e == eventType || e == "*" {
			return true
		}
		if n := len(e); n > 2 && e[n-2:] == ".*" {
			fam := e[:n-1] // "model."
			if len(eventType) > len(fam) && eventType[:len(fam)] == fam {
				return true
			}
		}
	}
	return false
}
