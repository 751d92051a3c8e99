package jsontext

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// MaxNesting is encoding/json's own nesting bound: json.Valid rejects a text that opens
// more than this many arrays and objects inside one another. The policies read every JSON
// value down to this depth, so nothing a codec accepts is deeper than what they read.
const MaxNesting = 10000

// MaxInputNesting is the one depth limit of a tool input: the codecs refuse arguments that
// nest deeper (though a client's parser may read them), and the policies read this deep.
// It leaves one level for the tool_call part that carries an input inside a message
// ({"id","name","input"}), which is read with encoding/json and so bounded by MaxNesting:
// an input one level deeper would make that part unreadable, and the call invisible.
const MaxInputNesting = MaxNesting - 1

// smallKeys is how many keys of one object the checker compares one by one; a larger
// object switches to a map, so huge objects stay linear.
const smallKeys = 16

// ErrorKind says what a CheckError is about.
type ErrorKind uint8

const (
	// ErrSyntax: the text is not JSON (exactly the texts encoding/json.Valid rejects).
	ErrSyntax ErrorKind = iota + 1
	// ErrDepth: arrays and objects nest deeper than the limit.
	ErrDepth
	// ErrDuplicateKey: an object has the same key twice.
	ErrDuplicateKey
	// ErrInvalidUTF8: a string holds bytes that are not UTF-8 (only with RejectInvalidUTF8).
	ErrInvalidUTF8
	// ErrKey: CheckOptions.EscapedKey refused a key.
	ErrKey
)

// CheckError is the error of Check. Offset is the index in the input of the byte where the
// fault was found (len(input) when the input ends too early): for ErrDepth the bracket that
// opens one level too many, for ErrDuplicateKey and ErrKey the opening quote of the key.
type CheckError struct {
	Kind   ErrorKind
	Offset int
	Msg    string // ErrSyntax: what is wrong, in encoding/json's words
	Limit  int    // ErrDepth: the nesting limit
	Key    string // ErrDuplicateKey, ErrKey: the key, unescaped
	Err    error  // ErrKey: the error of CheckOptions.EscapedKey
}

func (e *CheckError) Error() string {
	switch e.Kind {
	case ErrSyntax:
		return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
	case ErrDepth:
		return fmt.Sprintf("JSON nesting deeper than %d levels at byte %d", e.Limit, e.Offset)
	case ErrDuplicateKey:
		return fmt.Sprintf("duplicate object key %q at byte %d", e.Key, e.Offset)
	case ErrInvalidUTF8:
		return fmt.Sprintf("invalid UTF-8 in string at byte %d", e.Offset)
	case ErrKey:
		return fmt.Sprintf("object key %q at byte %d: %v", e.Key, e.Offset, e.Err)
	}
	return "invalid JSON"
}

func (e *CheckError) Unwrap() error { return e.Err }

// CheckOptions configures the strict check of a client JSON text.
type CheckOptions struct {
	// MaxDepth is the deepest nesting of arrays and objects allowed: 1 allows {"a":1} but
	// not {"a":[]}. 0 (or anything above 10000) leaves only encoding/json's own bound of
	// 10000 levels, which is a syntax error.
	MaxDepth int
	// RejectInvalidUTF8 also refuses strings (keys included) that are not valid UTF-8;
	// encoding/json accepts them.
	RejectInvalidUTF8 bool
	// EscapedKey, when set, is called with the unescaped name of every object key written
	// with at least one backslash escape, before its duplicate check; an error refuses the
	// text (ErrKey). name stays valid after the call.
	EscapedKey func(name string) error
}

// Check validates raw in one pass, without recursion and, for ordinary bodies, without
// allocating: it accepts exactly the texts encoding/json.Valid accepts, nested at most
// maxDepth levels, in which no object has the same key twice. Keys are compared unescaped
// the way encoding/json decodes them, so "a" and "\u0061" collide; a key without escapes is
// compared byte for byte.
//
// The error is a *CheckError. A syntax error anywhere wins over the other faults; among
// those the first in the text is reported.
func Check(raw []byte, maxDepth int) error {
	return check(raw, maxDepth, false, nil)
}

// Check is the package-level Check with the options of o.
func (o CheckOptions) Check(raw []byte) error {
	return check(raw, o.MaxDepth, o.RejectInvalidUTF8, o.EscapedKey)
}

