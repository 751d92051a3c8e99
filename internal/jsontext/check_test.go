package jsontext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	manyKeys := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `"last":0}`)
		return b.String()
	}
	const limit = 4
	for _, tc := range []struct {
		desc, in string
		kind     ErrorKind // 0: valid
		off      int       // expected Offset, when kind != 0
		key      string    // expected Key (ErrDuplicateKey)
	}{
		// Syntax: encoding/json's grammar.
		{desc: "empty", in: "", kind: ErrSyntax, off: 0},
		{desc: "whitespace only", in: " \t\r\n", kind: ErrSyntax, off: 4},
		{desc: "scalar", in: "1"},
		{desc: "string", in: `"x"`},
		{desc: "literals", in: `[true,false,null]`},
		{desc: "surrounding whitespace", in: " \n{ \"a\" : [ 1 , 2 ] }\r\n\t"},
		{desc: "bad literal", in: `tru`, kind: ErrSyntax, off: 3},
		{desc: "bad literal char", in: `[nul1]`, kind: ErrSyntax, off: 4},
		{desc: "literal glued", in: `truex`, kind: ErrSyntax, off: 4},
		{desc: "form feed is not whitespace", in: "\f1", kind: ErrSyntax, off: 0},
		{desc: "BOM", in: "\ufeff{}", kind: ErrSyntax, off: 0},
		{desc: "two values", in: `1 2`, kind: ErrSyntax, off: 2},
		{desc: "trailing comma array", in: `[1,]`, kind: ErrSyntax, off: 3},
		{desc: "trailing comma object", in: `{"a":1,}`, kind: ErrSyntax, off: 7},
		{desc: "leading comma", in: `[,1]`, kind: ErrSyntax, off: 1},
		{desc: "missing colon", in: `{"a" 1}`, kind: ErrSyntax, off: 5},
		{desc: "non-string key", in: `{1:2}`, kind: ErrSyntax, off: 1},
		{desc: "single quotes", in: `{'a':1}`, kind: ErrSyntax, off: 1},
		{desc: "unclosed object", in: `{"a":1`, kind: ErrSyntax, off: 6},
		{desc: "unclosed array", in: `[1, 2`, kind: ErrSyntax, off: 5},
		{desc: "mismatched close", in: `[1}`, kind: ErrSyntax, off: 2},
		{desc: "extra close", in: `[1]]`, kind: ErrSyntax, off: 3},
		// Numbers.
		{desc: "numbers", in: `[0,-0,1.5,-1.5e10,2E-3,3e+7,123456789012345678901234567890,1e999]`},
		{desc: "1e", in: `1e`, kind: ErrSyntax, off: 2},
		{desc: "1e+", in: `1e+`, kind: ErrSyntax, off: 3},
		{desc: "1ex", in: `[1ex]`, kind: ErrSyntax, off: 3},
		{desc: "minus", in: `-`, kind: ErrSyntax, off: 1},
		{desc: "minus letter", in: `-a`, kind: ErrSyntax, off: 1},
		{desc: "leading zero", in: `01`, kind: ErrSyntax, off: 1},
		{desc: "leading zero in array", in: `[-01]`, kind: ErrSyntax, off: 3},
		{desc: "dot without digits", in: `1.`, kind: ErrSyntax, off: 2},
		{desc: "dot exponent", in: `1.e5`, kind: ErrSyntax, off: 2},
		{desc: "leading dot", in: `.5`, kind: ErrSyntax, off: 0},
		{desc: "plus sign", in: `+1`, kind: ErrSyntax, off: 0},
		{desc: "hex", in: `0x10`, kind: ErrSyntax, off: 1},
		// Strings.
		{desc: "escapes", in: `"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"`},
		{desc: "short unicode escape", in: `"\u12"`, kind: ErrSyntax, off: 5},
		{desc: "bad hex", in: `"\u12G4"`, kind: ErrSyntax, off: 5},
		{desc: "unicode escape at end", in: `"\u12`, kind: ErrSyntax, off: 5},
		{desc: "lone high surrogate", in: `"\uD800"`},
		{desc: "lone low surrogate", in: `"\uDC00x"`},
		{desc: "reversed surrogates", in: `"\uDC00\uD800"`},
		{desc: "bad escape", in: `"\x"`, kind: ErrSyntax, off: 2},
		{desc: "escaped single quote", in: `"\'"`, kind: ErrSyntax, off: 2},
		{desc: "backslash at end", in: `"\`, kind: ErrSyntax, off: 2},
		{desc: "unterminated", in: `"abc`, kind: ErrSyntax, off: 4},
		{desc: "unterminated long", in: `"` + strings.Repeat("abcdefgh", 5), kind: ErrSyntax, off: 41},
		{desc: "raw newline", in: "\"a\nb\"", kind: ErrSyntax, off: 2},
		{desc: "raw NUL after 8 bytes", in: "\"abcdefghij\x00\"", kind: ErrSyntax, off: 11},
		{desc: "raw 0x1f", in: "[\"\x1f\"]", kind: ErrSyntax, off: 2},
		{desc: "DEL is allowed", in: "\"\x7f\""},
		{desc: "invalid UTF-8 is allowed", in: "{\"\xff\":\"\xc0\xaf\xed\xa0\x80\"}"},
		{desc: "non-ASCII", in: `{"clé":"日本語 😀 é"}`},
		{desc: "quote found by the 8-byte scan", in: `["0123456789abcdef","x"]`},
		// Depth: limit 4.
		{desc: "depth at the limit", in: deep(limit)},
		{desc: "depth one over", in: deep(limit + 1), kind: ErrDepth, off: limit},
		{desc: "object depth at the limit", in: deepObj(limit)},
		{desc: "object depth one over", in: deepObj(limit + 1), kind: ErrDepth, off: 5 * limit},
		{desc: "depth over, then syntax error", in: deep(limit+1) + "x", kind: ErrSyntax, off: 2*limit + 2},
		{desc: "syntax error inside the too-deep part", in: "[[[[[[1,]]]]]]", kind: ErrSyntax, off: 8},
		{desc: "encoding/json's own bound", in: deep(10001), kind: ErrSyntax, off: 10000},
		// Duplicate keys.
		{desc: "duplicate", in: `{"a":1,"a":2}`, kind: ErrDuplicateKey, off: 7, key: "a"},
		{desc: "duplicate with whitespace", in: `{ "a" : 1 , "b":2, "a" : 2 }`, kind: ErrDuplicateKey, off: 19, key: "a"},
		{desc: "duplicate nested", in: `{"x":[{"y":{"a":1,"b":0,"a":2}}]}`, kind: ErrDuplicateKey, off: 24, key: "a"},
		{desc: "same key in siblings", in: `[{"a":1},{"a":2},{"a":{"a":{"a":3}}}]`},
		{desc: "same key in parent and child", in: `{"a":{"a":1},"b":{"a":2}}`},
		{desc: "key reused after a child object closes", in: `{"p":{"q":1,"r":2},"q":3,"r":{"p":1}}`},
		{desc: "escaped duplicate", in: `{"content":1,"cont\u0065nt":2}`, kind: ErrDuplicateKey, off: 13, key: "content"},
		{desc: "escaped duplicate, escape first", in: `{"\u0061":1,"a":2}`, kind: ErrDuplicateKey, off: 12, key: "a"},
		{desc: "both escaped", in: `{"\"":1,"\u0022":2}`, kind: ErrDuplicateKey, off: 8, key: `"`},
		{desc: "escaped slash", in: `{"a/b":1,"a\/b":2}`, kind: ErrDuplicateKey, off: 9, key: "a/b"},
		{desc: "surrogate pair vs raw", in: `{"😀":1,"\ud83d\ude00":2}`, kind: ErrDuplicateKey, off: 10, key: "😀"},
		{desc: "lone surrogates decode alike", in: `{"\ud800":1,"\udfff":2}`, kind: ErrDuplicateKey, off: 12, key: "\ufffd"},
		{desc: "lone surrogate vs U+FFFD", in: `{"\ufffd":1,"\ud800":2}`, kind: ErrDuplicateKey, off: 12, key: "\ufffd"},
		{desc: "high surrogate then escape", in: `{"\ud800\n":1,"\ufffd\n":2}`, kind: ErrDuplicateKey, off: 14, key: "\ufffd\n"},
		{desc: "different escapes", in: `{"\u0061":1,"\u0062":2,"\n":3,"\t":4}`},
		{desc: "prefix keys", in: `{"a":1,"ab":2,"abc":3,"":4}`},
		{desc: "empty key twice", in: `{"":1,"":2}`, kind: ErrDuplicateKey, off: 6, key: ""},
		// encoding/json only coerces invalid UTF-8 when a key is unescaped, as the
		// previous check did: raw bytes compare as they are.
		{desc: "raw invalid UTF-8 keys differ", in: "{\"\xff\":1,\"\xfe\":2}"},
		{desc: "escaped keys with invalid UTF-8 collide", in: "{\"\xff\\n\":1,\"\xfe\\n\":2}", kind: ErrDuplicateKey, off: 9, key: "\ufffd\n"},
		{desc: "many keys", in: manyKeys(40, "")},
		{desc: "many keys, duplicate late", in: manyKeys(40, `"k3":1,`), kind: ErrDuplicateKey, off: len(manyKeys(40, "")) - 9, key: "k3"},
		{desc: "many keys, escaped duplicate", in: manyKeys(20, `"k\u0031\u0039":1,`), kind: ErrDuplicateKey, off: len(manyKeys(20, "")) - 9, key: "k19"},
		{desc: "many keys at two levels", in: `{"o":` + manyKeys(20, "") + `,` + manyKeys(20, "")[1:]},
		{desc: "many keys in a child, parent duplicate", in: `{"last":` + manyKeys(20, "") + `,"last":1}`, kind: ErrDuplicateKey, off: len(manyKeys(20, "")) + 9, key: "last"},
		// Precedence.
		{desc: "duplicate then syntax error", in: `{"a":1,"a":2,}`, kind: ErrSyntax, off: 13},
		{desc: "duplicate before depth", in: `{"a":1,"a":[[[[[1]]]]]}`, kind: ErrDuplicateKey, off: 7, key: "a"},
		{desc: "depth before duplicate", in: `{"b":[[[[[1]]]]],"a":1,"a":2}`, kind: ErrDepth, off: 8},
	} {
		err := Check([]byte(tc.in), limit)
		if tc.kind == 0 {
			if err != nil {
				t.Errorf("%s: Check(%q) = %v, want nil", tc.desc, tc.in, err)
			}
			continue
		}
		var ce *CheckError
		if !errors.As(err, &ce) {
			t.Errorf("%s: Check(%q) = %v, want a *CheckError of kind %d", tc.desc, tc.in, err, tc.kind)
			continue
		}
		if ce.Kind != tc.kind || ce.Offset != tc.off || ce.Key != tc.key {
			t.Errorf("%s: Check(%q) = %v (kind %d, offset %d, key %q), want kind %d, offset %d, key %q",
				tc.desc, tc.in, err, ce.Kind, ce.Offset, ce.Key, tc.kind, tc.off, tc.key)
		}
		if valid := json.Valid([]byte(tc.in)); valid == (ce.Kind == ErrSyntax) {
			t.Errorf("%s: json.Valid(%q) = %v, but Check says %v", tc.desc, tc.in, valid, err)
		}
	}
}

func TestCheckMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"messages":`, "invalid JSON at byte 12: unexpected end of JSON input"},
		{`[1,]`, "invalid JSON at byte 3: invalid character ']' looking for beginning of value"},
		{"\"a\tb\"", `invalid JSON at byte 2: invalid character '\t' in string literal`},
		{`"\q"`, `invalid JSON at byte 2: invalid character 'q' in string escape code`},
		{`{"a":1,"a":2}`, `duplicate object key "a" at byte 7`},
		{`[[[1]]]`, "JSON nesting deeper than 2 levels at byte 2"},
	} {
		if err := Check([]byte(tc.in), 2); err == nil || err.Error() != tc.want {
			t.Errorf("Check(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestCheckOptions(t *testing.T) {
	errEscaped := errors.New("escaped")
	o := CheckOptions{
		MaxDepth:          3,
		RejectInvalidUTF8: true,
		EscapedKey: func(name string) error {
			if name == "text" {
				return errEscaped
			}
			return nil
		},
	}
	for _, tc := range []struct {
		in   string
		kind ErrorKind
		off  int
	}{
		{in: `{"text":"x","t\u00e9xt":"y"}`},
		{in: `{"te\u0078t":"x"}`, kind: ErrKey, off: 1},
		{in: `{"te\u0078t":"x","text":1}`, kind: ErrKey, off: 1},
		{in: `{"text":"x","te\u0078t":"y"}`, kind: ErrKey, off: 12},
		{in: "[\"ok\",\"a\xffb\"]", kind: ErrInvalidUTF8, off: 8},
		{in: "{\"\xe9\":1}", kind: ErrInvalidUTF8, off: 2},
		{in: "\"" + strings.Repeat("é", 20) + "\xed\xa0\x80\"", kind: ErrInvalidUTF8, off: 41},
		{in: "[\"\xff\",\"\xfe\"x]", kind: ErrSyntax, off: 8},
		{in: "\"\xff", kind: ErrSyntax, off: 2},
		{in: `"` + strings.Repeat("日本語 😀 é", 10) + `"`},
		{in: `{"a":"é","a":1}`, kind: ErrDuplicateKey, off: 10},
		{in: `[[[[1]]]]`, kind: ErrDepth, off: 3},
	} {
		err := o.Check([]byte(tc.in))
		if err2 := o.CheckString(tc.in); fmt.Sprint(err2) != fmt.Sprint(err) {
			t.Errorf("CheckString(%q) = %v, Check = %v", tc.in, err2, err)
		}
		var ce *CheckError
		switch {
		case tc.kind == 0 && err != nil:
			t.Errorf("Check(%q) = %v, want nil", tc.in, err)
		case tc.kind == 0:
		case !errors.As(err, &ce) || ce.Kind != tc.kind || ce.Offset != tc.off:
			t.Errorf("Check(%q) = %v, want kind %d at %d", tc.in, err, tc.kind, tc.off)
		case tc.kind == ErrKey && (!errors.Is(err, errEscaped) || ce.Key != "text"):
			t.Errorf("Check(%q) = %v, want the EscapedKey error for key text", tc.in, err)
		}
	}
}

// TestCheckNoAlloc pins the allocation-free promise for ordinary bodies.
func TestCheckNoAlloc(t *testing.T) {
	body := chatBody()
	if n := testing.AllocsPerRun(20, func() {
		if err := Check(body, 64); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Check allocates %v times on a chat body, want 0", n)
	}
}

func TestAppendUnquoted(t *testing.T) {
	for _, lit := range []string{
		`"plain"`, `"inp\u0075t"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\ud83d\ude00"`, `"\uD83D\uDE00x"`,
		`"\ud800"`, `"\ud800x"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, `"\ud800\n"`, `"\ud83d\u0041"`,
		"\"\xff\\n\"", "\"\xe2\x82\\n\"", "\"\xed\xa0\x80\\n\"", `"\u0000"`, `"é\u00e9"`,
		"\"\xff\xfe\\n\xc3\"", "\"\xe2\\u0082\xac\"", "\"\xf0\x9f\\u0098\x80\"", "\"\\n\x80\x80\"",
		"\"\xe2\x82\xac\\ud800\xff\"", "\"\xc3\\u00a9\"",
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", lit, err)
		}
		dst, start := appendKeyName([]byte("pre"), []byte(lit))
		if got := string(dst[start:]); got != want || string(dst[:3]) != "pre" {
			t.Errorf("appendKeyName(%s) = %q (dst %q), want %q", lit, got, dst, want)
		}
	}
}

// TestCheckDuplicateKeysAsEncodingJSON: escaped keys that hold bytes that are not UTF-8
// or lone surrogates collide exactly when encoding/json decodes them to the same name (a
// map decode keeps one member). Keys without escapes are compared byte for byte (Check's
// documented rule), so every key here has one.
func TestCheckDuplicateKeysAsEncodingJSON(t *testing.T) {
	keys := []string{
		"\xff\\n", "\xfe\\n", "\xff\xff\\n", "\ufffd\\n", "\\ufffd\\n", "\xef\xbf\xbd\\n",
		`\ud800\n`, `\udbff\n`, `\udc00\n`, `\ud800\ud800\n`, `\ufffd\ufffd\n`,
		"\xed\xa0\x80\\n", "\xe2\x82\\n", "\\ud83d\\ude00", "\xf0\x9f\x98\x80\\n", "\\ud83d\xff",
		"\xf0\x9f\\u0098\x80", "\\u0061",
	}
	for _, a := range keys {
		for _, b := range keys {
			text := []byte(`{"` + a + `":1,"` + b + `":2}`)
			if !json.Valid(text) {
				t.Fatalf("%q is not JSON", text)
			}
			var m map[string]any
			if err := json.Unmarshal(text, &m); err != nil {
				t.Fatal(err)
			}
			err := Check(text, 0)
			var ce *CheckError
			dup := errors.As(err, &ce) && ce.Kind == ErrDuplicateKey
			if err != nil && !dup {
				t.Fatalf("Check(%q) = %v", text, err)
			}
			if want := len(m) == 1; dup != want {
				t.Errorf("Check(%q): duplicate %v, encoding/json decodes %d members", text, dup, len(m))
			}
		}
	}
}

// refFault is the first non-syntax fault of a valid JSON text, found with encoding/json's
// Decoder: kind 0 when there is none.
type refFault struct {
	kind ErrorKind
	off  int
	key  string
}

// refCheck is the reference for Check on a text json.Valid accepts: the first, in text
// order, of a bracket opening level maxDepth+1, a key escapedKey refuses, and a key its
// object already has. A key is compared as the previous check did: byte for byte when it
// has no escape, else as json.Unmarshal decodes it. It also checks appendKeyName on each
// escaped key.
func refCheck(t *testing.T, data []byte, maxDepth int, escapedKey func(string) error) refFault {
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		prev := int(dec.InputOffset())
		tok, err := dec.Token()
		if err == io.EOF {
			return refFault{}
		}
		if err != nil {
			t.Fatalf("Decoder on valid JSON %q: %v", data, err)
		}
		start := prev
		for start < len(data) && strings.IndexByte(" \t\r\n,:", data[start]) >= 0 {
			start++
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 {
					stack[len(stack)-1].wantKey = true
				}
				continue
			}
			lit := data[start:dec.InputOffset()]
			if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
				t.Fatalf("key literal %q at %d in %q", lit, start, data)
			}
			var name string
			if bytes.IndexByte(lit, '\\') < 0 {
				name = string(lit[1 : len(lit)-1])
			} else {
				if err := json.Unmarshal(lit, &name); err != nil {
					t.Fatalf("json.Unmarshal(%q): %v", lit, err)
				}
				if dst, start := appendKeyName(nil, lit); string(dst[start:]) != name {
					t.Fatalf("appendKeyName(%q) = %q, json.Unmarshal says %q", lit, dst[start:], name)
				}
				if escapedKey != nil && escapedKey(name) != nil {
					return refFault{ErrKey, start, name}
				}
			}
			if top.keys[name] {
				return refFault{ErrDuplicateKey, start, name}
			}
			top.keys[name] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack)+1 > maxDepth {
				return refFault{ErrDepth, start, ""}
			}
			obj := tok == json.Delim('{')
			stack = append(stack, &frame{obj: obj, wantKey: obj, keys: map[string]bool{}})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: its object, if any, now waits for a key.
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].wantKey = true
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null],"c":{"d":"e\u0066"}}`,
		`{"a":1,"\u0061":2}`,
		`[[[[[[1]]]]]]`,
		`{"x":{"y":1},"y":{"x":2},"x":3}`,
		`-0.5e+10`,
		"{\"\xff\\n\":1,\"\xfe\\n\":2}",
		`{"\ud800":1,"\udbff":2}`,
		string(chatBody()[:200]),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxDepth = 5
		err := Check(data, maxDepth)
		var ce *CheckError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("Check(%q) = %v, not a *CheckError", data, err)
		}
		valid := json.Valid(data)
		if isSyntax := ce != nil && ce.Kind == ErrSyntax; isSyntax == valid {
			t.Fatalf("Check(%q) = %v, json.Valid = %v", data, err, valid)
		}
		if ce != nil && (ce.Offset < 0 || ce.Offset > len(data)) {
			t.Fatalf("Check(%q): offset %d out of range", data, ce.Offset)
		}
		if !valid {
			return
		}
		want := refCheck(t, data, maxDepth, nil)
		got := refFault{}
		if ce != nil {
			got = refFault{ce.Kind, ce.Offset, ce.Key}
		}
		if got != want {
			t.Fatalf("Check(%q) = %v (%+v), reference %+v", data, err, got, want)
		}

		// With the options: UTF-8 is also refused, and keys written with escapes
		// that decode to one ASCII letter.
		o := CheckOptions{MaxDepth: maxDepth, RejectInvalidUTF8: true, EscapedKey: func(name string) error {
			if len(name) == 1 && name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z' {
				return errors.New("plain key written with escapes")
			}
			return nil
		}}
		err = o.Check(data)
		ce = nil
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("Check(%q) = %v, not a *CheckError", data, err)
		}
		want = refCheck(t, data, maxDepth, o.EscapedKey)
		switch {
		case !utf8.Valid(data):
			if ce == nil || ce.Kind == ErrSyntax {
				t.Fatalf("Check(%q) with RejectInvalidUTF8 = %v, want a non-syntax fault", data, err)
			}
		case ce == nil && want.kind != 0,
			ce != nil && (refFault{ce.Kind, ce.Offset, ce.Key} != want):
			t.Fatalf("Check(%q) with options = %v, reference %+v", data, err, want)
		}
	})
}

