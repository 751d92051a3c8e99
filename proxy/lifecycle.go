package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/mapping"
)

// lifecycle is one boundary request's life, from the client's bytes to the last byte
// sent. Its walk (serve):
//
//  1. the body is read, decoded and its identities derived (newLifecycle), and the
//     request-side boundaries settle: tool.after, turn.start, model.request.before
//     (requestSide, boundaries_request.go);
//  2. a request that needs no upstream ends there: refused (an error in the provider's
//     form), or answered locally from a supplied result or after a flow stop
//     (answerLocally, response_local.go);
//  3. forward: the route's reverse proxy sends the effective body (prepareOutbound);
//  4. the response mode is chosen once, when the answer's head arrives (modeFor,
//     response_mode.go), and the answer is held whole and settled (response_held.go),
//     streamed with each tool call held (stream_edit.go), or passed, tapped for
//     observers when they want it (response_tapped.go);
//  5. once the client has the answer, what is only observed is dispatched
//     (afterDelivery), the request waits for its observers and releases what it held
//     in the server's memory budget (end).
//
// The rest of the package are its collaborators: the routes that build it
// (routes.go), the reverse proxy and transport that carry it (upstream.go), the
// boundary events it settles through the chain and audits (events.go), the state store
// of the conversation (store.go, rewrites.go), the error forms (errors.go) and the
// telemetry around it (telemetry.go).
type lifecycle struct {
	rt   *route             // the route: upstream, reverse proxy, error forms
	s    *Server            // the chain, the state store, the limits, the auditor, telemetry
	tr   mapping.Translator // the provider's codec
	ctx  context.Context    // the client's request context, with the policy work budget
	subs subscriptions      // what the chain's subscriptions select

	identities
	requestPart
	responsePart

	settlements []*chain.Settlement
	observing   sync.WaitGroup // observe-only deliveries started by this request

	fwd httputil.ReverseProxy // the forward's engine (forward)
}

// identities say who and what the request is about: the canonical session, turn, model
// and attempt, and the client's credentials (as a hash for the store, as values only to
// scrub provider error text).
type identities struct {
	session   ahp.Session
	turn      ahp.Turn
	model     ahp.Model
	modelGaps []ahp.Gap
	attempt   ahp.Attempt
	principal string   // hash of the client's credentials; scopes store keys, never sent
	secrets   []string // the client's credential values, to scrub provider error text
}

// requestPart is the request as the request-side boundaries edit it.
type requestPart struct {
	req         *mapping.Request
	items       []ahp.Message         // effective request list
	itemsOwned  bool                  // items is this request's own list; else it may be req.Items (ownItems)
	changed     bool                  // items differ from req.Items: render with EncodeRequest
	paramReds   []ahp.ParamsRedaction // settled redactions of the request's params (params_redact.go)
	parents     map[string]string     // derived tool.before id → the event it stands for (store.go)
	outBody     []byte                // the body sent upstream
	lease       *bodyLease            // the read buffer, pooled again when the request is over (body_pool.go)
	rw          rewriteState          // settlement records re-applied and made (rewrites.go)
	requestOnly bool                  // count_tokens, embeddings, legacy completions: model.request.before only
	retrieve    bool                  // a GET that reads back a held response: outBody is its checked parameters body, or nil
}

// responsePart is what the response side needs and leaves behind.
type responsePart struct {
	mode             responseMode // chosen once, when the upstream's answer arrives (response_mode.go)
	upstreamStart    time.Time
	tap              *bodyTap // copy of a streamed-through body, for observers
	errTap           *bodyTap // head of an upstream error body, for model.error
	streamErr        *mapping.UpstreamError
	streamErrLatency time.Duration
	final            *finalResponse      // what the client received, for turn.end
	responseAfterID  string              // model.response.after's id when it is observed after a stream
	streamStopped    bool                // a streamed tool call stopped the flow
	heldResponse     int64               // bytes of a held response counted in the server's budget
	streamHeld       int64               // bytes a stream editor holds, counted likewise (holdStream)
	client           http.ResponseWriter // the client's writer, for a held stream's keep-alives (approval_hold.go)
	wire             *streamWire         // set while a stream is edited incrementally
	approval         *ApprovalAudit      // the approval of the tool call being audited next
	upstreamStatus   int                 // the upstream's HTTP status, once its answer arrived
}

// finalResponse is the response the client received, as canonical content.
type finalResponse struct {
	items        []ahp.Message
	hasToolCalls bool
	stopped      bool
}

