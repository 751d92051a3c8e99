package policies

// A small JSON reader and writer for the values a policy inspects per request: tool.input
// objects, tool_call part texts and model params. encoding/json would do the job through
// reflection and would re-order object keys when re-encoding a generic value; this reader
// keeps key order, decodes string escapes exactly once (so "\u0072m -rf /" is seen as
// "rm -rf /"), and never panics on hostile input (depth and syntax errors are errors).

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

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
// elems in source order (duplicate keys are kept as they appear).
type jsonValue struct {
	kind  jsonKind
	lit   string
	str   string
	keys  []string
	elems []jsonValue
}

// maxJSONDepth bounds nesting so that a hostile input cannot exhaust the stack.
const maxJSONDepth = 512

var errJSONDepth = errors.New("json: nesting too deep")

type jsonParser struct {
	data  []byte
	pos   int
	depth int
}

// parseJSON parses one complete JSON document.
func parseJSON(data []byte) (jsonValue, error) {
	p := jsonParser{data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return jsonValue{}, p.errorf("trailing data")
	}
	return v, nil
}

func (p *jsonParser) errorf(format string, a ...any) error {
	return fmt.Errorf("json: offset %d: %s", p.pos, fmt.Sprintf(format, a...))
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jsonValue, error) {
	if p.pos >= len(p.data) {
		return jsonValue{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return jsonValue{kind: jsonString, str: s}, err
	case c == 't':
		return p.literal("true", jsonBool)
	case c == 'f':
		return p.literal("false", jsonBool)
	case c == 'n':
		return p.literal("null", jsonNull)
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		if err := p.number(); err != nil {
			return jsonValue{}, err
		}
		return jsonValue{kind: jsonNumber, lit: string(p.data[start:p.pos])}, nil
	default:
		return jsonValue{}, p.errorf("unexpected character %q", c)
	}
}

func (p *jsonParser) literal(word string, k jsonKind) (jsonValue, error) {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return jsonValue{}, p.errorf("invalid literal")
	}
	p.pos += len(word)
	return jsonValue{kind: k, lit: word}, nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return errJSONDepth
	}
	return nil
}

func (p *jsonParser) object() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '{'
	v := jsonValue{kind: jsonObject}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return jsonValue{}, p.errorf("expected object key")
		}
		k, err := p.string()
		if err != nil {
			return jsonValue{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return jsonValue{}, p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		e, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		v.keys = append(v.keys, k)
		v.elems = append(v.elems, e)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return jsonValue{}, p.errorf("unterminated object")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == '}' {
			p.pos++
			return v, nil
		}
		return jsonValue{}, p.errorf("expected ',' or '}'")
	}
}

func (p *jsonParser) array() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '['
	v := jsonValue{kind: jsonArray}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		e, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		v.elems = append(v.elems, e)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return jsonValue{}, p.errorf("unterminated array")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == ']' {
			p.pos++
			return v, nil
		}
		return jsonValue{}, p.errorf("expected ',' or ']'")
	}
}

func (p *jsonParser) number() error {
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		p.pos = i
		return p.errorf("invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return p.errorf("invalid number")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return p.errorf("invalid number")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	p.pos = i
	return nil
}

// string decodes a string literal starting at the opening quote.
func (p *jsonParser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("control character in string")
		}
		p.pos++
	}
	// Slow path. The decoded string is never longer than the literal (an escape is at least
	// as long as what it stands for), so the builder is sized once to the literal, found by
	// skipping escapes, and its bytes become the string without a copy; runs between
	// escapes are copied whole. (Growing a small buffer byte by byte and copying it into a
	// string was most of the tools policy's time on a 4 KiB file write with line breaks.)
	end := p.pos
	for end < len(p.data) && p.data[end] != '"' {
		if p.data[end] == '\\' {
			end++
		}
		end++
	}
	var buf strings.Builder
	buf.Grow(min(end, len(p.data)) - start)
	buf.Write(p.data[start:p.pos])
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return buf.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c != '\\':
			run := p.pos + 1
			for run < len(p.data) && p.data[run] >= 0x20 && p.data[run] != '"' && p.data[run] != '\\' {
				run++
			}
			buf.Write(p.data[p.pos:run])
			p.pos = run
			continue
		}
		// escape
		if p.pos+1 >= len(p.data) {
			return "", p.errorf("unterminated escape")
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf.WriteByte(e)
		case 'b':
			buf.WriteByte('\b')
		case 'f':
			buf.WriteByte('\f')
		case 'n':
			buf.WriteByte('\n')
		case 'r':
			buf.WriteByte('\r')
		case 't':
			buf.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by an escaped low surrogate; anything
				// else decodes to U+FFFD, as encoding/json does.
				r2 := rune(utf8.RuneError)
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					save := p.pos
					p.pos += 2
					if lo, ok := p.hex4(); ok {
						if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
							r2 = dec
						} else {
							p.pos = save
						}
					} else {
						p.pos = save
					}
				}
				r = r2
			}
			buf.WriteRune(r)
		default:
			return "", p.errorf("invalid escape %q", e)
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(n), true
}

// skipValue validates and skips one value without building it.
func (p *jsonParser) skipValue() error {
	if p.pos >= len(p.data) {
		return p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{' || c == '[':
		// Containers are rare in the places skipValue is used (model params); building
		// and dropping them keeps one code path for validation.
		_, err := p.value()
		return err
	case c == '"':
		p.pos++
		for p.pos < len(p.data) {
			switch p.data[p.pos] {
			case '"':
				p.pos++
				return nil
			case '\\':
				p.pos += 2
			default:
				p.pos++
			}
		}
		return p.errorf("unterminated string")
	default:
		_, err := p.value()
		return err
	}
}

// topLevelMembers calls fn with the raw source of each top-level member whose key is in
// want, without building the other members' values. It returns an error when data is not
// a JSON object.
func topLevelMembers(data []byte, want func(key string) bool, fn func(key string, v jsonValue)) error {
	p := jsonParser{data: data}
	p.skipSpace()
	if p.pos >= len(p.data) || p.data[p.pos] != '{' {
		return errors.New("json: not an object")
	}
	p.pos++
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.errorf("expected object key")
		}
		k, err := p.string()
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		if want(k) {
			v, err := p.value()
			if err != nil {
				return err
			}
			fn(k, v)
		} else if err := p.skipValue(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.errorf("unterminated object")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == '}' {
			return nil
		}
		return p.errorf("expected ',' or '}'")
	}
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
	case jsonArray:
		changed := false
		for i := range v.elems {
			if v.elems[i].rewriteStrings(key, fn) {
				changed = true
			}
		}
		return changed
	case jsonObject:
		changed := false
		for i := range v.elems {
			if v.elems[i].rewriteStrings(v.keys[i], fn) {
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
