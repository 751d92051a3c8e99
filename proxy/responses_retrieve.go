package proxy

import (
	"net/http"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// Responses the provider holds. A response created with `background: true` is answered at
// once with status "queued" and produced by the provider afterwards; the client reads it
// back with GET /v1/responses/{id} (the Response object, as a non-streaming POST answers)
// or resumes its event stream with GET /v1/responses/{id}?stream=true, optionally
// `starting_after` a sequence number (the events a streaming POST answers, from there on).
// Either way its tool calls reach the client through a GET, so that GET is mapped: the
// answer goes through the response-side boundaries exactly like a fresh answer to
// POST /v1/responses — model.response.after, tool.before for every call (a denied call
// removed, as on POST), turn.finish.before, turn.end — held or edited as a stream as the
// subscriptions ask. There is no request side: a GET carries no input, so tool.after,
// turn.start and model.request.before do not run.
//
// A resumed stream may begin inside an item: the deltas of a call whose
// output_item.added the client read earlier pass as they come (they execute nothing), and
// the call is judged at its output_item.done, which the client acts on, or at the
// terminal event, whose output is rebuilt from what was judged.

// responsesPath is the Responses API's create endpoint, whose translator also reads back.
const responsesPath = "/v1/responses"

// isResponseRetrieve reports whether key (an endpoint key) is /v1/responses/{id}: one
// more non-empty segment (input_items and cancel are two).
func isResponseRetrieve(key string) bool {
	id, ok := strings.CutPrefix(key, responsesPath+"/")
	return ok && id != "" && !strings.Contains(id, "/")
}

// serveRetrieve reads back a response the provider holds through the response side.
func (rt *route) serveRetrieve(w http.ResponseWriter, r *http.Request, ep endpoint, subs subscriptions) {
	x := rt.retrieveExchange(r, ep.retrieve, subs)
	if !x.readsResponse() {
		rt.forward(w, r) // nothing subscribed reads an answer
		return
	}
	defer func() { rt.s.release(x.heldResponse) }()
	defer x.waitObservers()
	rt.rp.ServeHTTP(w, r.WithContext(withState(r.Context(), &requestState{x: x})))
	x.afterDelivery()
}

// retrieveExchange is the exchange of a read-back: no request body, no request-side
// boundaries. Without a session header the session is derived from the response id, so
// every read of one response shares it; the model is the one the response names.
func (rt *route) retrieveExchange(r *http.Request, tr mapping.Translator, subs subscriptions) *exchange {
	rest, _ := rt.strip(r.URL)
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	req := &mapping.Request{PromptStart: -1, SessionHint: "response:" + id, Items: nil,
		Stream: strings.EqualFold(r.URL.Query().Get("stream"), "true")}
	x := &exchange{rt: rt, s: rt.s, tr: tr, ctx: r.Context(), subs: subs, req: req, retrieve: true}
	x.session = sessionFor(r.Header, tr.Provider(), req)
	x.turn = turnFor(x.session.ID, nil)
	x.model = ahp.Model{ID: "unknown", Provider: tr.Provider()} // the response names its model
	x.attempt = ahp.Attempt{ID: "att_" + randomHex() + "-1", Number: 1, Synthesized: true}
	x.principal, x.secrets = credentialsOf(r.Header)
	return x
}
