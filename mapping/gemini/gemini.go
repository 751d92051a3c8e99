package gemini

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/mapping"
)

// Provider and tool path of this API (the manifest's toolPaths name them).
const (
	ProviderName = "gemini"
	ToolPath     = "hookproxy.gemini.generate_content"
)

// Methods of the model resource that the translator maps.
const (
	MethodGenerate       = "generateContent"
	MethodStreamGenerate = "streamGenerateContent"
	MethodCountTokens    = "countTokens"
)

// Endpoint is one mapped Gemini call: the model resource and the method named in the path,
// and whether a stream is asked for as server-sent events (alt=sse).
type Endpoint struct {
	Version string // v1, v1beta, v1alpha; v1beta1 on Vertex AI
	Model   string // the model id, without "models/"
	Method  string // one of the Method* constants
	SSE     bool   // streamGenerateContent with alt=sse
}

// Stream reports whether the endpoint streams its answer.
func (e Endpoint) Stream() bool { return e.Method == MethodStreamGenerate }

// RequestOnly reports whether the endpoint carries model input but no model answer the
// chain maps (token counting): it is examined at model.request.before only.
func (e Endpoint) RequestOnly() bool { return e.Method == MethodCountTokens }

// ParseEndpoint reads a mapped Gemini endpoint from a path (after the route prefix) and
// the request's alt query parameter. The Gemini API serves /{version}/models/{model}:{method}
// and /{version}/tunedModels/{model}:{method}; Vertex AI serves the same calls under
// /{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}
// (and /{version}/publishers/{publisher}/models/{model} in express mode). The method is
// matched without regard to case, as an endpoint examined too often is safe and one
// examined too rarely is not.
func ParseEndpoint(path string, alt string) (Endpoint, bool) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return Endpoint{}, false
	}
	segs := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if len(segs) < 3 {
		return Endpoint{}, false
	}
	version := strings.ToLower(segs[0])
	switch version {
	case "v1", "v1beta", "v1alpha", "v1beta1":
	default:
		return Endpoint{}, false
	}
	coll := segs[1 : len(segs)-1]
	switch {
	case len(coll) == 1 && (strings.EqualFold(coll[0], "models") || strings.EqualFold(coll[0], "tunedModels")):
	case len(coll) == 3 && strings.EqualFold(coll[0], "publishers") && strings.EqualFold(coll[2], "models"):
	case len(coll) == 7 && strings.EqualFold(coll[0], "projects") && strings.EqualFold(coll[2], "locations") &&
		strings.EqualFold(coll[4], "publishers") && strings.EqualFold(coll[6], "models"):
	default:
		return Endpoint{}, false
	}
	model, method, ok := strings.Cut(segs[len(segs)-1], ":")
	if !ok || model == "" {
		return Endpoint{}, false
	}
	for _, s := range coll {
		if s == "" {
			return Endpoint{}, false
		}
	}
	e := Endpoint{Version: version, Model: model}
	switch strings.ToLower(method) {
	case strings.ToLower(MethodGenerate):
		e.Method = MethodGenerate
	case strings.ToLower(MethodStreamGenerate):
		e.Method = MethodStreamGenerate
		e.SSE = strings.EqualFold(alt, "sse")
	case strings.ToLower(MethodCountTokens):
		e.Method = MethodCountTokens
	default:
		return Endpoint{}, false
	}
	if strings.EqualFold(coll[0], "tunedModels") {
		e.Model = "tunedModels/" + model
	}
	return e, true
}

// Translator is the translator of one Gemini endpoint. It is stateless and safe for
// concurrent use.
type Translator struct {
	ep Endpoint
}

var (
	_ mapping.Translator    = (*Translator)(nil)
	_ mapping.StreamEditing = (*Translator)(nil)
)

// For returns the translator of an endpoint.
func For(ep Endpoint) *Translator { return &Translator{ep: ep} }

// New returns a translator for plain generateContent calls of no particular model: it
// renders the route's own errors.
func New() *Translator { return &Translator{ep: Endpoint{Method: MethodGenerate}} }

// Endpoint is the endpoint the translator is bound to.
func (t *Translator) Endpoint() Endpoint { return t.ep }

// Provider is the model.provider value.
func (*Translator) Provider() string { return ProviderName }

// ToolPath is the event path of tool calls seen through this API.
func (*Translator) ToolPath() string { return ToolPath }

// TerminalFinishReason is the finish reason of a turn that ended without pending calls:
// Gemini reports STOP for a final answer and for function calls alike.
func (*Translator) TerminalFinishReason() string { return "STOP" }

// arrayStream reports whether the answer is the JSON-array stream (no alt=sse).
func (t *Translator) arrayStream() bool { return t.ep.Stream() && !t.ep.SSE }

// statusNames are the google.rpc status names of the HTTP statuses hookproxy answers with.
var statusNames = map[int]string{
	http.StatusBadRequest:            "INVALID_ARGUMENT",
	http.StatusUnauthorized:          "UNAUTHENTICATED",
	http.StatusForbidden:             "PERMISSION_DENIED",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusMethodNotAllowed:      "UNIMPLEMENTED",
	http.StatusRequestTimeout:        "DEADLINE_EXCEEDED",
	http.StatusUpgradeRequired:       "FAILED_PRECONDITION",
	http.StatusConflict:              "ABORTED",
	http.StatusRequestEntityTooLarge: "INVALID_ARGUMENT",
	http.StatusTooManyRequests:       "RESOURCE_EXHAUSTED",
	http.StatusInternalServerError:   "INTERNAL",
	http.StatusNotImplemented:        "UNIMPLEMENTED",
	http.StatusBadGateway:            "UNAVAILABLE",
	http.StatusServiceUnavailable:    "UNAVAILABLE",
	http.StatusGatewayTimeout:        "DEADLINE_EXCEEDED",
}

// ErrorBody renders an error as Gemini does, so a refusal reads like Gemini's own:
// {"error":{"code":403,"message":"...","status":"PERMISSION_DENIED"}}. Gemini's status is
// the google.rpc code name of the HTTP status; errType does not fit there, so a non-empty
// code travels in an ErrorInfo detail, where Google's own errors put their reason.
func (*Translator) ErrorBody(status int, errType, code, message string) []byte {
	name := statusNames[status]
	if name == "" {
		name = "UNKNOWN"
		if status >= 500 {
			name = "INTERNAL"
		}
	}
	b := append([]byte(`{"error":{"code":`), strconv.Itoa(status)...)
	b = append(b, `,"message":`...)
	b = jsontext.AppendString(b, message)
	b = append(b, `,"status":`...)
	b = jsontext.AppendString(b, name)
	if code != "" {
		b = append(b, `,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":`...)
		b = jsontext.AppendString(b, code)
		b = append(b, `,"domain":"hookproxy"}]`...)
	}
	return append(b, "}}"...)
}

// statusForName is the HTTP status of a google.rpc status name (in-stream errors).
var statusForName = map[string]int{
	"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400,
	"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ABORTED": 409,
	"ALREADY_EXISTS": 409, "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499, "INTERNAL": 500,
	"UNKNOWN": 500, "DATA_LOSS": 500, "UNIMPLEMENTED": 501, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
}

// derive hashes parts into an id with a prefix and 80 bits of hash (mapping.HashID).
func derive(prefix string, parts ...string) string { return mapping.HashID(prefix, 10, parts...) }

// partID is the id of the n-th part of message msgID.
func partID(msgID string, n int) string { return msgID + ".p" + strconv.Itoa(n) }
