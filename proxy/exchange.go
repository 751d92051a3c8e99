package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/mapping"
)

// exchange is the per-request scope of one boundary request: the decoded native request,
// the canonical identities derived from it, the effective message list as boundaries edit
// it, and what the response side needs later. It lives for one HTTP request.
type exchange struct {
	rt   *route
	s    *Server
	tr   mapping.Translator
	ctx  context.Context
	subs subscriptions

	req       *mapping.Request
	items     []ahp.Message         // effective request list
	changed   bool                  // items differ from req.Items: render with EncodeRequest
	paramReds []ahp.ParamsRedaction // settled redactions of the request's params (params_redact.go)
	parents   map[string]string     // derived tool.before id → the event it stands for (store.go)
	outBody   []byte                // the body sent upstream
	session   ahp.Session
	turn      ahp.Turn
	model     ahp.Model
	modelGaps []ahp.Gap
	attempt   ahp.Attempt
	principal string       // hash of the client's credentials; scopes store keys, never sent
	secrets   []string     // the client's credential values, to scrub provider error text
	rw        rewriteState // settlement records re-applied and made (rewrites.go)

	settlements []*chain.Settlement
	observing   sync.WaitGroup // observe-only deliveries started by this request

	// response side
	upstreamStart    time.Time
	tap              *bodyTap // copy of a streamed-through body, for observers
	errTap           *bodyTap // head of an upstream error body, for model.error
	streamErr        *mapping.UpstreamError
	streamErrLatency time.Duration
	final            *finalResponse   // what the client received, for turn.end
	held             enforcement.Held // for the audit record
	responseAfterID  string           // model.response.after's id when it is observed after a stream
	streamStopped    bool             // a streamed tool call stopped the flow
	heldResponse     int64            // bytes of a held response counted in the server's budget
	streamHeld       int64            // bytes a stream editor holds, counted likewise (holdStream)
	requestOnly      bool             // count_tokens, embeddings, legacy completions: model.request.before only
	retrieve         bool             // a GET that reads back a held response: outBody is its checked parameters body, or nil
}

// finalResponse is the response the client received, as canonical content.
type finalResponse struct {
	items        []ahp.Message
	hasToolCalls bool
	stopped      bool
}

// serveBoundaries is the boundary pipeline of one translated request.
func (rt *route) serveBoundaries(w http.ResponseWriter, r *http.Request, ep endpoint, subs subscriptions) {
	x, err := rt.newExchange(r, ep.tr, subs, ep.pathModel)
	if err != nil {
		rt.s.writeError(w, r, rt, err)
		return
	}
	x.requestOnly = ep.requestOnly
	// The decoded request is held until the exchange ends: it counts against the
	// server-wide budget.
	n := int64(len(x.req.Original))
	if !rt.s.hold(n) {
		rt.s.writeError(w, r, rt, rt.overloaded("bytes held in memory (limits.maxHeldBytes)"))
		return
	}
	defer func() { rt.s.release(n + x.heldResponse) }()
	// A hook call owns the observations it dispatched: they finish within the request.
	defer x.waitObservers()

	out := x.requestSide()
	switch out.kind {
	case outcomeInterrupted:
		return
	case outcomeRefused:
		rt.s.writeError(w, r, rt, out.err)
		return
	case outcomeSupplied, outcomeStopped:
		x.answerLocally(w, r, out)
		return
	}
	rt.rp.ServeHTTP(w, r.WithContext(withState(r.Context(), &requestState{x: x})))
	x.afterDelivery()
}

