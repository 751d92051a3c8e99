package oaiwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/mapping"
)

// MaxRequestDepth bounds the nesting of a client body. Real requests nest a few levels (tool
// parameter schemas the deepest); the bound keeps every later walk linear and shallow.
const MaxRequestDepth = 256

// CheckClientJSON validates a client body before anything reads it: syntax, nesting depth,
// and no duplicate object keys. Duplicate keys matter because gjson reads the first
// occurrence while most upstream parsers keep the last one, so a body with two "messages"
// or two "input" members would let a policy inspect one value while the model receives the
// other. One iterative pass (jsontext.Check), no allocation for ordinary bodies; it accepts
// exactly what encoding/json.Valid accepts, and a syntax error wins over the other faults.
func CheckClientJSON(raw []byte) error {
	err := jsontext.Check(raw, MaxRequestDepth)
	if err == nil {
		return nil
	}
	var ce *jsontext.CheckError
	errors.As(err, &ce)
	switch ce.Kind {
	case jsontext.ErrDepth:
		return fmt.Errorf("JSON nesting deeper than %d levels", MaxRequestDepth)
	case jsontext.ErrDuplicateKey:
		return fmt.Errorf("duplicate object key %q", ce.Key)
	}
	return fmt.Errorf("body is not valid JSON: %s at byte %d", ce.Msg, ce.Offset)
}

// NormalizeJSON is the form tool inputs are compared and re-rendered in: compact, with the
// HTML escapes encoding/json adds (\u003c, \u003e, \u0026) turned back into the characters,
// so that "<" in arguments stays "<" after a round through a tool_call part.
func NormalizeJSON(s string) string { return mapping.UnescapeHTML(mapping.CompactJSON(s)) }

// ParseArguments turns a native arguments string into a tool input object. ok is false when
// the string is not a JSON object; the input is then {}, since tool.before needs an object. An
// empty string means a call without arguments, which some OpenAI-compatible servers send. A
// JSON object nested deeper than jsontext.MaxInputNesting is an error: a client still parses
// and runs it, while nothing deeper can be carried to the policies whole.
func ParseArguments(args gjson.Result) (input string, ok bool, err error) {
	switch {
	case args.Type == gjson.String:
		s := strings.TrimSpace(args.Str)
		if s == "" {
			return "{}", true, nil
		}
		if s[0] == '{' && json.Valid(unsafe.Slice(unsafe.StringData(s), len(s))) { // read only
			if err := checkInputNesting(s); err != nil {
				return "", false, err
			}
			return NormalizeJSON(s), true, nil
		}
		// Not a JSON object: judged as its raw text, never as {} — a rule
		// over the input still sees "rm -rf /" in arguments that do not parse.
		return `{"` + mapping.RawArgumentsKey + `":` + mapping.Quote(args.Str) + `}`, false, nil
	case args.IsObject():
		// Some compatible servers send the arguments as an object instead of a string.
		if err := checkInputNesting(args.Raw); err != nil {
			return "", false, err
		}
		return NormalizeJSON(args.Raw), true, nil
	case !args.Exists() || args.Type == gjson.Null:
		return "{}", true, nil
	}
	return `{"` + mapping.RawArgumentsKey + `":` + mapping.Quote(args.Raw) + `}`, false, nil
}

// checkInputNesting refuses a valid JSON object nested deeper than a tool input may be.
// A text of n bytes nests at most n/2 levels, so ordinary arguments are not walked.
func checkInputNesting(s string) error {
	if len(s) <= 2*jsontext.MaxInputNesting {
		return nil
	}
	if d := jsontext.Nesting(s); d > jsontext.MaxInputNesting {
		return fmt.Errorf("tool call arguments nest %d levels, deeper than the %d a tool input may have", d, jsontext.MaxInputNesting)
	}
	return nil
}

// SplitText cuts s into pieces of at most n bytes at rune boundaries; "" is one empty piece,
// so that every text part has at least one delta, as the API sends it.
func SplitText(s string, n int) []string {
	if len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// UsagePaths names where an API reports each token count; an empty path is a count the API
// does not report.
type UsagePaths struct {
	Input, Output, CacheRead, CacheWrite string
}

// Usage maps a usage object; counts the provider did not report stay unknown (nil), never
// zero.
func Usage(u gjson.Result, paths UsagePaths) *ahp.Usage {
	if !u.IsObject() {
		return nil
	}
	count := func(path string) *int64 {
		if path == "" {
			return nil
		}
		v := u.Get(path)
		if v.Type != gjson.Number {
			return nil
		}
		n := v.Int()
		return &n
	}
	return &ahp.Usage{
		Kind: "amount", Scope: "attempt", Completeness: "complete", Provenance: "provider",
		InputTokens:      count(paths.Input),
		OutputTokens:     count(paths.Output),
		CacheReadTokens:  count(paths.CacheRead),
		CacheWriteTokens: count(paths.CacheWrite),
	}
}

// UpstreamError returns the error an OpenAI "error" member carries (an object with type or
// code and message, or a bare string), or nil. Status is left 0: the HTTP status belongs to
// the proxy, which has it.
func UpstreamError(e gjson.Result) *mapping.UpstreamError {
	switch {
	case e.IsObject():
		typ := e.Get("type").String()
		if typ == "" {
			typ = e.Get("code").String()
		}
		return &mapping.UpstreamError{Type: typ, Message: e.Get("message").String()}
	case e.Type == gjson.String:
		return &mapping.UpstreamError{Message: e.Str}
	}
	return nil
}

// ErrorBody renders OpenAI's error envelope, {"error":{"message","type","param":null,"code"}},
// which both APIs use; code is null when "".
func ErrorBody(errType, code, message string) []byte {
	b := make([]byte, 0, 64+len(message)+len(errType)+len(code))
	b = append(b, `{"error":{"message":`...)
	b = mapping.AppendQuote(b, message)
	b = append(b, `,"type":`...)
	b = mapping.AppendQuote(b, errType)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = mapping.AppendQuote(b, code)
	}
	return append(b, "}}"...)
}
