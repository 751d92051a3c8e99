package policies

// The values a policy inspects per request — tool.input objects, tool_call part texts,
// model params — as a small tree: encoding/json would decode them through reflection and
// re-order object keys when re-encoding a generic value. The tree keeps key order, holds
// strings decoded exactly once (so "\u0072m -rf /" is seen as "rm -rf /"), and is written
// back as compact JSON. Validation is jsontext.Check's: what encoding/json accepts, bounded
// in depth (hostile nesting is an error, never a deep recursion) and without duplicate keys
// (a policy must not judge one value where a consumer reads the other); the tree is then
// built with jsontext's scanners, the project's one hand-written JSON layer.

import (
	"errors"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is one parsed JSON value. Literals (null, true, false, numbers) keep their
// source text in lit; strings are decoded into str; arrays use elems; objects use keys and
// elems in source order.
type jsonValue struct {
	kind  jsonKind
	lit   string
	str   string
	keys  []string
	elems []jsonValue
}

// maxJSONDepth is the nesting the policies read: exactly what the codecs accept for tool
// arguments (encoding/json's bound, jsontext.MaxNesting). A lower bound here made a policy
// read nothing of an input that nested an array deeper beside the command, while the
// client still parsed the command. The tree is built recursively; ten thousand frames
// fit a goroutine's growable stack.
const maxJSONDepth = jsontext.MaxNesting

var errNotObject = errors.New("json: not an object")

// parseJSON parses one complete JSON document.
func parseJSON(data []byte) (jsonValue, error) {
	if err := jsontext.Check(data, maxJSONDepth); err != nil {
		return jsonValue{}, err
	}
	s := string(data) // the tree's strings alias this one copy
	v, _ := treeAt(s, jsontext.SkipSpace(s, 0))
	return v, nil
}

// topLevelMembers calls fn with each top-level member whose key is in want, without
// building the other members' values. It returns an error when data is not a JSON object.
func topLevelMembers(data []byte, want func(key string) bool, fn func(key string, v jsonValue)) error {
	if err := jsontext.Check(data, maxJSONDepth); err != nil {
		return err
	}
	s := string(data)
	i := jsontext.SkipSpace(s, 0)
	if s[i] != '{' {
		return errNotObject
	}
	eachMember(s, i, func(k string, at int) int {
		if !want(k) {
			return jsontext.SkipValue(s, at)
		}
		v, end := treeAt(s, at)
		fn(k, v)
		return end
	})
	return nil
}

// eachMember walks the members of the valid object opening at s[open]: fn gets each key
// and the index of its value, and returns the index just past that value. It returns the
// index just past the object.
func eachMember(s string, open int, fn func(key string, at int) int) int {
	i := jsontext.SkipSpace(s, open+1)
	for i < len(s) && s[i] != '}' {
		end := jsontext.StringEnd(s, i)
		key := jsontext.Unquote(s[i : end+1])
		i = jsontext.SkipSpace(s, jsontext.SkipSpace(s, end+1)+1) // past the colon
		i = jsontext.SkipSpace(s, fn(key, i))
		if i < len(s) && s[i] == ',' {
			i = jsontext.SkipSpace(s, i+1)
		}
	}
	return i + 1
}

// treeAt builds the tree of the valid value starting at s[i] and returns the index just
// past it. Strings are decoded by jsontext.Unquote: as gjson decodes them, a lone
// surrogate escape becoming U+FFFD.
func treeAt(s string, i int) (jsonValue, int) {
	switch s[i] {
	case '"':
		end := jsontext.StringEnd(s, i)
		return jsonValue{kind: jsonString, str: jsontext.Unquote(s[i : end+1])}, end + 1
	case '{':
		v := jsonValue{kind: jsonObject}
		end := eachMember(s, i, func(k string, at int) int {
			e, next := treeAt(s, at)
			v.keys, v.elems = append(v.keys, k), append(v.elems, e)
			return next
		})
		return v, end
	case '[':
		v := jsonValue{kind: jsonArray}
		j := jsontext.SkipSpace(s, i+1)
		for j < len(s) && s[j] != ']' {
			e, next := treeAt(s, j)
			v.elems = append(v.elems, e)
			j = jsontext.SkipSpace(s, next)
			if j < len(s) && s[j] == ',' {
				j = jsontext.SkipSpace(s, j+1)
			}
		}
		return v, j + 1
	}
	end := jsontext.SkipValue(s, i)
	switch s[i] {
	case 't', 'f':
		return jsonValue{kind: jsonBool, lit: s[i:end]}, end
	case 'n':
		return jsonValue{kind: jsonNull, lit: "null"}, end
	}
	return jsonValue{kind: jsonNumber, lit: s[i:end]}, end
}

// appendJSON writes v as compact JSON: no insignificant whitespace, keys in source order,
// strings with the minimal escaping of appendJSONString.
func (v *jsonValue) appendJSON(dst []byte) []byte {
	switch v.kind {
	case jsonString:
		return appendJSONString(dst, v.str)
	case jsonArray:
		dst = append(dst, '[')
		for i := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = v.elems[i].appendJSON(dst)
		}
		return append(dst, ']')
	case jsonObject:
		dst = append(dst, '{')
		for i := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v.keys[i])
			dst = append(dst, ':')
			dst = v.elems[i].appendJSON(dst)
		}
		return append(dst, '}')
	default:
		return append(dst, v.lit...)
	}
}

// eachString calls fn for every string value in v (not object keys), depth first, with the
// key of the nearest enclosing object member ("" inside arrays or at the top).
func (v *jsonValue) eachString(key string, fn func(key, s string)) {
	switch v.kind {
	case jsonString:
		fn(key, v.str)
	case jsonArray:
		for i := range v.elems {
			v.elems[i].eachString(key, fn)
		}
	case jsonObject:
		for i := range v.elems {
			v.elems[i].eachString(v.keys[i], fn)
		}
	}
}

// rewriteStrings replaces every string value (not object keys) for which fn reports a
// change, in place. It returns whether anything changed.
func (v *jsonValue) rewriteStrings(key string, fn func(key, s string) (string, bool)) bool {
	switch v.kind {
	case jsonString:
		if ns, ok := fn(key, v.str); ok {
			v.str = ns
			return true
		}
	case jsonArray, jsonObject:
		changed := false
		for i := range v.elems {
			k := key
			if v.kind == jsonObject {
				k = v.keys[i]
			}
			if v.elems[i].rewriteStrings(k, fn) {
				changed = true
			}
		}
		return changed
	}
	return false
}

// appendJSONString writes s as a JSON string literal with minimal escaping (no HTML
// escapes: patterns such as "> /dev/sda" match the canonical text, and audit records stay
// readable).
func appendJSONString(dst []byte, s string) []byte { return jsontext.AppendStringJS(dst, s) }