// pathModel is the model the path names (an Azure deployment): it is model.id, and the
// request's model when the body names none.
func (rt *route) newExchange(r *http.Request, tr mapping.Translator, subs subscriptions, pathModel string) (*exchange, error) {
	limit := rt.s.limits.MaxRequestBytes
	if r.ContentLength > limit {
		return nil, rt.tooLarge(limit)
	}
	body, err := readAllLimited(r.Body, limit, r.ContentLength)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return nil, rt.tooLarge(limit)
	case errors.Is(err, errBodyTooSlow):
		return nil, rt.bodyTooSlow()
	case err != nil && r.Context().Err() != nil:
		return nil, errInterrupted
	case err != nil:
		return nil, rt.badRequest("the request body could not be read", err)
	}
	if len(r.Header.Values("Content-Encoding")) > 0 {
		// The chain judges the decoded body, and the decoded body is what goes upstream
		// (content_coding.go).
		if body, err = decodeRequestBody(r.Header, body, limit); err != nil {
			return nil, rt.requestCodingError(err)
		}
		r.Header.Del("Content-Encoding")
	}
	req, err := tr.DecodeRequest(body)
	if err != nil || req == nil {
		// No hook is called for a body the translator cannot read.
		var br *mapping.BadRequest
		if errors.As(err, &br) {
			return nil, rt.badRequest(br.Reason, err)
		}
		return nil, rt.badRequest("malformed request body", err)
	}
	if req.Original == nil {
		req.Original = body
	}
	// The in-process policies share one work budget over every boundary of the exchange
	// (limits.maxPolicyScanBytes).
	ctx := withPolicyBudget(r.Context(), rt.s.limits)
	x := &exchange{rt: rt, s: rt.s, tr: tr, ctx: ctx, subs: subs, req: req}
	x.items = append([]ahp.Message(nil), req.Items...)
	x.session = sessionFor(r.Header, tr.Provider(), req)
	x.turn = turnFor(x.session.ID, req.Items)
	if req.Model == "" {
		req.Model = pathModel
	}
	x.model = ahp.Model{ID: req.Model, Provider: tr.Provider()}
	if pathModel != "" {
		// Azure serves the deployment the path names, whatever the body's model says:
		// model.id is what is served, so that an allow list over model.id judges it (the
		// body's model stays visible in params).
		x.model.ID = pathModel
	}
	if x.model.ID == "" {
		x.model.ID = "unknown"
		x.modelGaps = []ahp.Gap{{Path: "model.id", Reason: "the request names no model"}}
	}
	x.attempt = ahp.Attempt{ID: "att_" + randomHex() + "-1", Number: 1, Synthesized: true}
	x.principal, x.secrets = credentialsOf(r.Header)
	if r.URL.RawQuery != "" {
		n := len(x.secrets)
		x.secrets = querySecrets(r.URL.Query(), x.secrets)
		if len(x.secrets) > n {
			// a ?key= credential (Gemini) scopes the store like a header credential
			x.principal = derive("", append([]string{x.principal}, x.secrets[n:]...)...)
		}
	}
	return x, nil
}

// credentialHeaders carry client credentials. Their values are forwarded untouched and
// otherwise only hashed (store scoping) or used to scrub error text; never logged.
// X-Goog-Api-Key is Gemini's (and Azure's api-key is Api-Key): they scope the store as the
// others do, so two Gemini tenants never share remembered rewrites or injections.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Proxy-Authorization"}

// echoedHeaders carry values an upstream may echo in an error body and that must not
// reach events either: cookies, OpenAI organization and project ids. They do
// not scope the store.
var echoedHeaders = []string{"Cookie", "Openai-Organization", "Openai-Project", "Anthropic-Admin-Key"}

// credentialQueryKeys are query parameters that carry a key (?key= for Gemini).
var credentialQueryKeys = []string{"key", "api_key", "api-key"}

func credentialsOf(h http.Header) (principal string, secrets []string) {
	parts := make([]string, 0, len(credentialHeaders))
	addSecret := func(v string) {
		secrets = append(secrets, v)
		if _, tok, ok := strings.Cut(v, " "); ok && tok != "" {
			secrets = append(secrets, strings.TrimSpace(tok))
		}
	}
	for _, name := range credentialHeaders {
		v := h.Get(name)
		parts = append(parts, v)
		if v != "" {
			addSecret(v)
		}
	}
	for _, name := range echoedHeaders {
		for _, v := range h.Values(name) {
			if name == "Cookie" {
				for _, c := range strings.Split(v, ";") {
					if _, val, ok := strings.Cut(c, "="); ok && strings.TrimSpace(val) != "" {
						secrets = append(secrets, strings.TrimSpace(val))
					}
				}
				continue
			}
			if v != "" {
				addSecret(v)
			}
		}
	}
	return derive("", parts...), secrets
}

