package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/pinning"
)

// Pinning on a model route: the tool definitions of every request (the agent's own tools,
// as the provider will show them to the model) are compared with the pins of the route
// and agent before anything else happens. A tool pinning strips is taken out of the
// request's tools, keeping the request one the provider accepts; a call of a tool it
// blocks is refused at tool.before (pinRefusal), which the request's context carries the
// scope to.

// AgentHeader names the agent whose tools a model request carries: pins are kept per
// route and agent. Without it they are kept per session (the session's first request
// pins), since two applications behind one route need not share tools.
const AgentHeader = "X-Hookproxy-Agent"

// modelTool is one function tool of a native request and where it sits.
type modelTool struct {
	tool pinning.Tool
	path string // sjson path of the definition in the body
}

// pinModelTools checks the tools of a model request. It returns the request to continue
// with (its body possibly without stripped tools, its context carrying the pin scope), or
// false when it answered the request itself.
func (rt *route) pinModelTools(w http.ResponseWriter, r *http.Request, ep endpoint) (*http.Request, bool) {
	limit := rt.s.limits.MaxRequestBytes
	if r.ContentLength > limit {
		rt.s.writeError(w, r, rt, rt.tooLarge(limit))
		return r, false
	}
	body, err := readAllLimited(r.Body, limit, r.ContentLength)
	if err != nil {
		rt.s.writeError(w, r, rt, rt.inputReadError(r, err))
		return r, false
	}
	if len(r.Header.Values("Content-Encoding")) > 0 {
		// The tools judged must be the ones the provider reads.
		if body, err = decodeRequestBody(r.Header, body, limit); err != nil {
			rt.s.writeError(w, r, rt, rt.requestCodingError(err))
			return r, false
		}
		r.Header.Del("Content-Encoding")
	}
	setInboundBody(r, body)
	tools := modelTools(rt.api, body)
	if len(tools) == 0 {
		return r, true
	}
	scope, session := rt.pinScope(r, ep, body)
	if scope == "" {
		return r, true // the usual path answers a body it cannot read
	}
	env := rt.s.pins
	defs := make([]pinning.Tool, len(tools))
	for i, t := range tools {
		defs[i] = t.tool
	}
	// A request may carry a subset of the agent's tools (a sub-agent, a narrowed turn):
	// a missing tool is not reported as removed.
	v, err := env.pinner.Check(r.Context(), scope, defs, false)
	if err != nil {
		rt.s.log.Warn("pinning: the pins could not be read or written; the request's tools pass unchecked",
			zap.String("route", rt.prefix), zap.String("error", safeError(err)))
		return r, true
	}
	env.report(r.Context(), rt.prefix, rt.api, scope, session, v.Changes)
	if v.Stripping() {
		out, err := stripModelTools(rt.api, body, tools, v)
		if err != nil {
			rt.s.writeError(w, r, rt, rt.badRequest("hookproxy could not remove a changed tool from the request", err))
			return r, false
		}
		setInboundBody(r, out)
	}
	return r.WithContext(withPinCheck(r.Context(), &pinCheck{env: env, scope: scope})), true
}

// pinScope is "model:<route>:agent:<name>" with the agent header, else
// "model:<route>:session:<hash>" for the request's session; "" when the body cannot be
// decoded. The session id is hashed: it may be a client's own value.
func (rt *route) pinScope(r *http.Request, ep endpoint, body []byte) (string, *ahp.Session) {
	if a := strings.TrimSpace(r.Header.Get(AgentHeader)); a != "" && len(a) <= 128 && !strings.ContainsAny(a, "\x00\r\n") {
		return "model:" + rt.prefix + ":agent:" + a, nil
	}
	req, err := ep.tr.DecodeRequest(body)
	if err != nil || req == nil {
		return "", nil
	}
	sess := sessionFor(r.Header, ep.tr.Provider(), req)
	return "model:" + rt.prefix + ":session:" + derive("", sess.ID), &sess
}

