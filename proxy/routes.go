package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
	"github.com/hookproxy/hookproxy/mapping/gemini"
	"github.com/hookproxy/hookproxy/mapping/openai/chat"
	"github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// translatorTable lists, per API kind, the native endpoints (path after the route prefix,
// POST only) that run through the boundary pipeline; every other request on the route is
// reverse-proxied as is. The first entry's translator also renders the route's errors.
func translatorTable(api string) (table map[string]mapping.Translator, errT mapping.Translator) {
	switch api {
	case config.APIOpenAI:
		cc := chat.NewChat()
		return map[string]mapping.Translator{
			"/v1/chat/completions": cc,
			responsesPath:          responses.New(),
			"/v1/embeddings":       chat.NewEmbeddings(),
			"/v1/completions":      chat.NewCompletions(),
		}, cc
	case config.APIAnthropic:
		msgs := anthropic.NewMessages()
		return map[string]mapping.Translator{"/v1/messages": msgs, countTokensPath: msgs}, msgs
	case config.APIGemini:
		// Gemini names the model and the call in the path: endpoints are parsed per
		// request (route.lookup); the table stays empty but marks a model route.
		return map[string]mapping.Translator{}, gemini.New()
	}
	return nil, nil
}

// route is one configured prefix → upstream mapping.
type route struct {
	s           *Server
	prefix      string
	api         string
	upstream    *url.URL
	translators map[string]mapping.Translator // nil for passthrough
	errT        mapping.Translator            // error format of the route; nil = common JSON
	rp          *httputil.ReverseProxy
	mcp         http.Handler
	// allowRedirects passes upstream 3xx answers on (config routes[].allowRedirects).
	allowRedirects bool
	// unmappedForward forwards input to endpoints the route does not map (routes[].unmapped).
	unmappedForward bool
}

func (s *Server) newRoute(rc config.Route, opts Options) (*route, error) {
	prefix, err := cleanPrefix(rc.Prefix)
	if err != nil {
		return nil, err
	}
	up, err := parseUpstream(rc.Upstream)
	if err != nil {
		return nil, err
	}
	rt := &route{s: s, prefix: prefix, api: rc.API, upstream: up, allowRedirects: rc.AllowRedirects,
		unmappedForward: rc.Unmapped == config.UnmappedForward}
	switch rc.API {
	case config.APIOpenAI, config.APIAnthropic, config.APIGemini:
		rt.translators, rt.errT = translatorTable(rc.API)
	case config.APIPassthrough:
	case config.APIMCP:
		if opts.MCPHandler == nil {
			return nil, errors.New("api \"mcp\" is not supported by this build yet")
		}
		h, err := opts.MCPHandler(MCPRoute{Route: rc, Upstream: up.String(), Chain: s.chain,
			Transport: s.transport, Source: s.source, Limits: s.limits, Logger: s.log, Auditor: s.auditor, Tracer: s.tracer, Approvals: s.approvals, Pins: opts.Pins})
		if err != nil {
			return nil, fmt.Errorf("mcp handler: %w", err)
		}
		rt.mcp = h
	case "":
		return nil, errors.New("api is required (openai | anthropic | gemini | mcp | passthrough)")
	default:
		return nil, fmt.Errorf("unknown api %q (want openai | anthropic | gemini | mcp | passthrough)", rc.API)
	}
	rt.rp = rt.newReverseProxy()
	return rt, nil
}

// cleanPrefix validates a route prefix: absolute, no trailing slash (except "/"), and
// only characters that mean the same escaped and unescaped, so stripping it from the
// raw path and from the decoded path agree. Router pattern syntax is refused.
func cleanPrefix(p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", errors.New("prefix must start with /")
	}
	if len(p) > 1 {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	for _, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '/' || r == '-' || r == '_' || r == '.' || r == '~'
		if !ok {
			return "", fmt.Errorf("prefix contains %q: only letters, digits and / - _ . ~ are allowed", r)
		}
	}
	if strings.Contains(p, "//") {
		return "", errors.New("prefix contains an empty segment")
	}
	return p, nil
}

// parseUpstream validates an upstream base URL. Only this URL's scheme and host are ever
// dialled for the route; credentials in the URL are refused because they would reach logs.
func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("upstream %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("upstream %q: no host", s)
	}
	if u.User != nil {
		return nil, errors.New("upstream: credentials in the URL are not allowed; the client's own credentials are forwarded")
	}
	if u.Fragment != "" {
		return nil, errors.New("upstream: a fragment is not allowed")
	}
	return u, nil
}

