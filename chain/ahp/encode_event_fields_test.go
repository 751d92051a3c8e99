package ahp_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// filler populates values of the ahp types by reflection, so that a member added to any
// of them is populated too without anyone teaching the filler. With full set every
// pointer is allocated, every list and map has two entries and every scalar is non-zero,
// so encoding/json writes every member; otherwise each choice comes from src, the fuzz
// input.
type filler struct {
	t       testing.TB
	full    bool
	src     []byte
	n       int             // a counter that keeps full values distinct
	visited map[string]bool // every field populated (full mode), as Type.Field
}

// choice returns the next byte of the input (0 once it is spent).
func (f *filler) choice() byte {
	if len(f.src) == 0 {
		return 0
	}
	c := f.src[0]
	f.src = f.src[1:]
	return c
}

// length is how many elements a slice or map gets: 2 when filling everything, else 0–3
// from the input; false for nil.
func (f *filler) length() (int, bool) {
	if f.full {
		return 2, true
	}
	c := f.choice() % 5
	return int(c) - 1, c != 0
}

func (f *filler) chunk(max int) []byte {
	n := min(int(f.choice())%(max+1), len(f.src))
	c := f.src[:n]
	f.src = f.src[n:]
	return c
}

func (f *filler) word() uint64 {
	var b [8]byte
	copy(b[:], f.chunk(8))
	return binary.LittleEndian.Uint64(b[:])
}

// interesting strings: HTML characters, every kind of escape, invalid UTF-8, the line
// separators, a long text.
var fuzzStrings = []string{"", "text", "<b>&amp;</b>", "a\"b\\c/d", "\b\f\n\r\t\x00\x1f\x7f", "\u2028\u2029",
	"\xff", "\xe2\x80", "\xed\xa0\x80", "é😀", strings.Repeat("lorem ipsum \"dolor\"\n", 40)}

var fuzzFloats = []float64{0, math.Copysign(0, -1), 1e-6, 9.999999e-7, 1e21, 999999999999999999999, 0.1, -123.456,
	math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1)}

func (f *filler) str() string {
	if f.full {
		f.n++
		return fmt.Sprintf("s%d<&>\u2028\xff\n", f.n)
	}
	c := f.choice()
	if c&1 == 0 {
		return fuzzStrings[int(c>>1)%len(fuzzStrings)]
	}
	return string(f.chunk(40))
}

// raw returns a JSON text of random shape: mostly valid, with whitespace anywhere
// encoding/json's compaction removes it, strings holding anything, and now and then a
// byte that makes it invalid.
func (f *filler) raw(depth int) []byte {
	if f.full {
		f.n++
		return fmt.Appendf(nil, ` { "n" : [ %d , "x\u2028" ] } `, f.n)
	}
	var b []byte
	ws := func() {
		if c := f.choice(); c&3 == 0 {
			b = append(b, " \t\n\r"[c>>2&3])
		}
	}
	ws()
	switch c := f.choice(); {
	case c < 40 && depth < 4:
		b = append(b, '{')
		for i := range int(f.choice() % 4) {
			if i > 0 {
				b = append(b, ',')
			}
			ws()
			b = json.RawMessage(fmt.Appendf(b, "%q", f.chunk(6)))
			ws()
			b = append(b, ':')
			b = append(b, f.raw(depth+1)...)
		}
		b = append(b, '}')
	case c < 80 && depth < 4:
		b = append(b, '[')
		for i := range int(f.choice() % 4) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, f.raw(depth+1)...)
		}
		b = append(b, ']')
	case c < 120:
		b = append(b, '"')
		b = append(b, f.chunk(12)...) // raw bytes: invalid UTF-8, quotes, controls
		b = append(b, '"')
	case c < 160:
		b = fmt.Appendf(b, "%d", int64(f.word()))
	case c < 180:
		b = append(b, []string{"true", "false", "null", "-0.5e+3", "1E400", "01", "\"\\u12\""}[c%7]...)
	default:
		b = append(b, f.chunk(8)...) // anything at all
	}
	ws()
	return b
}

