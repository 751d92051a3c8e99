package proxy

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/mapping"
)

// Responses the provider holds. A response created with `background: true` is answered at
// once with status "queued" and produced by the provider afterwards; the client reads it
// back with GET /v1/responses/{id} (the Response object, as a non-streaming POST answers)
// or resumes its event stream with GET /v1/responses/{id}?stream=true, optionally
// `starting_after` a sequence number (the events a streaming POST answers, from there on).
// Either way its tool calls reach the client through a GET, so that GET is mapped: the
// answer goes through the response-side boundaries exactly like a fresh answer to
// POST /v1/responses — model.response.after, tool.before for every call (AHP-TB-001; a
// denied call removed, as on POST: AHP-DEC-002), turn.finish.before, turn.end — held or
// edited as a stream as the subscriptions ask. There is no request side: a GET carries no input, so tool.after,
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
// isRetrieveGet says whether r is a GET that reads back a held response (its body, if
// any, is checked by retrieveBody rather than refused outright).
func (rt *route) isRetrieveGet(r *http.Request, rest string) bool {
	return r.Method == http.MethodGet && rt.lookup(rest, r.URL).retrieve != nil
}

func isResponseRetrieve(key string) bool {
	id, ok := strings.CutPrefix(key, responsesPath+"/")
	return ok && id != "" && !strings.Contains(id, "/")
}

// serveRetrieve reads back a response the provider holds through the response side.
func (rt *route) serveRetrieve(w http.ResponseWriter, r *http.Request, ep endpoint, subs subscriptions) {
	x := rt.retrieveLifecycle(r, ep.retrieve, subs)
	if !x.readsResponse() {
		rt.forward(w, r) // nothing subscribed reads an answer
		return
	}
	body, herr := rt.retrieveBody(r)
	if herr != nil {
		rt.s.writeError(w, r, rt, herr)
		return
	}
	x.outBody = body
	x.req.Stream = x.req.Stream || gjson.GetBytes(body, "stream").Type == gjson.True
	defer x.end(0) // no request body was held
	x.forward(w, r)
}

// retrieveLifecycle is the lifecycle of a read-back: no request body, no request-side
// boundaries. Without a session header the session is derived from the response id, so
// every read of one response shares it; the model is the one the response names.
func (rt *route) retrieveLifecycle(r *http.Request, tr mapping.Translator, subs subscriptions) *lifecycle {
	rest, _ := rt.strip(r.URL)
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	req := &mapping.Request{PromptStart: -1, SessionHint: "response:" + id, Items: nil,
		Stream: strings.EqualFold(r.URL.Query().Get("stream"), "true")}
	// A read-back's policy work is bounded like a fresh answer's (limits.maxPolicyScanBytes).
	ctx := withPolicyBudget(r.Context(), rt.s.limits)
	x := &lifecycle{rt: rt, s: rt.s, tr: tr, ctx: ctx, subs: subs}
	x.req, x.retrieve = req, true
	x.session = sessionFor(r.Header, tr.Provider(), req)
	x.turn = turnFor(x.session.ID, nil)
	x.model = ahp.Model{ID: "unknown", Provider: tr.Provider()} // the response names its model
	x.attempt = ahp.Attempt{ID: "att_" + randomHex() + "-1", Number: 1, Synthesized: true}
	x.principal, x.secrets = credentialsOf(r.Header)
	return x
}

// retrieveParams are the members a read-back's JSON body may hold. The API takes them in
// the query; openai-go's Responses.GetStreaming sends {"stream": true} as a JSON body of
// the GET instead, so such a body is forwarded. It is no input to the model, and anything
// else in it would reach the upstream unexamined: refused.
var retrieveParams = map[string]bool{"stream": true, "starting_after": true, "include": true, "include_obfuscation": true}

// retrieveBody reads the body of a read-back GET: empty, or a JSON object of
// retrieveParams.
func (rt *route) retrieveBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := rt.readBody(r, false)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	bad := jsontext.Check(body, 8) != nil || !gjson.ValidBytes(body)
	root := gjson.ParseBytes(body)
	if !bad && root.IsObject() {
		root.ForEach(func(k, _ gjson.Result) bool {
			bad = !retrieveParams[k.String()]
			return !bad
		})
	} else {
		bad = true
	}
	if bad {
		return nil, rt.badRequest("a GET of a response takes no body other than a JSON object of stream, starting_after, include and include_obfuscation", nil)
	}
	return body, nil
}