// ServeHTTP dispatches one request of the route: the boundary pipeline for a translated
// endpoint when any subscription could see it, otherwise a plain, streamed forward.
func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !rt.s.admit() {
		rt.s.writeError(w, r, rt, rt.overloaded("concurrent requests (limits.maxConcurrentRequests)"))
		return
	}
	defer rt.s.active.Add(-1)
	r, release := rt.s.guardBody(w, r)
	defer release()
	rest, _ := rt.strip(r.URL)
	if err := checkPath(rest); err != nil {
		// What is forwarded must be what was examined: a path the upstream may read as
		// another endpoint (or above the route's base path) is refused, not cleaned up.
		rt.s.writeError(w, r, rt, rt.badPath(err))
		return
	}
	if rt.mcp != nil {
		rt.serveMCP(w, r)
		return
	}
	if rt.translators != nil && !carriesInput(r.Method) && hasBody(r) && !rt.isRetrieveGet(r, rest) {
		// A body on GET, HEAD, OPTIONS, DELETE (or any method that takes no input here)
		// would reach the upstream unexamined, mapped endpoint or not. The one exception
		// is the read-back of a held response, whose body is checked below.
		rt.s.writeError(w, r, rt, rt.bodyRefused(r.Method))
		return
	}
	if rt.translators != nil && isWebSocketUpgrade(r) {
		// A model API over WebSocket (the Responses WebSocket mode Codex tries first) would
		// carry traffic the chain cannot see. Refused at once, upstream not contacted, so
		// the agent falls back to HTTP without retrying.
		rt.s.writeError(w, r, rt, rt.upgradeRefused())
		return
	}
	if rt.translators != nil {
		ep := rt.lookup(rest, r.URL)
		key, tr := ep.key, ep.tr
		if tr != nil && r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
			// A mapped endpoint takes its input by POST only; another method with a
			// body would reach the upstream unexamined.
			rt.s.writeError(w, r, rt, rt.methodRefused(r.Method, key))
			return
		}
		if ep.retrieve != nil && r.Method == http.MethodGet {
			// A response the provider holds (background mode) read back or resumed: its
			// output is judged as a fresh answer's (responses_retrieve.go).
			if subs := rt.s.subscriptions(); subs != nil {
				rt.serveRetrieve(w, r, ep, subs)
				return
			}
			// Nothing subscribed: forwarded, but only with the body a read-back may carry.
			body, herr := rt.retrieveBody(r)
			if herr != nil {
				rt.s.writeError(w, r, rt, herr)
				return
			}
			r.Body, r.ContentLength = http.NoBody, 0
			if body != nil {
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			}
		}
		if tr == nil && carriesInput(r.Method) {
			// An endpoint the route does not map would take its input to the model
			// unexamined (files, batches, audio, moderations, ...): refused
			// unless the route says otherwise, and then counted.
			if !rt.unmappedForward {
				rt.s.writeError(w, r, rt, rt.unmappedRefused(key))
				return
			}
			rt.s.unexamined(r.Context(), rt, r.Method, key)
			// A JSON body still names its model and holds strings the model may read:
			// model.request.before sees it whole, as params, and may refuse it (the
			// models policy applies to every endpoint that names a model). That holds for
			// PUT and PATCH as for POST, and for a JSON body under another media type (or
			// none): upstreams often parse JSON whatever the Content-Type says.
			if subs := rt.s.subscriptions().requestOnly(); subs != nil {
				examine := isJSONContent(r.Header)
				if !examine && sniffsJSON(r.Header) {
					var err error
					if examine, err = sniffJSON(r, rt.s.limits.MaxRequestBytes); err != nil {
						rt.s.writeError(w, r, rt, rt.inputReadError(r, err))
						return
					}
				}
				if examine {
					rt.serveBoundaries(w, r, endpoint{key: key, tr: mapping.OpaqueJSON(rt.errT), requestOnly: true}, subs)
					return
				}
			}
		}
		if tr != nil && r.Method == http.MethodPost && rt.s.pins != nil {
			var ok bool
			if r, ok = rt.pinModelTools(w, r, ep); !ok {
				return
			}
		}
		if tr != nil && r.Method == http.MethodPost {
			// AHP-COMP-001: if no subscription matches, AHP adds no decision step — and
			// hookproxy adds no decoding either (the fast path).
			subs := rt.s.subscriptions()
			if ep.requestOnly {
				subs = subs.requestOnly()
			}
			if subs != nil {
				rt.serveBoundaries(w, r, ep, subs)
				return
			}
		}
	}
	rt.forward(w, r)
}

