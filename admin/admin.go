package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/conformance"
)

// Options configure the admin handler. Zero values are usable.
type Options struct {
	// Ready reports whether the proxy can serve: configuration loaded, persistent stdio
	// backends running. nil error = ready. A nil Ready counts as ready, because the admin
	// listener is only started once the configuration has loaded.
	Ready func() error
	// Metrics serves GET /metrics (typically (*metrics.Metrics).Handler()); nil = 404.
	Metrics http.Handler
	// Manifest overrides the served manifest, e.g. narrowed to the configured routes.
	// nil = Manifest().
	Manifest *CapabilityManifest
	// Logger receives diagnostics about rejected discovery requests (default: no-op).
	Logger *zap.Logger
	// Auth guards the Protected routes (nil = no token: loopback clients only).
	Auth *Auth
	// Protected registers the endpoints that change state or show held calls
	// (approvals, ...); every one is served behind Auth.
	Protected func(r chi.Router)
	// Console, when set, serves the console at /ui/ (NewConsole).
	Console *ConsoleOptions
}

// maxRPCBytes bounds a discovery request; a hooks/capabilities request is ~100 bytes.
const maxRPCBytes = 64 << 10

// New returns the admin handler:
//
//	GET  /               a short JSON index of these endpoints
//	GET  /healthz        200 "ok" while the process is alive
//	GET  /readyz         200 "ok" when Ready returns nil, else 503 with the reason
//	GET  /metrics        Prometheus exposition (when Options.Metrics is set)
//	POST /  and  /ahp    JSON-RPC hooks/capabilities (capability discovery)
//	GET  /ahp/manifest   the same manifest, pretty-printed for people
//	GET  /ui/            the console (when Options.Console is set)
func New(opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	m := Manifest()
	if opts.Manifest != nil {
		m = *opts.Manifest
	}
	// The manifest is static for the handler's life: encode it once.
	manifestJSON, err := json.Marshal(m)
	if err != nil {
		// Only reachable through a programming error in Manifest; fail loudly at startup.
		panic("admin: encode manifest: " + err.Error())
	}
	pretty, _ := json.MarshalIndent(m, "", "  ")
	pretty = append(pretty, '\n')

	h := &handler{ready: opts.Ready, log: log, manifest: manifestJSON}
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	r.Get("/readyz", h.readyz)
	if opts.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", opts.Metrics)
	}
	r.Post("/", h.capabilities)
	r.Post("/ahp", h.capabilities)
	if opts.Protected != nil {
		r.Group(func(pr chi.Router) {
			pr.Use(opts.Auth.Wrap)
			opts.Protected(pr)
		})
	}
	// GET / is a short index for whoever opens the admin address in a browser or curl.
	index := map[string]string{
		"GET /healthz":      "200 while the process is alive",
		"GET /readyz":       "200 when the configuration is loaded and persistent backends run, else 503 with the reason",
		"GET /ahp/manifest": "the AHP capability manifest, for people",
		"POST /":            "JSON-RPC hooks/capabilities (also POST /ahp)",
	}
	if opts.Metrics != nil {
		index["GET /metrics"] = "Prometheus metrics"
	}
	if opts.Console != nil {
		co := *opts.Console
		if co.Logger == nil {
			co.Logger = log.Named("console")
		}
		co.Auth = opts.Auth
		if co.Approvals == nil && opts.Protected != nil {
			// The console calls the protected API in-process for a caller it has already
			// authorized (Bearer, session cookie or loopback), so it gets the routes
			// without the guard.
			api := chi.NewRouter()
			opts.Protected(api)
			co.Approvals = api
		}
		r.Mount("/ui", NewConsole(co))
		index["GET /ui/"] = "the console: live decisions, sessions, approvals, health (for people, in a browser)"
	}
	indexJSON, _ := json.MarshalIndent(map[string]any{"service": "hookproxy admin", "endpoints": index}, "", "  ")
	indexJSON = append(indexJSON, '\n')
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(indexJSON)
	})
	r.Get("/ahp/manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(pretty)
	})
	return r
}

type handler struct {
	ready    func() error
	log      *zap.Logger
	manifest json.RawMessage
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (h *handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if h.ready != nil {
		if err := h.ready(); err != nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
			return
		}
	}
	writeText(w, http.StatusOK, "ok")
}