// chatBody returns a chat completions request of about 32 KiB: a system prompt, a long
// conversation of text messages with the usual escapes and some non-ASCII text, tool calls
// and a tool with a parameter schema, pretty much what a coding agent sends.
func chatBody() []byte {
	words := strings.Fields(`the proxy forwards each request upstream after the policies have read it;
		a tool call's arguments are JSON in a string, so "quotes" and back\slashes are escaped.
		Résumé naïve café — 日本語のテキスト and emoji 😀 appear too. func main() { fmt.Println("hi") }
		<b>html</b> & ampersands, tabs	and newlines`)
	type msg struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []any  `json:"tool_calls,omitempty"`
	}
	var msgs []msg
	msgs = append(msgs, msg{Role: "system", Content: "You are a helpful assistant.\nAnswer briefly."})
	size, w := 0, 0
	for i := 0; size < 28600; i++ {
		var b strings.Builder
		for j := range 20 + i%60 {
			if j > 0 {
				if j%12 == 0 {
					b.WriteString("\n")
				} else {
					b.WriteString(" ")
				}
			}
			b.WriteString(words[w%len(words)])
			w++
		}
		m := msg{Role: []string{"user", "assistant"}[i%2], Content: b.String()}
		if i%7 == 6 {
			m.ToolCalls = []any{map[string]any{"id": "call_" + strconv.Itoa(i), "type": "function",
				"function": map[string]any{"name": "read_file", "arguments": `{"path":"src/main.go","line":` + strconv.Itoa(i) + `}`}}}
		}
		msgs = append(msgs, m)
		size += len(m.Content) + 40
	}
	body, err := json.Marshal(map[string]any{
		"model":       "gpt-4o",
		"messages":    msgs,
		"temperature": 0.2,
		"stream":      true,
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "read_file", "description": "Read a file of the repository.",
			"parameters": map[string]any{"type": "object", "required": []string{"path"},
				"properties": map[string]any{
					"path": map[string]any{"type": "string", "description": "path from the root"},
					"line": map[string]any{"type": "integer", "minimum": 1},
				}},
		}}},
	})
	if err != nil {
		panic(err)
	}
	return body
}

// stringBody returns a request of about 32 KiB whose size is one long string: prose with a
// newline every line, as a pasted document.
func stringBody() []byte {
	line := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.\n"
	text := strings.Repeat(line, 32*1024/len(line))
	body, err := json.Marshal(map[string]any{
		"model":    "gpt-4o",
		"messages": []any{map[string]any{"role": "user", "content": text}},
	})
	if err != nil {
		panic(err)
	}
	return body
}

// BenchmarkCheck32K compares Check with json.Valid alone on the same 32 KiB bodies; Check
// also checks the nesting depth and the duplicate keys.
func BenchmarkCheck32K(b *testing.B) {
	for _, body := range []struct {
		name string
		data []byte
	}{{"chat", chatBody()}, {"string", stringBody()}} {
		b.Run(body.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			for b.Loop() {
				if !json.Valid(body.data) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(body.name+"/Check", func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Check(body.data, 256); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/CheckUTF8", func(b *testing.B) {
			o := CheckOptions{MaxDepth: 256, RejectInvalidUTF8: true}
			b.SetBytes(int64(len(body.data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := o.Check(body.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