// endpoint is the mapped endpoint a request reaches: its key (for refusals and metrics),
// its translator (nil when the route does not map it), whether it is examined at
// model.request.before only, and the model its path names (Azure deployments; "" when
// the body names it).
type endpoint struct {
	key         string
	tr          mapping.Translator
	requestOnly bool
	pathModel   string
	// retrieve is the Responses translator when the path reads back a response the
	// provider holds (GET /v1/responses/{id}); the endpoint is otherwise unmapped, so
	// DELETE and the rest keep their handling.
	retrieve mapping.Translator
}

// lookup finds the endpoint of rest (the path after the route prefix).
func (rt *route) lookup(rest string, u *url.URL) endpoint {
	key := endpointKey(rest)
	switch rt.api {
	case config.APIGemini:
		alt := ""
		if strings.Contains(u.RawQuery, "alt") {
			alt = u.Query().Get("alt")
		}
		if gep, ok := gemini.ParseEndpoint(rest, alt); ok {
			return endpoint{key: key, tr: gemini.For(gep), requestOnly: gep.RequestOnly()}
		}
		return endpoint{key: key}
	case config.APIOpenAI:
		if k, model, ok := azureEndpoint(rest); ok {
			if rt.translators[k] != nil {
				return endpoint{key: k, tr: rt.translators[k], requestOnly: requestOnly[k], pathModel: model}
			}
			if isResponseRetrieve(k) {
				return endpoint{key: key, retrieve: rt.translators[responsesPath]}
			}
		}
		if isResponseRetrieve(key) {
			return endpoint{key: key, retrieve: rt.translators[responsesPath]}
		}
	}
	return endpoint{key: key, tr: rt.translators[key], requestOnly: requestOnly[key]}
}

// azureEndpoint reads the Azure OpenAI forms of an OpenAI endpoint:
// /openai/deployments/{deployment}/chat/completions (the deployment is the model),
// /openai/v1/chat/completions and /openai/responses (with ?api-version=). key is the
// OpenAI endpoint they are ("/v1/chat/completions").
func azureEndpoint(rest string) (key, deployment string, ok bool) {
	p, found := strings.CutPrefix(rest, "/")
	if !found {
		return "", "", false
	}
	first, p, found := strings.Cut(p, "/")
	if !found || !strings.EqualFold(first, "openai") {
		return "", "", false
	}
	seg, tail, _ := strings.Cut(p, "/")
	switch {
	case strings.EqualFold(seg, "deployments"):
		deployment, tail, found = strings.Cut(tail, "/")
		if !found || deployment == "" {
			return "", "", false
		}
		if u, err := url.PathUnescape(deployment); err == nil {
			deployment = u
		}
		return endpointKey("/v1/" + tail), deployment, true
	case strings.EqualFold(seg, "v1"):
		return endpointKey("/v1/" + tail), "", true
	}
	return endpointKey("/v1/" + p), "", true
}