func (f *filler) fill(v reflect.Value, depth int) {
	if depth > 12 {
		f.t.Fatalf("ahp types nest deeper than 12 at %s", v.Type())
	}
	t := v.Type()
	if t == rawMessageType {
		switch c := f.choice(); {
		case f.full:
			v.SetBytes(f.raw(depth))
		case c < 30: // nil: absent or null
		case c < 40:
			v.SetBytes([]byte{})
		default:
			v.SetBytes(f.raw(0))
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.full || f.choice()&1 == 1)
	case reflect.Int, reflect.Int64:
		if f.full {
			f.n++
			v.SetInt(int64(f.n))
		} else {
			v.SetInt(int64(f.word()))
		}
	case reflect.Float64:
		switch c := f.choice(); {
		case f.full:
			f.n++
			v.SetFloat(float64(f.n) + 0.25)
		case c < 128:
			v.SetFloat(fuzzFloats[int(c)%len(fuzzFloats)])
		default:
			v.SetFloat(math.Float64frombits(f.word()))
		}
	case reflect.Pointer:
		if !f.full && f.choice()%3 == 0 {
			return
		}
		p := reflect.New(t.Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n, ok := f.length()
		if !ok {
			return // nil
		}
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		n, ok := f.length()
		if !ok {
			return // nil
		}
		m := reflect.MakeMapWithSize(t, n)
		for range n {
			k := reflect.New(t.Key()).Elem()
			f.fill(k, depth+1)
			e := reflect.New(t.Elem()).Elem()
			f.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() && !sf.Anonymous {
				continue
			}
			if f.visited != nil {
				f.visited[t.String()+"."+sf.Name] = true
			}
			f.fill(v.Field(i), depth+1)
		}
	default:
		// An interface or another kind has no static encoding: the encoder would need
		// encoding/json for it, so it must be taught explicitly.
		f.t.Fatalf("ahp type %s holds a %s; the event encoder writes only static shapes", t, t.Kind())
	}
}

// structFields lists every field of every struct type reachable from t.
func structFields(t reflect.Type, seen map[reflect.Type]bool, out map[string]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		structFields(t.Elem(), seen, out)
	case reflect.Map:
		structFields(t.Key(), seen, out)
		structFields(t.Elem(), seen, out)
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.IsExported() || sf.Anonymous {
				out[t.String()+"."+sf.Name] = true
				structFields(sf.Type, seen, out)
			}
		}
	}
}

// TestEncoderKnowsEveryField is the guard for the types: intercept params with every
// member of every type they hold populated (by reflection, so a member added tomorrow is
// populated too) encode exactly as encoding/json encodes them. A member the encoder was
// not taught is missing from its output, and this test names the difference.
func TestEncoderKnowsEveryField(t *testing.T) {
	f := &filler{t: t, full: true, visited: map[string]bool{}}
	var p ahp.InterceptParams
	f.fill(reflect.ValueOf(&p).Elem(), 0)
	// The walk reached every field of every reachable type (so none is left zero and
	// perhaps omitted by both encoders alike).
	all := map[string]bool{}
	structFields(reflect.TypeFor[ahp.InterceptParams](), map[reflect.Type]bool{}, all)
	for name := range all {
		if !f.visited[name] {
			t.Errorf("field %s was not populated", name)
		}
	}
	if len(all) < 100 {
		t.Fatalf("only %d fields reachable from InterceptParams; the walk is broken", len(all))
	}
	compareFrames(t, "fully populated params", "evt_full", &p)

	// Control: the same comparison notices one member fewer. Clearing a member the full
	// value carries changes encoding/json's output, so a member the encoder did not write
	// would not go unnoticed.
	want, _ := refFrame(true, "evt_full", &p)
	saved := p.Event.Items[0].BarePart.SHA256
	p.Event.Items[0].BarePart.SHA256 = ""
	got, err := ahp.AppendInterceptRequest(nil, "evt_full", &p)
	p.Event.Items[0].BarePart.SHA256 = saved
	if err != nil || string(got) == string(want) {
		t.Fatalf("a missing member went unnoticed (err %v)", err)
	}
}

// FuzzEncodeEvent builds intercept params from the fuzz input — any strings (invalid
// UTF-8, escapes, HTML characters, line separators), raw values nested, spaced, valid or
// not, every float, nil against empty lists and maps — and requires the encoder to give
// encoding/json's bytes, or to refuse exactly what encoding/json refuses.
func FuzzEncodeEvent(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"))
	f.Add([]byte(strings.Repeat("\xff\x7f\x41\x00\xe2\x80\xa8\x22\x5c", 30)))
	f.Add([]byte(strings.Repeat("\x03\x30\x50\x90\xb0\x2a\x7b\x20", 40)))
	f.Add([]byte(strings.Repeat("\x05\x01\x02\x04\x08\x10\x20\x40\x80\xfe", 60)))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl := &filler{t: t, src: data}
		var p ahp.InterceptParams
		fl.fill(reflect.ValueOf(&p).Elem(), 0)
		id := ""
		if p.Event != nil {
			id = p.Event.ID
		}
		compareFrames(t, "fuzzed params", id, &p)
	})
}