// CheckString is Check on a string, without copying it.
func (o CheckOptions) CheckString(s string) error {
	return check(unsafe.Slice(unsafe.StringData(s), len(s)), o.MaxDepth, o.RejectInvalidUTF8, o.EscapedKey)
}

// objFrame is one open object whose keys are tracked: its keys are keys[start:], or set
// once it has more than smallKeys of them.
type objFrame struct {
	start int
	set   map[string]struct{}
}

func syntaxError(off int, msg string) error {
	return &CheckError{Kind: ErrSyntax, Offset: off, Msg: msg}
}

const errEOF = "unexpected end of JSON input"

// quoteChar formats c the way encoding/json's syntax errors do.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

func isSpace(c byte) bool { return c <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t') }

func check(raw []byte, maxDepth int, checkUTF8 bool, escapedKey func(string) error) error {
	if maxDepth <= 0 || maxDepth > MaxNesting {
		maxDepth = MaxNesting
	}
	var (
		n     = len(raw)
		i     int
		c     byte
		depth int
		// kinds has bit d set when level d+1 is an object; it covers encoding/json's
		// whole depth so that the syntax check goes on past a depth fault.
		kinds    [MaxNesting/64 + 1]uint64
		frameBuf [16]objFrame
		frames   = frameBuf[:0]
		keyBuf   [32]string
		keys     = keyBuf[:0]
		dec      []byte      // unescaped keys; only appended to, so names into it stay valid
		first    *CheckError // the first fault other than syntax; tracking stops there
		track    = true      // depth, keys and UTF-8 are still checked
		end      int
		esc      bool
		bad      int
		msg      string
	)

value:
	for i < n && isSpace(raw[i]) {
		i++
	}
	if i >= n {
		return syntaxError(n, errEOF)
	}
	switch c = raw[i]; c {
	case '{', '[':
		if depth >= MaxNesting {
			return syntaxError(i, fmt.Sprintf("exceeded max depth (%d)", MaxNesting))
		}
		obj := c == '{'
		if obj {
			kinds[depth>>6] |= 1 << (depth & 63)
		} else {
			kinds[depth>>6] &^= 1 << (depth & 63)
		}
		depth++
		if track {
			if depth > maxDepth {
				first = &CheckError{Kind: ErrDepth, Offset: i, Limit: maxDepth}
				track = false
			} else if obj {
				frames = append(frames, objFrame{start: len(keys)})
			}
		}
		i++
		for i < n && isSpace(raw[i]) {
			i++
		}
		if i < n && (raw[i] == '}' && obj || raw[i] == ']' && !obj) {
			goto close
		}
		if obj {
			goto key
		}
		goto value
	case '"':
		end, _, bad, msg = scanString(raw, i+1, track && checkUTF8)
		if msg != "" {
			return syntaxError(end, msg)
		}
		if bad >= 0 && track {
			first = &CheckError{Kind: ErrInvalidUTF8, Offset: bad}
			track = false
		}
		i = end
	case 't':
		if i, msg = literal(raw, i, "true"); msg != "" {
			return syntaxError(i, msg)
		}
	case 'f':
		if i, msg = literal(raw, i, "false"); msg != "" {
			return syntaxError(i, msg)
		}
	case 'n':
		if i, msg = literal(raw, i, "null"); msg != "" {
			return syntaxError(i, msg)
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i, msg = scanNumber(raw, i); msg != "" {
			return syntaxError(i, msg)
		}
	default:
		return syntaxError(i, "invalid character "+quoteChar(c)+" looking for beginning of value")
	}

next: // after a value
	for i < n && isSpace(raw[i]) {
		i++
	}
	if depth == 0 {
		if i < n {
			return syntaxError(i, "invalid character "+quoteChar(raw[i])+" after top-level value")
		}
		if first != nil {
			return first
		}
		return nil
	}
	if i >= n {
		return syntaxError(n, errEOF)
	}
	c = raw[i]
	if kinds[(depth-1)>>6]&(1<<((depth-1)&63)) != 0 {
		switch c {
		case ',':
			i++
			for i < n && isSpace(raw[i]) {
				i++
			}
			goto key
		case '}':
			goto close
		}
		return syntaxError(i, "invalid character "+quoteChar(c)+" after object key:value pair")
	}
	switch c {
	case ',':
		i++
		goto value
	case ']':
		goto close
	}
	return syntaxError(i, "invalid character "+quoteChar(c)+" after array element")

close: // raw[i] closes the innermost array or object
	depth--
	if track && raw[i] == '}' {
		keys = keys[:frames[len(frames)-1].start]
		frames = frames[:len(frames)-1]
	}
	i++
	goto next

key: // raw[i] should open the key of an object member
	if i >= n {
		return syntaxError(n, errEOF)
	}
	if raw[i] != '"' {
		return syntaxError(i, "invalid character "+quoteChar(raw[i])+" looking for beginning of object key string")
	}
	end, esc, bad, msg = scanString(raw, i+1, track && checkUTF8)
	if msg != "" {
		return syntaxError(end, msg)
	}
	if track {
		if bad >= 0 {
			first = &CheckError{Kind: ErrInvalidUTF8, Offset: bad}
			track = false
			goto colon
		}
		var name string
		if !esc {
			name = unsafe.String(unsafe.SliceData(raw[i+1:]), end-i-2)
		} else {
			var start int
			dec, start = appendKeyName(dec, raw[i:end])
			name = unsafe.String(unsafe.SliceData(dec[start:]), len(dec)-start)
			if escapedKey != nil {
				if err := escapedKey(name); err != nil {
					first = &CheckError{Kind: ErrKey, Offset: i, Key: name, Err: err}
					track = false
					goto colon
				}
			}
		}
		f := &frames[len(frames)-1]
		dup := false
		if f.set == nil {
			for _, k := range keys[f.start:] {
				if k == name {
					dup = true
					break
				}
			}
			if !dup {
				if len(keys)-f.start < smallKeys {
					keys = append(keys, name)
				} else {
					f.set = make(map[string]struct{}, 4*smallKeys)
					for _, k := range keys[f.start:] {
						f.set[k] = struct{}{}
					}
					f.set[name] = struct{}{}
					keys = keys[:f.start]
				}
			}
		} else if _, dup = f.set[name]; !dup {
			f.set[name] = struct{}{}
		}
		if dup {
			// name may alias raw, which the caller owns.
			first = &CheckError{Kind: ErrDuplicateKey, Offset: i, Key: strings.Clone(name)}
			track = false
		}
	}
colon:
	i = end
	for i < n && isSpace(raw[i]) {
		i++
	}
	if i >= n {
		return syntaxError(n, errEOF)
	}
	if raw[i] != ':' {
		return syntaxError(i, "invalid character "+quoteChar(raw[i])+" after object key")
	}
	i++
	goto value
}

// literal checks that raw[i:] starts with word (true, false or null); it returns the index
// after it, or the offset of the fault and a message.
func literal(raw []byte, i int, word string) (int, string) {
	if len(raw)-i >= len(word) && string(raw[i:i+len(word)]) == word {
		return i + len(word), ""
	}
	for k := 1; k < len(word); k++ {
		if i+k >= len(raw) {
			return len(raw), errEOF
		}
		if raw[i+k] != word[k] {
			return i + k, "invalid character " + quoteChar(raw[i+k]) + " in literal " + word + " (expecting " + quoteChar(word[k]) + ")"
		}
	}
	panic("unreachable")
}

func isDigit(c byte) bool { return c-'0' < 10 }

// scanNumber checks the number that starts at raw[i] ('-' or a digit) and returns the
// index after it, or the offset of the fault and a message.
func scanNumber(raw []byte, i int) (int, string) {
	n := len(raw)
	if raw[i] == '-' {
		i++
		if i >= n {
			return n, errEOF
		}
		if !isDigit(raw[i]) {
			return i, "invalid character " + quoteChar(raw[i]) + " in numeric literal"
		}
	}
	if raw[i] == '0' {
		i++
	} else {
		for i++; i < n && isDigit(raw[i]); i++ {
		}
	}
	if i < n && raw[i] == '.' {
		i++
		if i >= n {
			return n, errEOF
		}
		if !isDigit(raw[i]) {
			return i, "invalid character " + quoteChar(raw[i]) + " after decimal point in numeric literal"
		}
		for i++; i < n && isDigit(raw[i]); i++ {
		}
	}
	if i < n && raw[i]|0x20 == 'e' {
		i++
		if i < n && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if i >= n {
			return n, errEOF
		}
		if !isDigit(raw[i]) {
			return i, "invalid character " + quoteChar(raw[i]) + " in exponent of numeric literal"
		}
		for i++; i < n && isDigit(raw[i]); i++ {
		}
	}
	return i, ""
}

// strPlain marks the bytes a string holds as they are: not a quote, a backslash or a
// control character. strPlainASCII also excludes the non-ASCII bytes, which need a UTF-8
// check.
var strPlain, strPlainASCII = func() (plain, ascii [256]bool) {
	for c := 0x20; c < 256; c++ {
		plain[c] = c != '"' && c != '\\'
		ascii[c] = plain[c] && c < utf8.RuneSelf
	}
	return
}()

var isHex = func() (t [256]bool) {
	for _, c := range []byte("0123456789abcdefABCDEF") {
		t[c] = true
	}
	return
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// scanString checks the string whose contents start at raw[i] (after the opening quote).
// It returns the index after the closing quote and whether the string has escapes, or
// the offset of a syntax fault and a message. With checkUTF8, bad is the index of the
// first byte that is not UTF-8, else -1.
func scanString(raw []byte, i int, checkUTF8 bool) (end int, escaped bool, bad int, msg string) {
	bad = -1
	n := len(raw)
	var hi uint64
	tab := &strPlain
	if checkUTF8 {
		hi, tab = msb, &strPlainASCII
	}
	for {
		// Eight bytes at a time: m has the high bit of the first quote, backslash, control
		// character (or, with checkUTF8, non-ASCII byte) set. x^0x02 maps the control
		// characters and the quote, and only them, below 0x21; x^'\\' maps the backslash
		// to 0. A byte below k has its high bit set by (y-k)&^y; the borrows of the
		// subtraction can only mark bytes after a real match, so the lowest mark is exact.
		for ; i+8 <= n; i += 8 {
			x := binary.LittleEndian.Uint64(raw[i : i+8])
			y := x ^ (lsb * 0x02)
			b := x ^ (lsb * '\\')
			m := ((y-lsb*0x21)&^y | (b-lsb)&^b | x&hi) & msb
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
		}
		for i < n && tab[raw[i]] {
			i++
		}
		if i >= n {
			return n, escaped, bad, errEOF
		}
	special:
		switch c := raw[i]; {
		case c == '"':
			return i + 1, escaped, bad, ""
		case c == '\\':
			escaped = true
			i++
			if i >= n {
				return n, escaped, bad, errEOF
			}
			switch raw[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= n {
						return n, escaped, bad, errEOF
					}
					if !isHex[raw[i+k]] {
						return i + k, escaped, bad, "invalid character " + quoteChar(raw[i+k]) + ` in \u hexadecimal character escape`
					}
				}
				i += 5
			default:
				return i, escaped, bad, "invalid character " + quoteChar(raw[i]) + " in string escape code"
			}
		case c < 0x20:
			return i, escaped, bad, "invalid character " + quoteChar(c) + " in string literal"
		default: // non-ASCII, with checkUTF8
			for i < n && raw[i] >= utf8.RuneSelf {
				r, size := utf8.DecodeRune(raw[i:])
				if r == utf8.RuneError && size == 1 {
					// One fault is enough: the rest is only checked for syntax.
					bad, hi, tab = i, 0, &strPlain
					break
				}
				i += size
			}
		}
	}
}

// appendKeyName appends the name of the key literal lit (quotes included) the way
// encoding/json decodes it: AppendUnquote's value (escapes resolved, a \u surrogate that
// does not pair replaced by U+FFFD), and then, only when that is not UTF-8, every byte that
// is not part of a UTF-8 sequence replaced by U+FFFD on its own, as encoding/json does
// (strings.ToValidUTF8 would fold a run of them into one). The raw bytes are the only
// place the two decodings differ: an escape always yields whole UTF-8, and a byte after
// it that continues nothing stays invalid. It returns dst and where the name starts in it.
func appendKeyName(dst, lit []byte) ([]byte, int) {
	start := len(dst)
	dst = AppendUnquote(dst, unsafe.String(unsafe.SliceData(lit), len(lit)))
	if utf8.Valid(dst[start:]) {
		return dst, start
	}
	end := len(dst) // the fixed name follows the raw one, so names already in dst stay valid
	for i := start; i < end; {
		r, size := utf8.DecodeRune(dst[i:end])
		dst = utf8.AppendRune(dst, r)
		i += size
	}
	return dst, end
}

// hex4 decodes the four hex digits at the start of s, known to be valid.
func hex4(s string) rune {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