// isJSONContent reports whether the request says its body is JSON.
func isJSONContent(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// carriesInput reports whether a request of this method carries input to the upstream.
func carriesInput(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// enforced lists the endpoints a model route maps, for the refusal of the others.
func (rt *route) enforced() string {
	if rt.api == config.APIGemini {
		return "POST /{v1,v1beta}/models/{model}:generateContent, :streamGenerateContent and :countTokens (and their Vertex AI forms)"
	}
	var eps []string
	for k := range rt.translators {
		eps = append(eps, "POST "+k)
	}
	sort.Strings(eps)
	return strings.Join(eps, ", ")
}

// checkPath refuses a path with empty, "." or ".." segments or a backslash: upstreams
// and the proxies in front of them normalise such paths differently, so the endpoint the
// chain would examine is not certainly the one the upstream serves.
func checkPath(p string) error {
	if strings.ContainsRune(p, '\\') {
		return errors.New("the path contains a backslash")
	}
	rest := strings.TrimPrefix(p, "/")
	for {
		s, more, found := strings.Cut(rest, "/")
		switch {
		case s == "." || s == "..":
			return errors.New("the path contains a dot segment")
		case s == "" && found:
			return errors.New("the path contains an empty segment")
		}
		if !found {
			return nil
		}
		rest = more
	}
}

// endpointKey is the form mapped endpoints are matched in: the providers accept the
// path in any letter case and with a trailing slash, so those variants are the endpoint.
func endpointKey(p string) string {
	return strings.ToLower(strings.TrimSuffix(p, "/"))
}

// isWebSocketUpgrade reports whether r asks to switch to the WebSocket protocol.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

// headerHasToken reports whether a comma-separated header lists token (case-insensitive).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// forward relays a request untouched, streaming the body both ways (fast path and
// non-translated endpoints). Memory use does not grow with the body.
func (rt *route) forward(w http.ResponseWriter, r *http.Request) {
	limit := rt.s.limits.MaxRequestBytes
	if r.ContentLength > limit {
		rt.s.writeError(w, r, rt, rt.tooLarge(limit))
		return
	}
	st := &requestState{}
	out := r.WithContext(withState(r.Context(), st))
	if r.Body != nil && r.Body != http.NoBody {
		st.body = newLimitedBody(r.Body, r.ContentLength, limit)
		out.Body = st.body
		if r.ContentLength > 0 && r.ContentLength <= smallBodyBytes {
			// A small body of declared length is read before forwarding and sent from
			// memory: net/http's transport then writes headers and body in one write,
			// where a streamed body costs a flush of the headers and a second write —
			// a syscall and a loopback segment per request, 9% of the CPU of a small
			// request (see the commit). A body that small arrived with its headers.
			// (rewrite installs it: the reverse proxy wraps the body it is given in a
			// reader the transport cannot see through.)
			st.small = make([]byte, r.ContentLength)
			if _, err := io.ReadFull(st.body, st.small); err != nil {
				rt.proxyError(w, out, err)
				return
			}
		} else {
			var relay *relayBody
			w, relay = streamRelay(w, r, st.body)
			defer relay.finish()
			out.Body = relay
		}
	}
	rt.rp.ServeHTTP(w, out)
}

// smallBodyBytes is the largest declared body forwarded from memory on the fast path;
// larger bodies stream through pooled buffers, so memory does not grow with them.
const smallBodyBytes = 16 << 10

// serveMCP hands the request to the MCP handler with the prefix stripped.
func (rt *route) serveMCP(w http.ResponseWriter, r *http.Request) {
	rest, restRaw := rt.strip(r.URL)
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = rest, restRaw
	if r2.URL.Path == "" {
		r2.URL.Path = "/"
	}
	rt.mcp.ServeHTTP(w, r2)
}

// boundaryEvents are the events a model boundary can emit; hook.failure is emitted by the
// chain itself.
var boundaryEvents = [...]string{
	ahp.EventToolAfter, ahp.EventTurnStart, ahp.EventModelRequestBefore,
	ahp.EventModelResponseAfter, ahp.EventToolBefore, ahp.EventTurnFinishBefore,
	ahp.EventTurnEnd, ahp.EventModelError,
}

// subscription says how an event is subscribed.
type subscription struct{ intercept, observe bool }

// subscriptions maps the boundary events that have at least one matching subscription.
type subscriptions map[string]subscription

func (m subscriptions) any(t string) bool { s := m[t]; return s.intercept || s.observe }

// countTokensPath is Anthropic's token counting endpoint: it carries the whole prompt
// (system, messages, tools) to the upstream without a model call.
const countTokensPath = "/v1/messages/count_tokens"

// requestOnly are the mapped endpoints (of the table) whose input is examined at model.request.before
// only: token counting, embeddings and legacy completions carry model input but no turn
// and no response the chain maps.
var requestOnly = map[string]bool{countTokensPath: true, "/v1/embeddings": true, "/v1/completions": true}

// requestOnly is the view of m for a request-only endpoint: model.request.before only, so
// the input gets the same policy as a model call, while the boundaries of a turn
// (tool.after, turn.start) and of a response do not run for what is not one. nil when
// model.request.before is not subscribed (fast path).
func (m subscriptions) requestOnly() subscriptions {
	s, ok := m[ahp.EventModelRequestBefore]
	if !ok {
		return nil
	}
	return subscriptions{ahp.EventModelRequestBefore: s}
}
func (m subscriptions) intercepted(t string) bool { return m[t].intercept }

// subscriptions returns the subscribed boundary events, or nil when none is (fast path).
// It asks the chain on every request, so a chain whose registration changes is honoured.
func (s *Server) subscriptions() subscriptions {
	if s.chain == nil {
		return nil
	}
	var m subscriptions
	for _, t := range boundaryEvents {
		in, ob := s.chain.Subscribed(t)
		if in || ob {
			if m == nil {
				m = make(subscriptions, len(boundaryEvents))
			}
			m[t] = subscription{intercept: in, observe: ob}
		}
	}
	return m
}