// serveBoundaries serves one translated request through its lifecycle.
func (rt *route) serveBoundaries(w http.ResponseWriter, r *http.Request, ep endpoint, subs subscriptions) {
	x, err := rt.newLifecycle(r, ep.tr, subs, ep.pathModel)
	if err != nil {
		rt.s.writeError(w, r, rt, err)
		return
	}
	x.requestOnly = ep.requestOnly
	x.serve(w, r)
}

// serve walks the request from its settled request side to the last byte sent.
func (x *lifecycle) serve(w http.ResponseWriter, r *http.Request) {
	// The decoded request is held until the lifecycle ends: it counts against the
	// server-wide budget, by the buffer it occupies (a pooled body's buffer, or one grown
	// while a body of unknown length arrived, is up to half as large again as the body).
	n := int64(cap(x.req.Original))
	if !x.s.hold(n) {
		x.s.writeError(w, r, x.rt, x.rt.overloaded("bytes held in memory (limits.maxHeldBytes)"))
		return
	}
	defer x.end(n)

	out := x.requestSide()
	switch out.kind {
	case outcomeInterrupted:
		return
	case outcomeRefused:
		x.s.writeError(w, r, x.rt, out.err)
		return
	case outcomeSupplied, outcomeStopped:
		x.answerLocally(w, r, out)
		return
	}
	x.forward(w, r)
}

// forward sends the request upstream through a reverse proxy of the lifecycle's own, with
// the route's settings and the lifecycle's methods as its hooks (rewrite, modifyResponse,
// forwardFailed), then runs the after-delivery observations.
func (x *lifecycle) forward(w http.ResponseWriter, r *http.Request) {
	var t http.RoundTripper = x.s.transport
	if mt, ok := t.(*meteredTransport); ok {
		// The stream metrics label a stream with this lifecycle's response mode.
		own := *mt
		own.lc = x
		t = &own
	}
	x.rt.setupReverseProxy(&x.fwd, x.rewrite, x.modifyResponse, x.forwardFailed, t)
	if x.s.approvals != nil {
		// A held stream's keep-alives write to the client beside the reverse proxy.
		sw := &serialWriter{w: w}
		x.client, w = sw, sw
	}
	x.fwd.ServeHTTP(w, r)
	x.afterDelivery()
}

// rewrite is the Rewrite of the lifecycle's forward: the route's upstream target, and the
// rendered body.
func (x *lifecycle) rewrite(pr *httputil.ProxyRequest) {
	x.rt.target(pr)
	x.prepareOutbound(pr.Out)
}

// modifyResponse is the ModifyResponse of the lifecycle's forward: a redirect is
// refused, a body the chain reads is decoded, then the answer is carried in its mode.
func (x *lifecycle) modifyResponse(resp *http.Response) error {
	if err := x.rt.checkRedirect(resp); err != nil {
		return err
	}
	if x.readsResponse() {
		// What the chain reads must be what the client decodes (content_coding.go).
		if err := decodeResponseBody(resp); err != nil {
			resp.Body.Close()
			return x.rt.upstreamFailure(codingRefusal("the upstream answered", err), err)
		}
	}
	return x.onUpstreamResponse(resp)
}

// forwardFailed is the error path of the lifecycle's forward: a transport failure is
// observed as model.error, and the client gets the error in the provider's form.
func (x *lifecycle) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	err = x.rt.forwardFailure(r, err)
	x.onForwardError(err)
	x.s.writeError(w, r, x.rt, err)
}

// end closes the lifecycle: a hook call owns the observations it dispatched, so they
// finish within the request; then the request's bytes (requestBytes) and a held
// response's leave the server's memory budget.
func (x *lifecycle) end(requestBytes int64) {
	x.waitObservers()
	x.s.release(requestBytes + x.heldResponse)
	if x.lease != nil {
		x.lease.release() // the upstream's readers of it may still hold it (body_pool.go)
	}
}

