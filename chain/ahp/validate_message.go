package ahp

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/internal/jsonpath"
)

// ValidateMessage validates one AHP JSON-RPC 2.0 message as a harness or backend receives
// it (AHP-RPC-001, AHP-RPC-002, AHP-VER-001):
//
//   - hooks/intercept request: id equal to params.event.id, protocolVersion "draft", an
//     interceptable event, and capabilities within that event's bound, optional state;
//   - hooks/observe notification: no id, params holding only protocolVersion and event;
//   - hooks/capabilities request (params only protocolVersion);
//   - responses: exactly one of result and error; an error has an integer code and a string
//     message; a result carries protocolVersion and either effects (hooks/intercept) or a
//     manifest (hooks/capabilities).
//
// The effects of an intercept result are checked only as a list here: whether each effect
// is valid and advertised for the pending boundary is the engine's reply validation.
// Unknown members of the envelope are ignored (AHP-CORE-003); the error lists violations
// with JSON paths.
func ValidateMessage(frame []byte) error {
	_, err := validate(frame, "", func(v *validator, x any) { v.rpcMessage(x) })
	return err
}

// ValidateDecodedMessage is ValidateMessage for a receiver that has already decoded frame
// as one JSON value with numbers as json.Number (encoding/json's Decoder with UseNumber):
// the bytes are checked only for what decoding hides (invalid UTF-8, a member written
// twice) and decoded is validated as is, so the frame is not decoded a second time.
func ValidateDecodedMessage(frame []byte, decoded any) error {
	if !utf8.Valid(frame) {
		return frameError(errors.New("not valid UTF-8"), "")
	}
	if err := checkMembers(frame); err != nil {
		return frameError(err, "")
	}
	return checkDecoded(decoded, "", func(v *validator, x any) { v.rpcMessage(x) })
}

// ValidateStdioFrame validates one stdio frame (AHP-STDIO-001): exactly one line holding one
// JSON-RPC object, optionally followed by its single terminating "\n". A pretty-printed
// object spread over several lines is a framing error even when the JSON is well formed.
func ValidateStdioFrame(line []byte) error {
	body := bytes.TrimSuffix(line, []byte("\n"))
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		return &ValidationError{Violations: []Violation{{Path: "$", Message: "empty stdio frame"}}}
	case bytes.ContainsAny(body, "\r\n"):
		return &ValidationError{Violations: []Violation{{Path: "$", Message: "a stdio frame is exactly one line; this message spans several (a multi-line object is a framing error)"}}}
	}
	return ValidateMessage(body)
}

func (v *validator) rpcMessage(x any) {
	if _, isArr := x.([]any); isArr {
		v.failf("$", "JSON-RPC batches are not allowed; send one object per message")
		return
	}
	msg, ok := v.object("$", x)
	if !ok {
		return
	}
	if j, has := msg["jsonrpc"]; !has {
		v.failf("$", "\"jsonrpc\" is required")
	} else if s, _ := j.(string); s != "2.0" {
		v.failf("jsonrpc", "must be \"2.0\"")
	}
	if _, has := msg["method"]; has {
		v.rpcRequest(msg)
		return
	}
	v.rpcResponse(msg)
}

// rpcID checks a request id: a non-empty string or an integer.
func (v *validator) rpcID(path string, x any, allowNull bool) {
	switch id := x.(type) {
	case string:
		if id == "" {
			v.failf(path, "must not be empty")
		}
	case json.Number:
		if _, ok := jsonpath.Integer(id); !ok {
			v.failf(path, "must be a string or an integer, not %s", id)
		}
	case nil:
		if !allowNull {
			v.failf(path, "must be a string or an integer, not null")
		}
	default:
		v.failf(path, "must be a string or an integer, not %s", jsonpath.TypeName(x))
	}
}

func (v *validator) rpcRequest(msg map[string]any) {
	method, ok := v.str("method", msg["method"], 1)
	for _, k := range []string{"result", "error"} {
		if _, has := msg[k]; has {
			v.failf(k, "is not allowed on a request or notification")
		}
	}
	id, hasID := msg["id"]
	if hasID {
		v.rpcID("id", id, false)
	}
	p, hasParams := msg["params"]
	if !hasParams {
		v.failf("$", "\"params\" is required")
		return
	}
	params, pok := v.object("params", p)
	if !ok || !pok {
		return
	}
	switch method {
	case MethodIntercept:
		if !hasID {
			v.failf("$", "hooks/intercept is a request: \"id\" is required (equal to params.event.id)")
		}
		eventID := v.interceptParams("params", params)
		if hasID && eventID != "" {
			// AHP-CORE-004: the JSON-RPC id is the event identity, so a retry is recognizable.
			if s, isStr := id.(string); !isStr || s != eventID {
				v.failf("id", "must equal params.event.id %q", eventID)
			}
		}
	case MethodObserve:
		if hasID {
			v.failf("id", "is not allowed: hooks/observe is a notification and is never answered")
		}
		// Observation params carry only the version and the effective event: no decision
		// summary, disposition or subscription identity.
		v.closed("params", params, "protocolVersion", "event")
		v.required("params", params, "protocolVersion", "event")
		v.protocolVersion("params.protocolVersion", params)
		if ev, has := params["event"]; has {
			v.event("params.event", ev)
		}
	case MethodCapabilities:
		if !hasID {
			v.failf("$", "hooks/capabilities is a request: \"id\" is required")
		}
		v.required("params", params, "protocolVersion")
		v.closed("params", params, "protocolVersion")
		v.protocolVersion("params.protocolVersion", params)
	default:
		v.failf("method", "unknown AHP method %q", method)
	}
}

