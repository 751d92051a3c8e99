package chain

// Stage one of reply staging: the JSON-RPC envelope and the hooks/intercept result object.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

func wrongIDf(format string, a ...any) error {
	return &transport.Error{Kind: transport.KindMalformed, Err: fmt.Errorf(format, a...), Violation: transport.ViolationWrongID}
}

func malformedf(format string, a ...any) error {
	return &transport.Error{Kind: transport.KindMalformed, Err: fmt.Errorf(format, a...)}
}

func invalidf(format string, a ...any) error {
	return &transport.Error{Kind: transport.KindInvalid, Err: fmt.Errorf(format, a...)}
}

// envelope checks the JSON-RPC response envelope and returns the raw result member.
func (s *stager) envelope(frame []byte) ([]byte, error) {
	if !utf8.Valid(frame) {
		return nil, malformedf("reply is not valid UTF-8")
	}
	if !isJSONObject(frame) {
		// Batches (arrays) and scalars are not one JSON-RPC response object.
		return nil, malformedf("reply is not a single JSON-RPC object")
	}
	if !json.Valid(frame) {
		return nil, malformedf("reply is not valid JSON")
	}
	var (
		jsonrpc, rawID, rawErr, result []byte
		seen                           [5]bool
	)
	err := eachMember(frame, func(k, v []byte) error {
		n := -1
		switch string(k) {
		case "jsonrpc":
			n, jsonrpc = 0, v
		case "id":
			n, rawID = 1, v
		case "error":
			n, rawErr = 2, v
		case "result":
			n, result = 3, v
		case "method":
			n = 4
		default:
			return nil // unknown envelope members are ignored (AHP-CORE-003)
		}
		if seen[n] {
			return fmt.Errorf("reply repeats member %q", k)
		}
		seen[n] = true
		return nil
	})
	if err != nil {
		return nil, malformedf("%v", err)
	}
	if !seen[0] || !jsonString(jsonrpc, "2.0") {
		return nil, malformedf(`reply jsonrpc must be "2.0"`)
	}
	if seen[4] {
		return nil, malformedf("reply carries a method: it is a request, not a response")
	}
	if !seen[1] {
		return nil, malformedf("reply has no id")
	}
	switch firstByte(rawID) {
	case '"':
		if s.requestID != "" && !jsonString(rawID, s.requestID) {
			return nil, wrongIDf("reply id does not match the request id")
		}
		if jsonString(rawID, "") {
			return nil, malformedf("reply id is empty")
		}
	case 'n':
		// A null id answers a request the backend could not parse; never ours.
		if s.requestID != "" {
			return nil, wrongIDf("reply id does not match the request id")
		}
	default:
		if !isJSONInteger(rawID) {
			return nil, malformedf("reply id must be a string or an integer")
		}
		// The request id is the event id, a string: a number never equals it (JSON value
		// equality, not textual).
		if s.requestID != "" {
			return nil, wrongIDf("reply id does not match the request id")
		}
	}
	switch {
	case seen[2] && seen[3]:
		return nil, malformedf("reply carries both result and error")
	case seen[2]:
		o, err := decodeObject(rawErr)
		if err != nil {
			return nil, malformedf("reply error member is not an object")
		}
		if raw, ok := o["code"]; !ok || !isJSONInteger(raw) {
			return nil, malformedf("reply error has no integer code")
		}
		if _, ok, err := o.str("message"); err != nil || !ok {
			return nil, malformedf("reply error has no message")
		}
		// Any error response to hooks/intercept is an operational failure; the backend's
		// message and data are untrusted and never carried further — only the code.
		return nil, &transport.Error{Kind: transport.KindRPCError, Err: fmt.Errorf("backend answered JSON-RPC error %s", bytes.TrimSpace(o["code"]))}
	case !seen[3]:
		return nil, malformedf("reply has neither result nor error")
	}
	return result, nil
}

// jsonString reports whether raw is the JSON string want, without allocating in the
// common case of a string with no escapes.
func jsonString(raw []byte, want string) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == want
	}
	var got string
	return json.Unmarshal(raw, &got) == nil && got == want
}

// result checks the hooks/intercept result object and returns its effects.
func (s *stager) result(raw []byte) ([][]byte, error) {
	if !isJSONObject(raw) {
		return nil, invalidf("result must be an object")
	}
	var (
		version, ext, effects  []byte
		hasVersion, hasEffects bool
		hasManifest, hasExt    bool
	)
	_ = eachMember(raw, func(k, v []byte) error {
		switch string(k) {
		case "protocolVersion":
			version, hasVersion = v, true
		case "effects":
			effects, hasEffects = v, true
		case "manifest":
			hasManifest = true
		case "extensions":
			ext, hasExt = v, true
		}
		return nil // other result members are ignored
	})
	// AHP-VER-001: every successful result carries the snapshot id.
	if !hasVersion || firstByte(version) != '"' {
		return nil, invalidf("result.protocolVersion is required")
	}
	if !jsonString(version, ahp.ProtocolVersion) {
		return nil, invalidf("result.protocolVersion is not %q", ahp.ProtocolVersion)
	}
	if hasManifest {
		return nil, invalidf("an intercept result must not carry a manifest")
	}
	if hasExt {
		var err error
		if s.extensions, err = parseExtensions(ext); err != nil {
			return nil, invalidf("result.%v", err)
		}
	}
	// AHP-DEC-001: an ordered effects array is required; null or missing is invalid, an
	// empty array means "no change requested" (never permission, AHP-DEC-003).
	if !hasEffects {
		return nil, invalidf("result.effects is required")
	}
	if !isJSONArray(effects) {
		return nil, invalidf("result.effects must be an array")
	}
	var out [][]byte
	_ = eachElement(effects, func(v []byte) error {
		out = append(out, v)
		return nil
	})
	return out, nil
}
