package chain

// Strict decoding of backend replies (AHP spec, base/failure.md "Failure classes"). Effect
// objects are closed on the wire, so they are decoded through maps: a struct decode would match
// keys case-insensitively and silently drop unknown members, which is exactly what AHP-CORE-003
// forbids inside effects. The envelope is read by an allocation-free scanner, because every
// reply of the hot path goes through it. Canonical content (messages and parts) is validated
// and decoded by chain/ahp, its single owner.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsonpath"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// object is a decoded JSON object with exact (case-sensitive) member names.
type object map[string]json.RawMessage

// firstByte returns the first non-whitespace byte of raw, or 0.
func firstByte(raw []byte) byte {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b
	}
	return 0
}

func isJSONObject(raw []byte) bool { return firstByte(raw) == '{' }
func isJSONArray(raw []byte) bool  { return firstByte(raw) == '[' }
func isJSONNull(raw []byte) bool   { return firstByte(raw) == 'n' }

// decodeObject decodes raw as a JSON object; null, arrays and scalars are errors.
func decodeObject(raw []byte) (object, error) {
	if !isJSONObject(raw) {
		return nil, errors.New("must be an object")
	}
	var m object
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("must be an object")
	}
	return m, nil
}

// closed rejects members outside allowed.
func (o object) closed(allowed ...string) error {
	for k := range o {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("unknown member %q", k)
		}
	}
	return nil
}

// str returns the string member key. present is false when the member is absent.
func (o object) str(key string) (s string, present bool, err error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	if firstByte(raw) != '"' {
		return "", true, fmt.Errorf("%s must be a string", key)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, fmt.Errorf("%s must be a string", key)
	}
	return s, true, nil
}

// reqStr returns a required string member that must be at least minLen bytes long.
func (o object) reqStr(key string, minLen int) (string, error) {
	s, ok, err := o.str(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s is required", key)
	}
	if len(s) < minLen {
		return "", fmt.Errorf("%s must not be empty", key)
	}
	return s, nil
}

// parseExtensions checks an extensions object: reverse-DNS keys, any values.
func parseExtensions(raw []byte) (map[string]json.RawMessage, error) {
	o, err := decodeObject(raw)
	if err != nil {
		return nil, errors.New("extensions must be an object")
	}
	for k := range o {
		if !ahp.IsReverseDNS(k) {
			return nil, fmt.Errorf("extension key %q is not reverse-DNS", k)
		}
	}
	return o, nil
}

// flatAnswer checks an MCP elicitation answer object: every value is a string, number,
// boolean or array of strings (pinned MCP ElicitResult.content; no nested objects).
func flatAnswer(o object) error {
	for k, v := range o {
		switch firstByte(v) {
		case '"', 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case '[':
			var a []json.RawMessage
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("answer field %q is malformed", k)
			}
			for _, e := range a {
				if firstByte(e) != '"' {
					return fmt.Errorf("answer field %q must be an array of strings", k)
				}
			}
		default:
			return fmt.Errorf("answer field %q must be a string, number, boolean or array of strings", k)
		}
	}
	return nil
}

// isJSONInteger reports whether raw is a JSON number with an integer value (1.0 counts).
func isJSONInteger(raw []byte) bool {
	var n json.Number
	if firstByte(raw) == '"' || json.Unmarshal(raw, &n) != nil {
		return false
	}
	_, ok := jsonpath.Integer(n)
	return ok
}

// eachMember calls fn for every member of the JSON object raw, in order, with the member
// name and the raw value (a subslice of raw: fn must not retain it). raw must already be
// known to be valid JSON (json.Valid); this is the allocation-free path used for reply
// envelopes, where every call of the hot path goes.
func eachMember(raw []byte, fn func(key []byte, val []byte) error) error {
	s := bytesView(raw)
	i := jsontext.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return errors.New("must be an object")
	}
	i = jsontext.SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return nil
	}
	for i < len(s) {
		end := jsontext.SkipValue(s, i)
		key := raw[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(raw[i:end], &k) != nil {
				return errors.New("malformed member name")
			}
			key = []byte(k)
		}
		i = jsontext.SkipSpace(s, end)
		i = jsontext.SkipSpace(s, i+1) // ':'
		vend := jsontext.SkipValue(s, i)
		if err := fn(key, raw[i:vend]); err != nil {
			return err
		}
		i = jsontext.SkipSpace(s, vend)
		if i < len(s) && s[i] == '}' {
			return nil
		}
		i = jsontext.SkipSpace(s, i+1) // ','
	}
	return errors.New("must be an object")
}

// eachElement calls fn for every element of the JSON array raw (valid JSON required).
func eachElement(raw []byte, fn func(val []byte) error) error {
	s := bytesView(raw)
	i := jsontext.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return errors.New("must be an array")
	}
	i = jsontext.SkipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return nil
	}
	for i < len(s) {
		vend := jsontext.SkipValue(s, i)
		if err := fn(raw[i:vend]); err != nil {
			return err
		}
		i = jsontext.SkipSpace(s, vend)
		if i < len(s) && s[i] == ']' {
			return nil
		}
		i = jsontext.SkipSpace(s, i+1) // ','
	}
	return errors.New("must be an array")
}

// bytesView is b as a string, without a copy: the scanners only read it.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