// protocolVersion checks the snapshot identifier when present (AHP-VER-001: exact match).
func (v *validator) protocolVersion(path string, obj map[string]any) {
	pv, has := obj["protocolVersion"]
	if !has {
		return
	}
	if s, isStr := pv.(string); !isStr || s != ProtocolVersion {
		v.failf(path, "unsupported protocol version %s (want %q)", describe(pv), ProtocolVersion)
	}
}

func describe(x any) string {
	if s, ok := x.(string); ok {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return jsonpath.TypeName(x)
}

// interceptParams checks hooks/intercept params and returns the event id.
func (v *validator) interceptParams(path string, params map[string]any) string {
	v.required(path, params, "protocolVersion", "event", "capabilities")
	v.protocolVersion(jsonpath.Member(path, "protocolVersion"), params)
	typ, id := "", ""
	if ev, has := params["event"]; has {
		typ, id = v.event(jsonpath.Member(path, "event"), ev)
		if typ != "" && !IsInterceptable(typ) {
			v.failf(jsonpath.Member(jsonpath.Member(path, "event"), "type"), "%s is observe-only and is never delivered by hooks/intercept", typ)
			typ = ""
		}
	}
	v.optional(path, params, "capabilities", func(at string, y any) { v.capabilities(at, y, typ) })
	v.optional(path, params, "state", v.state)
	v.optional(path, params, "extensions", v.extensions)
	return id
}

// state checks the accumulated chain state (params.state). It is informational for the
// backend, never an authorization claim, but its shape is fixed.
func (v *validator) state(path string, x any) {
	s, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, s, "permission", "candidate")
	v.optional(path, s, "permission", func(at string, y any) { v.enum(at, y, PermissionNone, PermissionAllow, PermissionAsk, PermissionDeny) })
	if c, has := s["candidate"]; has && c != nil {
		cp := jsonpath.Member(path, "candidate")
		if cand, ok := v.object(cp, c); ok {
			v.required(cp, cand, "value")
			v.optional(cp, cand, "provenance", func(at string, y any) { v.object(at, y) })
		}
	}
	v.optional(path, s, "flow", func(at string, y any) { v.enum(at, y, FlowNone, FlowStop, FlowContinue) })
	if in, has := s["instructions"]; has {
		ip := jsonpath.Member(path, "instructions")
		if arr, ok := v.array(ip, in); ok {
			for i, e := range arr {
				v.str(jsonpath.Index(ip, i), e, 1)
			}
		}
	}
	v.optional(path, s, "injections", func(at string, y any) { v.array(at, y) })
}

func (v *validator) rpcResponse(msg map[string]any) {
	id, hasID := msg["id"]
	if !hasID {
		v.failf("$", "\"id\" is required on a response (a message without method and id is neither request nor response)")
	} else {
		v.rpcID("id", id, true)
	}
	result, hasResult := msg["result"]
	e, hasError := msg["error"]
	switch {
	case hasResult && hasError:
		v.failf("$", "a response carries exactly one of \"result\" and \"error\", not both")
		return
	case !hasResult && !hasError:
		v.failf("$", "a response carries exactly one of \"result\" and \"error\"")
		return
	case hasError:
		ep := "error"
		if eo, ok := v.object(ep, e); ok {
			v.required(ep, eo, "code", "message")
			if c, has := eo["code"]; has {
				if n, isNum := c.(json.Number); !isNum {
					v.failf("error.code", "must be an integer, not %s", jsonpath.TypeName(c))
				} else if _, isInt := jsonpath.Integer(n); !isInt {
					v.failf("error.code", "must be an integer, not %s", n)
				}
			}
			if m, has := eo["message"]; has {
				v.str("error.message", m, 0)
			}
		}
		return
	}
	r, ok := v.object("result", result)
	if !ok {
		return
	}
	// AHP-VER-001: every successful result names the snapshot.
	v.required("result", r, "protocolVersion")
	v.protocolVersion("result.protocolVersion", r)
	_, hasManifest := r["manifest"]
	effects, hasEffects := r["effects"]
	switch {
	case hasManifest && hasEffects:
		v.failf("result", "carries both \"effects\" and \"manifest\"; an intercept result has no manifest and a capabilities result no effects")
	case hasManifest:
		v.manifest("result.manifest", r["manifest"])
	case hasEffects:
		if arr, ok := v.array("result.effects", effects); ok {
			for i, e := range arr {
				if eo, ok := v.object(jsonpath.Index("result.effects", i), e); ok {
					v.required(jsonpath.Index("result.effects", i), eo, "type")
				}
			}
		}
		if x, has := r["extensions"]; has {
			v.extensions("result.extensions", x)
		}
	default:
		v.failf("result", "must carry \"effects\" (hooks/intercept) or \"manifest\" (hooks/capabilities)")
	}
}
