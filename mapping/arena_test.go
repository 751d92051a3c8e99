package mapping

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// Values placed in an arena must never change afterwards, however many values follow them
// and whatever their sizes (across buffer replacements, and for values larger than a
// buffer).
func TestArenaValuesStayPut(t *testing.T) {
	var a Arena
	type placed struct {
		got  string
		want string
		ptr  *string
	}
	var all []placed
	for i := 0; i < 3000; i++ {
		n := i % 97
		if i%500 == 7 {
			n = 100 << 10 // larger than any arena buffer
		}
		want := strings.Repeat(string(rune('a'+i%26)), n) + strconv.Itoa(i)
		var got string
		switch i % 3 {
		case 0:
			got = a.String([]byte(want))
		case 1:
			lit := string(jsontext.AppendString(nil, want+"\n")) // has an escape: decoded into the arena
			want += "\n"
			got = a.Unquote(lit)
		default:
			got = a.Unquote(`"` + want + `"`) // no escape: a substring of the literal
		}
		all = append(all, placed{got: got, want: want, ptr: a.Text(want)})
	}
	for i, p := range all {
		if p.got != p.want || *p.ptr != p.want {
			t.Fatalf("value %d changed: %.20q / %.20q, want %.20q", i, p.got, *p.ptr, p.want)
		}
	}
}

func TestArenaUnquoteMatchesJsontext(t *testing.T) {
	var a Arena
	for _, lit := range []string{`""`, `"plain"`, `"a\nb\"c"`, `"\u00e9\ud83d\ude00"`, `"\ud800 lone"`, `"x"`} {
		if got, want := a.Unquote(lit), jsontext.Unquote(lit); got != want {
			t.Errorf("Unquote(%s) = %q, jsontext %q", lit, got, want)
		}
	}
	// A literal without escapes is not copied.
	lit := `"no escapes here"`
	if got := a.Unquote(lit); unsafe.StringData(got) != unsafe.StringData(lit[1:]) {
		t.Errorf("a literal without escapes was copied")
	}
}

// Text pointers come from the arena's blocks: a decode's hundreds of text parts cost an
// allocation per block of them, not one each.
func TestArenaTextAllocatesPerBlock(t *testing.T) {
	var a Arena
	s := strings.Repeat("x", 10)
	n := testing.AllocsPerRun(20, func() {
		for range arenaTexts {
			textSink = a.Text(s) // kept, as a decoded part keeps it
		}
	})
	if n > 1 {
		t.Errorf("%d Text calls allocate %v times, want at most 1", arenaTexts, n)
	}
}

var textSink *string

// A nil arena allocates each value instead (the decoders that do not keep one).
func TestNilArena(t *testing.T) {
	var a *Arena
	b := []byte("id-1")
	s := a.String(b)
	b[0] = 'X'
	if s != "id-1" || *a.Text("t") != "t" || a.Unquote(`"a\tb"`) != "a\tb" || a.String(nil) != "" {
		t.Fatalf("nil arena: %q %q %q", s, *a.Text("t"), a.Unquote(`"a\tb"`))
	}
}

// Arena.ToolCallPart builds the same part as ToolCallPart, with or without an arena, and
// its held input is the input as the part's text holds it.
func TestArenaToolCallPart(t *testing.T) {
	var a Arena
	for _, tc := range []struct{ id, name, input string }{
		{"call_1", "Bash", `{"command":"ls && pwd"}`},
		{"c\"2", "we<ird>", "{ \"a\" : [1, 2],\n \"b\": {} }"},
		{"c3", "noinput", ""},
	} {
		want := ToolCallPart("p", ToolCall{ID: tc.id, Name: tc.name, Input: json.RawMessage(tc.input)})
		call, _ := ParseToolCall(&want)
		for _, arena := range []*Arena{&a, nil} {
			got, held := arena.ToolCallPart("p", tc.id, tc.name, tc.input)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: part %+v (text %q), want %+v (text %q)", tc.id, got, *got.Text, want, *want.Text)
			}
			if held != string(call.Input) {
				t.Fatalf("%q: held input %q, want %q", tc.id, held, call.Input)
			}
		}
	}
}
