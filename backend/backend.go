package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/conformance"
)

// DefaultMaxFrameBytes caps one incoming message (HTTP body or stdio line). It matches the
// AHP Go SDK's frame limit; a larger message is refused, never truncated.
const DefaultMaxFrameBytes int64 = 4 << 20

// defaultObserveTimeout bounds the delivery of one observation to the policies. It is
// shorter than the chain's default because the harness waits for our 204 meanwhile.
const defaultObserveTimeout = 2 * time.Second

// Source is the AHP event source of events the backend itself creates (hook.failure
// reports of its policies, delivered only to observe subscriptions of the same document).
const Source = "urn:hookproxy:backend"

// Server is one AHP backend made of the in_process entries of a registration document. It
// is safe for concurrent use.
type Server struct {
	chain    *chain.Chain
	served   []string        // interceptable events some intercept subscription selects, catalogue order
	isServed map[string]bool // the same, as a set
	maxFrame int64
	token    string // required bearer token on HTTP; "" = none
	log      *zap.Logger
}

// Option configures a Server.
type Option func(*Server)

// WithBearerToken makes the HTTP binding require "Authorization: Bearer <token>" on every
// request (AHP-AUTH-001: a protected server rejects unauthorized requests before
// processing the event). It is for a backend reachable beyond loopback; the harness
// registers it with {"type": "bearer", "tokenEnv": ...}. An empty token requires nothing.
func WithBearerToken(token string) Option {
	return func(s *Server) { s.token = token }
}

