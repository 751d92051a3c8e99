package mapping

import (
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// Arena holds the small values one decode makes: decoded strings (text with escapes,
// derived ids) and the text pointers of canonical parts. An agent's request repeats its
// whole conversation, hundreds of messages, on every call; taken one by one these values
// are several allocations per message, each a cost for the allocator and later for the
// collector. An arena places them in a few buffers instead.
//
// A value placed in an arena is never written again: new values go after it, and a full
// buffer is replaced, never grown in place. The strings it returns are therefore as
// immutable as any Go string; they keep their buffer alive while referenced. The zero
// Arena is ready to use. An Arena belongs to one decode and one goroutine.
type Arena struct {
	buf     []byte
	texts   []string
	grown   int    // bytes allocated so far, to size the next buffer
	textsN  int    // text pointer blocks allocated so far
	scratch []byte // reused for building a value before it is placed
}

// Arena buffer sizes: the first buffer is small (most requests are small), later ones
// double, up to a cap that keeps a single buffer's zeroing cheap.
const (
	arenaMinBytes = 1 << 10
	arenaMaxBytes = 64 << 10
	arenaTexts    = 64
)

// reserve makes room for n more bytes in the current buffer.
func (a *Arena) reserve(n int) {
	if cap(a.buf)-len(a.buf) >= n {
		return
	}
	size := min(max(a.grown, arenaMinBytes), arenaMaxBytes)
	size = max(size, n)
	a.buf = make([]byte, 0, size)
	a.grown += size
}

// Unquote returns the value of the JSON string literal lit as jsontext.Unquote does: a
// literal without escapes is a substring of lit, a long one with escapes comes from the
// values earlier requests decoded (knownLiterals), any other is decoded into the arena.
func (a *Arena) Unquote(lit string) string {
	if a == nil {
		return jsontext.Unquote(lit)
	}
	if len(lit) < 2 {
		return ""
	}
	if strings.IndexByte(lit[1:len(lit)-1], '\\') < 0 {
		return lit[1 : len(lit)-1]
	}
	if len(lit) >= minKnownLiteral {
		return knownLiterals.unquote(lit)
	}
	a.reserve(len(lit)) // a value is never longer than its literal
	start := len(a.buf)
	a.buf = jsontext.AppendUnquote(a.buf, lit)
	return a.since(start)
}

// String returns a copy of b held in the arena (a nil arena allocates it).
func (a *Arena) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if a == nil {
		return string(b)
	}
	a.reserve(len(b))
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.since(start)
}

// since returns the bytes appended after start as a string.
func (a *Arena) since(start int) string {
	if len(a.buf) == start {
		return ""
	}
	return unsafe.String(&a.buf[start], len(a.buf)-start)
}

// Allocated is how many bytes the arena has allocated: what the values it handed out can
// keep alive (a memo of decoded requests counts it).
func (a *Arena) Allocated() int64 {
	return int64(a.grown) + int64(a.textsN)*arenaTexts*int64(unsafe.Sizeof(""))
}

// Text returns a pointer to a copy of s, for a part's Text field (a nil arena allocates
// it).
func (a *Arena) Text(s string) *string {
	if a == nil {
		// Not &s: taking the parameter's address would move it to the heap on every call,
		// arena or not.
		p := new(string)
		*p = s
		return p
	}
	if len(a.texts) == cap(a.texts) {
		a.texts = make([]string, 0, arenaTexts)
		a.textsN++
	}
	a.texts = append(a.texts, s)
	return &a.texts[len(a.texts)-1]
}

// ToolCallPart is mapping.ToolCallPart with the part's text and text pointer held in the
// arena (a nil arena allocates them). heldInput is the call's input as the text holds it
// (compacted), a substring of that text.
func (a *Arena) ToolCallPart(partID, id, name, input string) (p ahp.Part, heldInput string) {
	var scratch []byte
	if a != nil {
		scratch = a.scratch[:0]
	}
	b, at := appendToolCall(scratch, id, name, input)
	if a != nil {
		a.scratch = b
	}
	text := a.String(b)
	p = ahp.Part{ID: partID, Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody,
		Category: ahp.CategoryToolCall, Text: a.Text(text)}
	return p, text[at : len(text)-1]
}

// Pick is mapping.Pick with string values decoded into the arena.
func (a *Arena) Pick(obj gjson.Result, names []string, out []gjson.Result) {
	s := obj.Raw
	if i := jsontext.SkipSpace(s, 0); i < len(s) && s[i] == '{' {
		a.pickObject(s, i, obj.Index, names, out)
	}
}

// PickElements calls fn with each element of arr, a parsed JSON array from a body that
// passed the strict check, until fn returns false; before each call out holds the members
// named names of that element when it is an object (zero Results otherwise), as Pick sets
// them. Each element is read once: finding where an object ends and picking its members
// is the same pass.
func (a *Arena) PickElements(arr gjson.Result, names []string, out []gjson.Result, fn func(elem gjson.Result) bool) {
	s := arr.Raw
	i := jsontext.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return
	}
	i = jsontext.SkipSpace(s, i+1)
	for i < len(s) && s[i] != ']' {
		clear(out)
		var end int
		if s[i] == '{' {
			end = a.pickObject(s, i, arr.Index, names, out)
		} else {
			end = jsontext.SkipValue(s, i)
		}
		elem := gjson.Result{Type: gjson.JSON, Raw: s[i:end], Index: arr.Index + i}
		if s[i] != '{' {
			elem = valueAt(s, i, end, arr.Index, a)
		}
		if !fn(elem) {
			return
		}
		i = jsontext.SkipSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = jsontext.SkipSpace(s, i+1)
		}
	}
}

// pickObject reads the object that opens at s[open] (a text that passed the strict check),
// sets out[j] to the value of its member names[j] (the first, should one repeat), and
// returns the index just past the object. Members not asked for are skipped without being
// decoded.
func (a *Arena) pickObject(s string, open, base int, names []string, out []gjson.Result) int {
	if len(names) > 64 {
		panic("mapping: Pick reads at most 64 members") // a programming error, not input
	}
	var seen uint64
	i := jsontext.SkipSpace(s, open+1)
	for i < len(s) && s[i] == '"' {
		kEnd := jsontext.SkipValue(s, i)
		key := s[i+1 : kEnd-1]
		if strings.IndexByte(key, '\\') >= 0 {
			key = a.Unquote(s[i:kEnd])
		}
		i = jsontext.SkipSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return i
		}
		vStart := jsontext.SkipSpace(s, i+1)
		vEnd := jsontext.SkipValue(s, vStart)
		for j, n := range names {
			if key == n {
				if seen&(1<<j) == 0 {
					out[j], seen = valueAt(s, vStart, vEnd, base, a), seen|1<<j
				}
				break
			}
		}
		i = jsontext.SkipSpace(s, vEnd)
		if i < len(s) && s[i] == ',' {
			i = jsontext.SkipSpace(s, i+1)
		}
	}
	if i < len(s) && s[i] == '}' {
		i++
	}
	return i
}
