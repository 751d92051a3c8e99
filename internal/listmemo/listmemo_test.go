package listmemo

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func text(s string) *string { return &s }

func conv(n int, seed string) []ahp.Message {
	out := []ahp.Message{{ID: "sys", Role: ahp.RoleSystem, Parts: []ahp.Part{ahp.TextPart("sys.0", "you are "+seed)}}}
	for i := range n {
		out = append(out, ahp.Message{ID: "m" + string(rune('a'+i)), Role: ahp.RoleUser,
			Parts: []ahp.Part{ahp.TextPart("p", seed+" turn "+string(rune('a'+i)))}})
	}
	return out
}

// Every field of a message, a part and a bare part takes part in the comparison: changing
// any one of them (through reflection, so that a field added later is covered) makes the
// messages unequal. The control: the unchanged copy is equal.
func TestEveryFieldCompared(t *testing.T) {
	base := ahp.Message{ID: "m", Role: ahp.RoleUser, Parts: []ahp.Part{{ID: "p", Kind: ahp.KindText,
		MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody, Category: "c", Text: text("t"),
		Body: &ahp.Ref{Ref: "r"}, Gap: &ahp.Gap{Reason: "g"}, Size: new(int64), SHA256: "s"}},
		BarePart: &ahp.BarePart{Kind: "k", MediaType: "mt", Selection: "sel", Category: "c", Text: text("t"),
			Body: &ahp.Ref{Ref: "r"}, Gap: &ahp.Gap{Reason: "g"}, Size: new(int64), SHA256: "s"}}
	clone := func() ahp.Message { return ahp.CloneMessages([]ahp.Message{base})[0] }
	if c := clone(); !messageEqual(&base, &c) {
		t.Fatal("control: an unchanged copy compares unequal")
	}
	mutate := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Pointer:
			if v.Elem().Kind() == reflect.Struct {
				f := v.Elem().Field(0)
				f.SetString(f.String() + "x")
			} else if v.Elem().Kind() == reflect.String {
				v.Elem().SetString(v.Elem().String() + "x")
			} else {
				v.Elem().SetInt(v.Elem().Int() + 1)
			}
		default:
			t.Fatalf("field of kind %s: teach the test to change it", v.Kind())
		}
	}
	n := 0
	for _, target := range []string{"message", "part", "bare"} {
		var typ reflect.Type
		switch target {
		case "message":
			typ = reflect.TypeOf(ahp.Message{})
		case "part":
			typ = reflect.TypeOf(ahp.Part{})
		default:
			typ = reflect.TypeOf(ahp.BarePart{})
		}
		for f := range typ.NumField() {
			if typ.Field(f).Anonymous || typ.Field(f).Name == "Parts" {
				continue
			}
			c := clone()
			var v reflect.Value
			switch target {
			case "message":
				v = reflect.ValueOf(&c).Elem().Field(f)
			case "part":
				v = reflect.ValueOf(&c.Parts[0]).Elem().Field(f)
			default:
				v = reflect.ValueOf(c.BarePart).Elem().Field(f)
			}
			mutate(v)
			n++
			if messageEqual(&base, &c) {
				t.Errorf("%s field %s changed, yet the messages compare equal", target, typ.Field(f).Name)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d fields tried", n)
	}
	c := clone()
	c.Parts = append(c.Parts, c.Parts[0])
	if messageEqual(&base, &c) {
		t.Error("a part more, yet equal")
	}
}

func TestFindLongestSharedRun(t *testing.T) {
	m := New[int](1 << 20)
	a := conv(5, "A")
	key, e, n := m.Find(1, a)
	if e != nil || n != 0 {
		t.Fatalf("empty memo found %v, %d", e, n)
	}
	m.Keep(key, a, 0, 5, 0, nil)
	b := append(ahp.CloneMessages(a[:4]), conv(7, "A")[5:]...)
	b[3].Parts[0].Text = text("edited")
	key2, e, n := m.Find(1, b)
	if e == nil || n != 3 || e.Value != 5 || key2 != key {
		t.Fatalf("found %v sharing %d, want the first list sharing 3", e, n)
	}
	// Another salt files apart: nothing found.
	if _, e, _ := m.Find(2, b); e != nil {
		t.Fatal("a list kept under one salt found under another")
	}
	m.Keep(key2, b, n, 7, 0, e)
	_, kept, n := m.Find(1, b)
	if kept == nil || n != len(b) || kept.Value != 7 {
		t.Fatalf("the kept list is not found whole: %v sharing %d", kept, n)
	}
	if bytes, entries := m.held.Load(), m.entries.Load(); entries != 1 || bytes != cost(kept) {
		t.Fatalf("after replacing: %d entries, %d bytes; want 1, %d", entries, bytes, cost(kept))
	}
	// The memo keeps the caller's list itself (lists are read-only): an edit goes to a
	// copy (a part replaced, a message changed), which shares the messages before it.
	c := slices.Clone(b)
	parts := slices.Clone(c[5].Parts)
	parts[0].Text = text("changed by the caller")
	c[5].Parts = parts
	c[6].ID = "changed"
	if _, _, n := m.Find(1, c); n != 5 {
		t.Fatalf("the caller's edited copy shares %d messages with the kept list, want 5", n)
	}
	if _, _, n := m.Find(1, b); n != len(b) {
		t.Fatalf("the kept list changed with the copy: it shares %d of %d messages with b", n, len(b))
	}
	// Another conversation (another first message) is not a candidate.
	if _, e, _ := m.Find(1, conv(5, "B")); e != nil {
		t.Fatal("another conversation's list found")
	}
}

// Kept lists are the callers' own lists and share their parts, so neither is ever written
// in place. Under go test a kept list checks itself at every Find: a text, or a message of
// the list, written in place through the caller's list panics there, naming the rule.
// Control: the same edit made in a copy passes.
func TestKeptListWrittenInPlacePanics(t *testing.T) {
	for _, edit := range []string{"a copy", "a text", "a message"} {
		inPlace := edit != "a copy"
		m := New[int](1 << 20)
		a := conv(5, "A")
		key, _, _ := m.Find(1, a)
		m.Keep(key, a, 0, 5, 0, nil)
		switch edit {
		case "a text":
			*a[2].Parts[0].Text = "written in place"
		case "a message":
			a[2].Role = "written in place"
		default:
			c := slices.Clone(a)
			parts := slices.Clone(c[2].Parts)
			parts[0].Text = text("replaced")
			c[2].Parts, c[2].Role = parts, "replaced"
		}
		panicked := func() (p any) {
			defer func() { p = recover() }()
			m.Find(1, conv(5, "A"))
			return nil
		}()
		if inPlace != (panicked != nil) {
			t.Errorf("%s written: Find panicked with %v", edit, panicked)
		}
		if panicked != nil && !strings.Contains(fmt.Sprint(panicked), "written in place") {
			t.Errorf("the panic does not name the rule: %v", panicked)
		}
	}
}

func TestMemoryBounded(t *testing.T) {
	const limit = 64 << 10
	m := New[int](limit)
	for i := range 500 {
		l := conv(10, string(rune('A'+i%26))+string(rune('a'+i/26)))
		key, _, _ := m.Find(0, l)
		m.Keep(key, l, 0, i, 100, nil)
		if h := m.held.Load(); h > limit {
			t.Fatalf("after %d lists the memo holds %d bytes, over its limit %d", i+1, h, limit)
		}
	}
	if b, e := Stats(); b <= 0 || e <= 0 {
		t.Fatalf("Stats reports %d bytes, %d entries", b, e)
	}
}

// A list equal to the kept one but decoded afresh (its texts in other memory) replaces the
// kept texts with its own, so that the conversation's next request, which shares them,
// compares by address again.
func TestKeepAdoptsTheNewMemory(t *testing.T) {
	m := New[int](1 << 20)
	a := conv(3, "A")
	key, _, _ := m.Find(0, a)
	m.Keep(key, a, 0, 1, 0, nil)
	b := conv(4, "A") // equal to a for 4 messages, every text in new memory
	key, e, n := m.Find(0, b)
	if n != 4 {
		t.Fatalf("shares %d, want 4", n)
	}
	m.Keep(key, b, n, 2, 0, e)
	_, kept, _ := m.Find(0, b)
	for i := range b {
		if unsafe.StringData(*kept.items[i].Parts[0].Text) != unsafe.StringData(*b[i].Parts[0].Text) {
			t.Fatalf("message %d: the kept text is not the newer list's memory", i)
		}
	}
	// Control: the first list's memory is not the second's.
	if unsafe.StringData(*a[0].Parts[0].Text) == unsafe.StringData(*b[0].Parts[0].Text) {
		t.Fatal("control: the two lists share memory")
	}
}

// cost is what an entry holding e's list and value 0 extra should be counted: the walk of
// every message that Keep does only for the messages a list does not share with the one
// it replaces.
func cost[V any](e *Entry[V]) int64 {
	n := int64(cap(e.items))*int64(unsafe.Sizeof(ahp.Message{})) + int64(cap(e.sums))*8 + 64
	for i := range e.items {
		n += messageCost(&e.items[i])
	}
	return n
}