// rpcResponse is one JSON-RPC response frame. ID is the request's id verbatim, or null
// when it could not be determined (JSON-RPC 2.0 §5).
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *ahp.RPCError   `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// capabilities serves hooks/capabilities over the AHP HTTP binding: HTTP-level problems
// get HTTP statuses (like an AHP HTTP backend); everything inside a readable body gets a
// JSON-RPC answer in a 200.
func (h *handler) capabilities(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Encoding") != "" {
		http.Error(w, "content encodings are not accepted", http.StatusUnsupportedMediaType)
		return
	}
	if cts := r.Header.Values("Content-Type"); len(cts) != 1 || !isJSON(cts[0]) {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRPCBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "unreadable request body", http.StatusBadRequest)
		return
	}
	resp := h.dispatch(body)
	if resp == nil { // a notification: JSON-RPC never answers one
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if resp.Error != nil {
		h.log.Debug("admin: rejected discovery request", zap.Int("code", resp.Error.Code), zap.String("message", resp.Error.Message))
	}
	out, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// dispatch answers one JSON-RPC frame; nil means no answer (a notification).
func (h *handler) dispatch(body []byte) *rpcResponse {
	fail := func(id json.RawMessage, code int, msg string, data json.RawMessage) *rpcResponse {
		return &rpcResponse{JSONRPC: "2.0", ID: id, Error: &ahp.RPCError{Code: code, Message: msg, Data: data}}
	}
	if !utf8.Valid(body) || !json.Valid(body) {
		return fail(nullID, ahp.CodeParseError, "Parse error", nil)
	}
	body = bytes.TrimSpace(body)
	if body[0] != '{' {
		// Arrays are batches, which AHP forbids; anything else is not a request object.
		return fail(nullID, ahp.CodeInvalidRequest, "Invalid Request: one JSON-RPC object expected", nil)
	}
	var frame map[string]json.RawMessage
	if err := json.Unmarshal(body, &frame); err != nil {
		return fail(nullID, ahp.CodeInvalidRequest, "Invalid Request", nil)
	}

	rawID, hasID := frame["id"]
	id := nullID
	if hasID {
		if !validID(rawID) {
			return fail(nullID, ahp.CodeInvalidRequest, "Invalid Request: id must be a non-empty string or an integer", nil)
		}
		var buf bytes.Buffer
		_ = json.Compact(&buf, rawID)
		id = buf.Bytes()
	}
	var version, method string
	if err := json.Unmarshal(frame["jsonrpc"], &version); err != nil || version != "2.0" {
		return fail(id, ahp.CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`, nil)
	}
	if err := json.Unmarshal(frame["method"], &method); err != nil || method == "" {
		return fail(id, ahp.CodeInvalidRequest, "Invalid Request: method must be a non-empty string", nil)
	}
	if !hasID {
		return nil
	}
	if method != ahp.MethodCapabilities {
		return fail(id, ahp.CodeMethodNotFound, "Method not found", nil)
	}

	rawParams, ok := frame["params"]
	var params map[string]json.RawMessage
	if !ok || bytes.TrimSpace(rawParams)[0] != '{' || json.Unmarshal(rawParams, &params) != nil {
		return fail(id, ahp.CodeInvalidParams, "Invalid params: params must be an object", nil)
	}
	rawVersion, ok := params["protocolVersion"]
	var pv string
	if !ok || json.Unmarshal(rawVersion, &pv) != nil {
		return fail(id, ahp.CodeInvalidParams, "Invalid params: protocolVersion must be a string", nil)
	}
	// The version is checked before the closed-params rule: a caller speaking another
	// snapshot (whose params may differ) learns which one to use.
	if pv != ahp.ProtocolVersion {
		return fail(id, ahp.CodeUnsupportedProtocolVersion, "Unsupported AHP protocol version",
			json.RawMessage(`{"supported":["`+ahp.ProtocolVersion+`"]}`))
	}
	if len(params) != 1 {
		return fail(id, ahp.CodeInvalidParams, "Invalid params: hooks/capabilities params admit only protocolVersion", nil)
	}

	// The conformance claim (AHP-CORE-001) travels as a reverse-DNS extension of the
	// result (AHP-EXT-001): discovery clients that do not know it ignore it.
	result, err := json.Marshal(struct {
		ProtocolVersion string                       `json:"protocolVersion"`
		Manifest        json.RawMessage              `json:"manifest"`
		Extensions      map[string]conformance.Claim `json:"extensions"`
	}{ahp.ProtocolVersion, h.manifest, map[string]conformance.Claim{conformance.ExtensionKey: conformance.Harness()}})
	if err != nil {
		return fail(id, ahp.CodeBackendInternalError, "Internal error", nil)
	}
	return &rpcResponse{JSONRPC: "2.0", ID: id, Result: result}
}

// validID accepts what common.schema.json#/$defs/jsonRpcId allows: a non-empty string
// or an integer (integer-valued numbers such as 1.0 included, as in JSON Schema).
func validID(raw json.RawMessage) bool {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return false
	}
	switch x := v.(type) {
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == float64(int64(f))
	}
	return false
}
