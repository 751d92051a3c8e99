package mapping

import (
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// Members is the top level of a JSON object body, read in one pass. A request's messages
// are most of its bytes: every separate gjson Get, and every sjson Delete, of a top-level
// member rescans them, and a decode asks for half a dozen members. Reading the members once
// turns those scans into lookups.
//
// The body has passed a strict check first, so keys are unique and Get has one answer.
type Members struct {
	s    string
	keys []gjson.Result
	vals []gjson.Result
}

// TopMembers lists the members of root, which must be a parsed JSON object from a body
// that passed the strict check. The members' values are located with a fast skip over
// string literals (a vectorised search for the closing quote) rather than gjson's byte
// loop, and are returned unparsed: gjson parses a container value lazily, and a string
// value is decoded here once.
func TopMembers(root gjson.Result) Members {
	m := Members{s: root.Raw}
	base := root.Index // gjson's indexes count from the start of the parsed text
	eachMember(root, nil, func(k, v gjson.Result) {
		k.Index -= base
		v.Index -= base
		m.keys = append(m.keys, k)
		m.vals = append(m.vals, v)
	})
	return m
}

// Pick sets out[j] to the value of the member of obj named names[j], in one pass over obj
// and without allocating; a member obj does not have is left as it was (the zero Result
// does not Exist), and a member obj repeats gives its first value, as gjson's Get does.
// It is for decoders that read several members of many small objects.
func Pick(obj gjson.Result, names []string, out []gjson.Result) {
	(*Arena)(nil).Pick(obj, names, out)
}

// eachMember calls fn with each member of obj, a parsed JSON object from a body that
// passed the strict check, with indexes counted as gjson counts them. String values are
// decoded into a, or allocated when a is nil.
func eachMember(obj gjson.Result, a *Arena, fn func(k, v gjson.Result)) {
	s, base := obj.Raw, obj.Index
	memberSpans(s, func(kStart, kEnd, vStart, vEnd int) bool {
		fn(valueAt(s, kStart, kEnd, base, a), valueAt(s, vStart, vEnd, base, a))
		return true
	})
}

// memberSpans calls fn with the spans of each member's key literal and value in the object
// s (a text that passed the strict check), until fn returns false.
func memberSpans(s string, fn func(kStart, kEnd, vStart, vEnd int) bool) {
	i := jsontext.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return
	}
	i = jsontext.SkipSpace(s, i+1)
	for i < len(s) && s[i] == '"' {
		kEnd := jsontext.SkipValue(s, i)
		k := i
		i = jsontext.SkipSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return
		}
		vStart := jsontext.SkipSpace(s, i+1)
		vEnd := jsontext.SkipValue(s, vStart)
		if vEnd <= vStart || !fn(k, kEnd, vStart, vEnd) {
			return
		}
		i = jsontext.SkipSpace(s, vEnd)
		if i < len(s) && s[i] == ',' {
			i = jsontext.SkipSpace(s, i+1)
		}
	}
}

// MembersRaw calls fn with each member of the object s (a text that passed the strict
// check): its name, unescaped, and its value's raw JSON, until fn returns false.
func MembersRaw(s string, fn func(key, raw string) bool) {
	memberSpans(s, func(kStart, kEnd, vStart, vEnd int) bool {
		key := s[kStart+1 : kEnd-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = jsontext.Unquote(s[kStart:kEnd])
		}
		return fn(key, s[vStart:vEnd])
	})
}

// Elements calls fn with each element of arr, a parsed JSON array from a body that passed
// the strict check, until fn returns false. It is gjson's ForEach with the fast skip of
// TopMembers; each element's Index counts from the start of the parsed text, as gjson's do.
func Elements(arr gjson.Result, fn func(elem gjson.Result) bool) {
	s := arr.Raw
	elementSpans(s, func(start, end int) bool { return fn(valueAt(s, start, end, arr.Index, nil)) })
}

// ElementsRaw calls fn with the raw JSON of each element of the array s (a text that
// passed the strict check), until fn returns false.
func ElementsRaw(s string, fn func(elem string) bool) {
	elementSpans(s, func(start, end int) bool { return fn(s[start:end]) })
}

// elementSpans calls fn with the span of each element of the array s (a text that passed
// the strict check), until fn returns false.
func elementSpans(s string, fn func(start, end int) bool) {
	i := jsontext.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return
	}
	i = jsontext.SkipSpace(s, i+1)
	for i < len(s) && s[i] != ']' {
		end := jsontext.SkipValue(s, i)
		if end <= i || !fn(i, end) {
			return
		}
		i = jsontext.SkipSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsontext.SkipSpace(s, i+1)
		}
	}
}

// valueAt is the gjson result for the value s[start:end], with Index base+start. A
// container is left for gjson to walk when asked; a string is decoded now.
func valueAt(s string, start, end, base int, a *Arena) gjson.Result {
	raw := s[start:end]
	if raw == "" {
		return gjson.Result{}
	}
	var r gjson.Result
	if raw[0] == '"' {
		r = gjson.Result{Type: gjson.String, Raw: raw, Str: a.Unquote(raw)}
	} else {
		r = gjson.Parse(raw)
	}
	r.Index = base + start
	return r
}

// Get returns the value of the member named name; the result does not Exist when there
// is none.
func (m Members) Get(name string) gjson.Result {
	for i, k := range m.keys {
		if k.Str == name {
			return m.vals[i]
		}
	}
	return gjson.Result{}
}

// Without returns the object's text with the named members removed; everything else,
// whitespace between the remaining members included, is kept byte for byte (the result
// sjson.Delete gives, without a rescan per member).
func (m Members) Without(names ...string) string {
	drop := func(i int) bool {
		for _, n := range names {
			if m.keys[i].Str == n {
				return true
			}
		}
		return false
	}
	size := len(m.s)
	for i := range m.keys {
		if drop(i) {
			size -= m.valueEnd(i) - m.keys[i].Index
		}
	}
	if size == len(m.s) {
		return m.s
	}
	var b strings.Builder
	b.Grow(size) // the messages are most of a body: size the copy without them
	kept := 0
	for i := range m.keys {
		if drop(i) {
			continue
		}
		if kept == 0 {
			b.WriteString(m.s[:m.keys[0].Index]) // "{" and the whitespace before the first key
		} else {
			b.WriteString(m.sepAfter(m.prevKept(i, drop)))
		}
		b.WriteString(m.s[m.keys[i].Index:m.valueEnd(i)])
		kept++
	}
	if kept == 0 {
		return "{}"
	}
	b.WriteString(m.s[m.valueEnd(len(m.keys)-1):]) // whitespace and "}" after the last member
	return b.String()
}

// valueEnd is the offset just past member i's value.
func (m Members) valueEnd(i int) int { return m.vals[i].Index + len(m.vals[i].Raw) }

// sepAfter is the text between member i's value and the next member's key: the comma and
// the whitespace around it.
func (m Members) sepAfter(i int) string { return m.s[m.valueEnd(i):m.keys[i+1].Index] }

// prevKept is the index of the last kept member before i.
func (m Members) prevKept(i int, drop func(int) bool) int {
	for j := i - 1; j >= 0; j-- {
		if !drop(j) {
			return j
		}
	}
	return -1
}

// BytesString returns b as a string sharing its memory. Decoders use it on request bodies
// they are handed and that nobody writes to afterwards (the Translator contract), so the
// canonical text can alias the body instead of a 32 KiB copy of it.
func BytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