// modelTools lists the function tools of a native request, in order. Tools the provider
// runs itself (web search, code execution, ...) have no description the agent wrote and
// are left out.
func modelTools(api string, body []byte) []modelTool {
	var out []modelTool
	add := func(path string, name, desc, schema gjson.Result) {
		if name.Type == gjson.String && name.Str != "" {
			out = append(out, modelTool{path: path, tool: pinning.Tool{Name: name.Str, Description: desc.String(), Schema: rawOf(schema)}})
		}
	}
	list := gjson.GetBytes(body, "tools")
	if !list.IsArray() {
		return nil
	}
	for i, t := range list.Array() {
		p := "tools." + strconv.Itoa(i)
		switch api {
		case config.APIOpenAI:
			typ := t.Get("type").String()
			switch {
			case typ == "function" && t.Get("function").IsObject(): // Chat Completions
				f := t.Get("function")
				add(p, f.Get("name"), f.Get("description"), f.Get("parameters"))
			case typ == "function": // Responses
				add(p, t.Get("name"), t.Get("description"), t.Get("parameters"))
			case typ == "custom" && t.Get("custom").IsObject():
				c := t.Get("custom")
				add(p, c.Get("name"), c.Get("description"), c.Get("format"))
			case typ == "custom":
				add(p, t.Get("name"), t.Get("description"), t.Get("format"))
			}
		case config.APIAnthropic:
			if typ := t.Get("type").String(); typ == "" || typ == "custom" {
				add(p, t.Get("name"), t.Get("description"), t.Get("input_schema"))
			}
		case config.APIGemini:
			decls := t.Get("functionDeclarations")
			if !decls.Exists() {
				decls = t.Get("function_declarations")
			}
			key := "functionDeclarations"
			if !t.Get("functionDeclarations").Exists() {
				key = "function_declarations"
			}
			for j, d := range decls.Array() {
				schema := d.Get("parameters")
				if !schema.Exists() {
					schema = d.Get("parametersJsonSchema")
				}
				add(p+"."+key+"."+strconv.Itoa(j), d.Get("name"), d.Get("description"), schema)
			}
		}
	}
	return out
}

// stripModelTools takes the tools v strips out of body and keeps the request valid for
// its provider: a tool list left empty goes with the fields that need one (OpenAI rejects
// an empty tools array and a tool_choice or parallel_tool_calls without tools), and a
// tool_choice naming a stripped tool goes (the model then chooses among the others).
func stripModelTools(api string, body []byte, tools []modelTool, v pinning.Verdict) ([]byte, error) {
	var stripped []string
	var err error
	for i := len(tools) - 1; i >= 0; i-- {
		if !v.Strip(tools[i].tool.Name) {
			continue
		}
		stripped = append(stripped, tools[i].tool.Name)
		if body, err = sjson.DeleteBytes(body, tools[i].path); err != nil {
			return nil, err
		}
	}
	del := func(paths ...string) {
		for _, p := range paths {
			if err == nil && gjson.GetBytes(body, p).Exists() {
				body, err = sjson.DeleteBytes(body, p)
			}
		}
	}
	if api == config.APIGemini {
		// A tool object whose declarations all went is removed whole.
		list := gjson.GetBytes(body, "tools").Array()
		for i := len(list) - 1; i >= 0; i-- {
			t := list[i]
			decls := t.Get("functionDeclarations")
			if !decls.Exists() {
				decls = t.Get("function_declarations")
			}
			if decls.Exists() && len(decls.Array()) == 0 && len(t.Map()) == 1 {
				del("tools." + strconv.Itoa(i))
			}
		}
		names := gjson.GetBytes(body, "toolConfig.functionCallingConfig.allowedFunctionNames")
		if names.IsArray() {
			var keep []string
			for _, n := range names.Array() {
				if !slices.Contains(stripped, n.String()) {
					keep = append(keep, n.String())
				}
			}
			if len(keep) == 0 {
				del("toolConfig")
			} else if len(keep) < len(names.Array()) && err == nil {
				body, err = sjson.SetBytes(body, "toolConfig.functionCallingConfig.allowedFunctionNames", keep)
			}
		}
	}
	if len(gjson.GetBytes(body, "tools").Array()) == 0 {
		del("tools", "tool_choice", "parallel_tool_calls", "toolConfig", "tool_config")
		return body, err
	}
	choice := gjson.GetBytes(body, "tool_choice")
	for _, p := range []string{"function.name", "name", "custom.name"} {
		if n := choice.Get(p); n.Exists() && slices.Contains(stripped, n.String()) {
			del("tool_choice")
			break
		}
	}
	return body, err
}