// New builds the backend from the in_process entries of doc, in their order, served over
// HTTP (AHP-HTTP-001) or stdio (AHP-STDIO-001), each policy seeing the earlier ones'
// accepted edits (AHP-EDIT-001 chaining). Entries with another transport are skipped (and
// logged): a backend cannot forward to other backends on a harness's behalf. factories builds the policies by name (policies.Factories()).
// logger may be nil; it receives diagnostics only, never event content.
func New(doc *registration.Document, factories map[string]transport.PolicyFactory, logger *zap.Logger, opts ...Option) (*Server, error) {
	if doc == nil {
		return nil, errors.New("backend: nil registration document")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	own := &registration.Document{ProtocolVersion: doc.ProtocolVersion}
	for _, b := range doc.Hooks {
		if b.Transport.Type != registration.TransportInProcess {
			logger.Warn("backend: skipping a registration entry that is not in_process",
				zap.String("id", b.ID), zap.String("transport", b.Transport.Type))
			continue
		}
		own.Hooks = append(own.Hooks, b)
	}
	if len(own.Hooks) == 0 {
		return nil, errors.New("backend: the registration has no in_process entry to serve")
	}
	ch, err := chain.New(own, chain.Options{
		Source:         Source,
		Policies:       factories,
		ObserveTimeout: defaultObserveTimeout,
		Logger:         logger,
	})
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	s := &Server{chain: ch, isServed: map[string]bool{}, maxFrame: DefaultMaxFrameBytes, log: logger}
	for _, t := range ahp.EventTypes {
		if in, _ := ch.Subscribed(t); in && ahp.IsInterceptable(t) {
			s.served = append(s.served, t)
			s.isServed[t] = true
		}
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Events returns the event types the backend answers hooks/intercept for, in catalogue
// order. Any other event type is refused with -32002 (unsupported_event).
func (s *Server) Events() []string { return slices.Clone(s.served) }

// RequiresToken reports whether the HTTP binding requires a bearer token.
func (s *Server) RequiresToken() bool { return s.token != "" }

// Close releases the policies. It is idempotent.
func (s *Server) Close() error { return s.chain.Close() }

// outcome is the result of one message: a response frame, or none for a notification.
// rejected marks a notification that failed validation (HTTP answers it with 400).
type outcome struct {
	reply    []byte
	rejected bool
}

// respond classifies one message and answers it. The order of the checks decides the
// error code (AHP spec, base/errors.md "JSON-RPC errors"): unreadable JSON -32700; not a
// JSON-RPC request -32600; unknown method -32601; wrong protocolVersion -32001; an event this
// backend does not serve -32002; any other schema violation of the params -32602.
func (s *Server) respond(ctx context.Context, frame []byte) outcome {
	if !utf8.Valid(frame) {
		return replyError(nil, ahp.CodeParseError, "Parse error: the message is not valid UTF-8", nil)
	}
	msg, err := decodeOne(frame)
	if err != nil {
		return replyError(nil, ahp.CodeParseError, "Parse error: "+err.Error(), nil)
	}
	obj, isObj := msg.(map[string]any)
	if !isObj {
		if _, isArr := msg.([]any); isArr {
			return replyError(nil, ahp.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported; send one object per message", nil)
		}
		return replyError(nil, ahp.CodeInvalidRequest, "Invalid Request: the message must be a JSON-RPC object", nil)
	}

	rawID, hasID := obj["id"]
	id, idOK := requestID(rawID)
	if hasID && !idOK {
		return replyError(nil, ahp.CodeInvalidRequest, "Invalid Request: id must be a non-empty string or an integer", nil)
	}
	if v, _ := obj["jsonrpc"].(string); v != "2.0" {
		return replyError(id, ahp.CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`, nil)
	}
	method, _ := obj["method"].(string)
	if method == "" {
		return replyError(id, ahp.CodeInvalidRequest, "Invalid Request: method must be a non-empty string (this backend accepts requests and notifications, not responses)", nil)
	}

	if !hasID {
		switch method {
		case ahp.MethodObserve:
			return s.observe(ctx, frame, obj)
		case ahp.MethodIntercept, ahp.MethodCapabilities:
			return replyError(nil, ahp.CodeInvalidRequest, "Invalid Request: "+method+" is a request and needs an id", nil)
		}
		// JSON-RPC: a notification is never answered, not even when its method is unknown.
		s.log.Debug("backend: ignoring a notification of an unknown method", zap.String("method", truncate(method, 64)))
		return outcome{}
	}

	switch method {
	case ahp.MethodIntercept:
		return s.intercept(ctx, frame, id, obj)
	case ahp.MethodObserve:
		return replyError(id, ahp.CodeInvalidRequest, "Invalid Request: hooks/observe is a notification and carries no id", nil)
	case ahp.MethodCapabilities:
		// hooks/capabilities returns the harness manifest (AHP spec,
		// capability-auth.md "Discovery and honest capabilities"): it is
		// asked of the harness, and a backend owns no manifest to return.
		// The backend's own conformance claim (AHP-CORE-001) rides in error.data, under
		// its reverse-DNS key, so a caller learns what it reached without mistaking it
		// for a harness.
		return replyError(id, ahp.CodeMethodNotFound, "Method not found: hooks/capabilities is answered by the harness, not by a backend",
			map[string]conformance.Claim{conformance.ExtensionKey: conformance.Backend()})
	default:
		return replyError(id, ahp.CodeMethodNotFound, "Method not found", nil)
	}
}

// intercept answers one hooks/intercept request.
func (s *Server) intercept(ctx context.Context, frame []byte, id json.RawMessage, obj map[string]any) outcome {
	params, ok := obj["params"].(map[string]any)
	if !ok {
		return replyError(id, ahp.CodeInvalidParams, "Invalid params: params must be an object", nil)
	}
	pv, has := params["protocolVersion"]
	if !has {
		return replyError(id, ahp.CodeInvalidParams, "Invalid params: params.protocolVersion is required", nil)
	}
	if v, _ := pv.(string); v != ahp.ProtocolVersion {
		// AHP-VER-001: exact match; the error names what is supported.
		return replyError(id, ahp.CodeUnsupportedProtocolVersion, "Unsupported AHP protocol version",
			map[string]any{"supported": []string{ahp.ProtocolVersion}})
	}
	if ev, ok := params["event"].(map[string]any); ok {
		if typ, ok := ev["type"].(string); ok && !s.isServed[typ] {
			// Checked before the schema: an unknown or observe-only type is also
			// schema-invalid, but the protocol wants the defined error for it
			// (unsupported_event, AHP spec, base/errors.md "JSON-RPC errors").
			return replyError(id, ahp.CodeUnsupportedEvent, "Unsupported event: this backend does not intercept "+truncate(typ, 64),
				map[string]any{"supported": s.served})
		}
	}
	if err := ahp.ValidateDecodedMessage(frame, obj); err != nil {
		code, data := violationsOf(err)
		msg := "Invalid params"
		if code == ahp.CodeInvalidRequest {
			msg = "Invalid Request"
		}
		return replyError(id, code, msg, data)
	}
	var req struct {
		Params ahp.InterceptParams `json:"params"`
	}
	if err := json.Unmarshal(frame, &req); err != nil || req.Params.Event == nil || req.Params.Capabilities == nil {
		return replyError(id, ahp.CodeInvalidParams, "Invalid params: cannot decode the intercept request", nil)
	}
	ev, caps := req.Params.Event, req.Params.Capabilities

	// A harness that offers hookproxy.redact_text (hookproxy itself, when this backend is
	// its remote policy server) lets the policies redact in place where a whole-list
	// replace is withheld; the offer is passed on and the redactions are relayed.
	var ext []string
	if _, ok := req.Params.Extensions[ahp.ExtRedactText]; ok {
		ext = []string{ahp.ExtRedactText}
	}
	st := s.chain.Intercept(ctx, ev, *caps, ext...)
	// The hook call owns the observations its settlement started (chain.Settlement.Wait).
	defer st.Wait()
	if st.Interrupted {
		return replyError(id, ahp.CodeBackendUnavailable, "Backend unavailable: the evaluation was interrupted", nil)
	}
	for _, r := range st.Records {
		if r.Outcome == chain.OutcomeFailed {
			s.log.Warn("backend: policy failed", zap.String("backend", r.BackendID), zap.String("event", ev.Type),
				zap.String("kind", string(r.FailureKind)), zap.String("failurePolicy", r.Policy))
		}
	}
	effects, resExt, err := compose(ev, caps, st, len(ext) > 0)
	if err != nil {
		s.log.Error("backend: cannot encode the settlement as one reply", zap.String("event", ev.Type), zap.Error(err))
		return replyError(id, ahp.CodeBackendInternalError, "Backend internal error", nil)
	}
	reply, err := resultFrame(id, effects, resExt)
	if err == nil {
		// Self-check: the combined reply must pass the same whole-response validation a
		// harness applies, against the event as it was sent to us.
		err = checkReply(reply, ev, caps)
	}
	if err != nil {
		s.log.Error("backend: the combined reply is not valid AHP", zap.String("event", ev.Type), zap.Error(err))
		return replyError(id, ahp.CodeBackendInternalError, "Backend internal error", nil)
	}
	return outcome{reply: reply}
}

// observe delivers a hooks/observe notification to the matching observe subscriptions,
// bounded by the observation timeout. It never produces a reply.
func (s *Server) observe(ctx context.Context, frame []byte, obj map[string]any) outcome {
	if err := ahp.ValidateDecodedMessage(frame, obj); err != nil {
		s.log.Debug("backend: dropping an invalid hooks/observe notification", zap.Error(err))
		return outcome{rejected: true}
	}
	var n struct {
		Params ahp.ObserveParams `json:"params"`
	}
	if err := json.Unmarshal(frame, &n); err != nil || n.Params.Event == nil {
		return outcome{rejected: true}
	}
	s.chain.Observe(ctx, n.Params.Event)
	return outcome{}
}

// decodeOne decodes exactly one JSON value, numbers kept as json.Number.
func decodeOne(frame []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty message")
		}
		return nil, errors.New("not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// requestID returns the id re-encoded for the reply when it is a valid JSON-RPC request id
// for AHP: a non-empty string or an integer.
func requestID(x any) (json.RawMessage, bool) {
	switch v := x.(type) {
	case string:
		if v == "" {
			return nil, false
		}
		b, err := json.Marshal(v)
		return b, err == nil
	case json.Number:
		if _, err := v.Int64(); err != nil {
			return nil, false
		}
		return json.RawMessage(v.String()), true
	}
	return nil, false
}

// maxReportedViolations bounds error data: enough to fix a hand-written request, never an
// echo of a large invalid message.
const maxReportedViolations = 5

// violationsOf picks the error code for a ValidateMessage failure: problems of the
// envelope (outside params) are an invalid request, the rest invalid params. The data
// lists where and why; violation texts name paths and types, not content.
func violationsOf(err error) (int, map[string]any) {
	var ve *ahp.ValidationError
	if !errors.As(err, &ve) {
		return ahp.CodeInvalidParams, nil
	}
	code := ahp.CodeInvalidParams
	list := make([]violation, 0, maxReportedViolations)
	for i, v := range ve.Violations {
		if v.Path != "params" && !strings.HasPrefix(v.Path, "params.") && !strings.HasPrefix(v.Path, "params[") {
			code = ahp.CodeInvalidRequest
		}
		if i < maxReportedViolations {
			list = append(list, violation{Path: v.Path, Message: truncate(v.Message, 200)})
		}
	}
	return code, map[string]any{"violations": list}
}

// violation is one entry of an invalid-params error's data.
type violation struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary so the text stays valid UTF-8.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