// querySecrets adds the credential values of a request's query to secrets.
func querySecrets(q url.Values, secrets []string) []string {
	for _, k := range credentialQueryKeys {
		for _, v := range q[k] {
			if v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	return secrets
}

// keyLike matches API-key-shaped tokens that providers echo (partly masked) in errors.
var keyLike = regexp.MustCompile(`\b(?:sk|pk|rk|key)-[A-Za-z0-9_*\-]{4,}`)

// scrub removes the client's credentials, and anything shaped like an API key, from
// provider error text before it enters an event (credentials never appear in hook events).
func (x *exchange) scrub(s string) string {
	for _, sec := range x.secrets {
		if len(sec) >= 8 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}

// newEvent starts an event of this exchange with a fresh identity.
func (x *exchange) newEvent(typ string) *ahp.Event {
	sess, turn := x.session, x.turn
	return &ahp.Event{ID: ahp.NewEventID(), Source: x.s.source, Type: typ, Time: eventTime(),
		Session: &sess, Turn: &turn}
}

// settle runs one interceptable boundary through the chain. With only observers
// subscribed the chain settles at once and dispatches the observations.
func (x *exchange) settle(ev *ahp.Event, caps ahp.Capabilities, ext ...string) *chain.Settlement {
	st := settledOrNone(x.s.intercept(x.ctx, ev, caps, ext...), ev)
	x.settlements = append(x.settlements, st)
	return st
}

// observe delivers an observe-only event and records it. Delivery runs concurrently so
// that a slow observer never delays the response it describes; the request still owns it
// and waits for it before completing (AHP spec, base/composition.md "Observers"). ev must not
// change afterwards.
func (x *exchange) observe(ev *ahp.Event, callID, toolName string) {
	x.s.traceObserved(x.ctx, ev)
	x.observing.Go(func() { x.s.chain.Observe(x.ctx, ev) })
	x.audit(ev, nil, DeliveryObserve, enforcement.Forwarded, callID, toolName)
}

// waitObservers returns once every observation this request started has completed or
// reached its bounded deadline: no delivery outlives the request.
func (x *exchange) waitObservers() {
	for _, st := range x.settlements {
		st.Wait()
	}
	x.observing.Wait()
}

// audit hands the enforced boundary to the Auditor.
func (x *exchange) audit(ev *ahp.Event, st *chain.Settlement, delivery string, action enforcement.Action, callID, toolName string) {
	if x.s.auditor == nil {
		return
	}
	rec := BoundaryRecord{
		Time: time.Now().UTC(), Route: x.rt.prefix, API: x.rt.api,
		EventID: ev.ID, EventType: ev.Type, ParentID: ev.ParentEventID,
		SessionID: x.session.ID, TurnID: x.turn.ID, CallID: callID, ToolName: toolName,
		Delivery: delivery, Enforcement: action, Event: ev,
		Permission: ahp.PermissionNone, Flow: ahp.FlowNone,
	}
	if ev.Model != nil {
		rec.Model = ev.Model.ID
	}
	switch ev.Type {
	case ahp.EventModelRequestBefore:
		rec.Reapplied = x.rw.applied
	case ahp.EventToolAfter, ahp.EventTurnStart:
		rec.Resettled = x.rw.resettling
	case ahp.EventModelResponseAfter, ahp.EventToolBefore, ahp.EventTurnFinishBefore:
		rec.Held = x.held
		if rec.Held == "" {
			rec.Held = enforcement.HeldWhole // a JSON answer, or a supplied one, is decided before it is sent
		}
	}
	rec.settled(st)
	x.s.auditor.OnBoundary(x.ctx, rec)
}

// injections turns a settlement's accepted inject effects into messages with fresh
// identities (new injected items get new identities), split by
// delivery time. Fresh ids also keep an injected item from being mistaken for an
// existing native message when the request is re-rendered.
func (x *exchange) injections(st *chain.Settlement, eventID string) (now, nextTurn []ahp.Message) {
	for i, eff := range st.Injections {
		var msgs []ahp.Message
		if err := json.Unmarshal(eff.Value, &msgs); err != nil {
			// The chain validated the value; this would be an engine defect.
			x.s.logAt(x.ctx, zapcore.ErrorLevel, "accepted inject effect is not a message list", zap.String("event", eventID), zap.Error(err))
			continue
		}
		for j := range msgs {
			m := &msgs[j]
			m.ID = derive("inj_", eventID, strconv.Itoa(i), strconv.Itoa(j))
			m.Synthesized = true
			for k := range m.Parts {
				m.Parts[k].ID = m.ID + "." + strconv.Itoa(k)
				m.Parts[k].Synthesized = true
			}
		}
		if eff.DeliverAt == ahp.DeliverNextTurn {
			nextTurn = append(nextTurn, msgs...)
		} else {
			now = append(now, msgs...)
		}
	}
	return now, nextTurn
}

// prepareOutbound sets the rendered body on the upstream request (reverse proxy Rewrite).
func (x *exchange) prepareOutbound(out *http.Request) {
	if x.retrieve && len(x.outBody) == 0 {
		out.Body, out.GetBody, out.ContentLength = http.NoBody, nil, 0
		out.Header.Del("Content-Length")
		out.Header.Del("Accept-Encoding") // the answer is read
		x.upstreamStart = time.Now()
		return
	}
	setOutboundBody(out, x.outBody, x.readsResponse())
	x.upstreamStart = time.Now()
}

// readsResponse reports whether any subscription needs the response content.
func (x *exchange) readsResponse() bool {
	for _, t := range [...]string{ahp.EventModelResponseAfter, ahp.EventToolBefore,
		ahp.EventTurnFinishBefore, ahp.EventTurnEnd, ahp.EventModelError} {
		if x.subs.any(t) {
			return true
		}
	}
	return false
}

// holdsResponse reports whether the response must be held until its chains settle
// (a tool call must be decided before the harness sees it).
func (x *exchange) holdsResponse() bool {
	return x.subs.intercepted(ahp.EventModelResponseAfter) || x.subs.intercepted(ahp.EventToolBefore) ||
		x.subs.intercepted(ahp.EventTurnFinishBefore)
}

// onlyCallsMatter reports whether tool.before is the only response-side event a
// subscription selects, so that a response without a tool call builds no event at all
// (hosted tools are reported as tool.after, a final answer as turn.finish.before and
// turn.end).
func (x *exchange) onlyCallsMatter() bool {
	return !x.subs.any(ahp.EventModelResponseAfter) && !x.subs.any(ahp.EventTurnFinishBefore) &&
		!x.subs.any(ahp.EventTurnEnd) && !x.subs.any(ahp.EventToolAfter)
}

// observesResponse reports whether a streamed-through response must be tapped for
// observers.
func (x *exchange) observesResponse() bool {
	return x.subs.any(ahp.EventModelResponseAfter) || x.subs.any(ahp.EventToolBefore) ||
		x.subs.any(ahp.EventTurnFinishBefore) || x.subs.any(ahp.EventTurnEnd) ||
		x.subs.any(ahp.EventToolAfter) // the provider's hosted tools are reported as tool.after
}

// cloneMessages copies messages and their part lists, so that events handed to the chain
// never alias the exchange's working list.
func cloneMessages(in []ahp.Message) []ahp.Message {
	n := 0
	for i := range in {
		n += len(in[i].Parts)
	}
	out := make([]ahp.Message, len(in))
	parts := make([]ahp.Part, 0, n) // one backing array: a long conversation has many messages
	for i, m := range in {
		out[i] = m
		if m.Parts != nil {
			start := len(parts)
			parts = append(parts, m.Parts...)
			out[i].Parts = parts[start:len(parts):len(parts)]
		}
	}
	return out
}

// shareMessages copies the message list of a request-side event but shares the messages'
// part lists, capped so that an append cannot reach past them. On the request side parts
// are never changed in place (an edit replaces a whole message, an effect brings new
// parts), so the event cannot be changed through the working list or the other way round,
// and a long conversation is not copied part by part for every event. The translator
// keeps its own copy of what it decoded, so even a part changed in place would be noticed
// and rendered, never lost.
func shareMessages(in []ahp.Message) []ahp.Message {
	out := make([]ahp.Message, len(in))
	for i, m := range in {
		if m.Parts != nil {
			m.Parts = m.Parts[:len(m.Parts):len(m.Parts)]
		}
		out[i] = m
	}
	return out
}

// isJSONObject reports whether raw is a JSON object (tool.input must be one).
func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// jsonStatus encodes an HTTP status for error.status.
func jsonStatus(code int) json.RawMessage { return json.RawMessage(strconv.Itoa(code)) }

// withPolicyBudget gives one request's in-process policies their shared work budget
// (limits.maxPolicyScanBytes), over every boundary the request settles, and the request's
// memo of text digests (settlement fingerprints and the scanners' result cache share it).
func withPolicyBudget(ctx context.Context, l config.Limits) context.Context {
	ctx = transport.WithTextDigests(ctx, transport.NewTextDigests())
	return transport.WithWorkBudget(ctx, transport.NewWorkBudget(l.MaxPolicyScanBytes))
}