// newLifecycle reads and decodes the client's body and derives the request's identities.
// pathModel is the model the path names (an Azure deployment): it is model.id, and the
// request's model when the body names none.
func (rt *route) newLifecycle(r *http.Request, tr mapping.Translator, subs subscriptions, pathModel string) (*lifecycle, error) {
	_, pooled := tr.(mapping.BodyReleaser)
	body, err := rt.readBody(r, pooled)
	if err != nil {
		return nil, err
	}
	read := body
	limit := rt.s.limits.MaxRequestBytes
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
	// The in-process policies share one work budget over every boundary of the lifecycle
	// (limits.maxPolicyScanBytes).
	ctx := withPolicyBudget(r.Context(), rt.s.limits)
	x := &lifecycle{rt: rt, s: rt.s, tr: tr, ctx: ctx, subs: subs}
	x.req = req
	if req.BodyUnkept && len(read) > 0 && len(req.Original) == len(read) && &req.Original[0] == &read[0] {
		// The codec keeps nothing of the buffer the body was read into: it serves the
		// next request once this one is over (body_pool.go). A body that was decoded
		// (Content-Encoding) is another buffer, and is left to the collector.
		x.lease = newBodyLease(read)
	}
	// The codec's list, shared (mapping.Request.Items is read-only): changes replace it or
	// go to a copy (ownItems); capped, so that an append copies.
	x.items = req.Items[:len(req.Items):len(req.Items)]
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

// prepareOutbound sets the rendered body on the upstream request (the reverse proxy's Rewrite).
func (x *lifecycle) prepareOutbound(out *http.Request) {
	if x.retrieve && len(x.outBody) == 0 {
		out.Body, out.GetBody, out.ContentLength = http.NoBody, nil, 0
		out.Header.Del("Content-Length")
		out.Header.Del("Accept-Encoding") // the answer is read
		x.upstreamStart = time.Now()
		return
	}
	setOutboundBody(out, x.outBody, x.readsResponse())
	if x.lease != nil {
		// Every reader the transport gets holds the buffer until the transport closes it:
		// a request whose answer came early may still be writing its body.
		body := x.outBody
		out.Body = x.lease.reader(body)
		out.GetBody = func() (io.ReadCloser, error) { return x.lease.reader(body), nil }
	}
	x.upstreamStart = time.Now()
}

// onUpstreamResponse runs as the reverse proxy's ModifyResponse: it carries the answer in
// the mode chosen for it: held when an interceptor must decide on it, streamed with
// holds when only tool.before intercepts a stream, tapped when only observers want it,
// otherwise passed untouched.
func (x *lifecycle) onUpstreamResponse(resp *http.Response) error {
	x.upstreamStatus = resp.StatusCode
	streaming := isEventStream(resp.Header.Get("Content-Type"))
	switch x.modeFor(resp) {
	case modeStreamedWithHolds:
		if x.subs.any(ahp.EventModelResponseAfter) {
			x.responseAfterID = ahp.NewEventID()
		}
		se, _ := x.tr.(mapping.StreamEditing)
		x.editStream(resp, se)
	case modeHeld:
		return x.holdResponse(resp, streaming, x.mislabelled(streaming))
	case modeTapped:
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			// An upstream error reaches the client unchanged; its head is kept for model.error.
			x.errTap = &bodyTap{rc: resp.Body, limit: maxErrorBodyTap, status: resp.StatusCode, start: x.upstreamStart}
			resp.Body = x.errTap
			return nil
		}
		// Observers only: stream through untouched, keep a copy, observe at the end.
		x.tap = &bodyTap{rc: resp.Body, limit: x.s.limits.MaxResponseBytes, streaming: streaming, start: x.upstreamStart}
		resp.Body = x.tap
	}
	return nil
}

const maxErrorBodyTap = 64 << 10

// afterDelivery dispatches what is observed once the client has the response: the
// response-side observations of a streamed-through response, model.error, and turn.end.
// Nothing is started once the client went away (interruption, AHP spec,
// base/failure.md "Deadlines").
func (x *lifecycle) afterDelivery() {
	if x.ctx.Err() != nil {
		return
	}
	if x.errTap != nil && x.errTap.eof {
		x.observeModelError(mapping.UpstreamErrorFromBody(x.errTap.status, x.errTap.buf.Bytes()), x.errTap.latency)
	}
	if x.tap != nil {
		x.observeTapped()
	}
	if x.streamErr != nil {
		x.observeModelError(x.streamErr, x.streamErrLatency)
	}
	if x.final != nil && !x.final.hasToolCalls && x.subs.any(ahp.EventTurnEnd) {
		ev := x.newEvent(ahp.EventTurnEnd)
		ev.Outcome = "completed"
		if x.final.stopped {
			ev.Outcome = "cancelled"
		}
		zero := 0
		ev.ContinuationCount = &zero
		ev.Items = cloneMessages(x.final.items)
		if id := lastAssistant(x.final.items); id != "" {
			ev.LastAssistantItem = &ahp.ItemRef{ID: id}
		}
		x.observe(ev, "", "")
	}
}

// withPolicyBudget gives one request's in-process policies their shared work budget
// (limits.maxPolicyScanBytes), over every boundary the request settles, and the request's
// memo of text digests (settlement fingerprints and the scanners' result cache share it).
func withPolicyBudget(ctx context.Context, l config.Limits) context.Context {
	ctx = transport.WithTextDigests(ctx, transport.NewTextDigests())
	return transport.WithWorkBudget(ctx, transport.NewWorkBudget(l.MaxPolicyScanBytes))
}
