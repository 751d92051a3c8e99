package mapping

import (
	"reflect"
	"testing"
)

func TestSSEReaderLineEnds(t *testing.T) {
	// \r, \n and \r\n all end a line, also when a chunk ends between \r and \n; data lines
	// of one event are joined with \n.
	var got []string
	r := SSEReader{Dispatch: func(ev string, data []byte) error {
		got = append(got, ev+"|"+string(data))
		return nil
	}}
	in := "event: a\r\ndata: 1\r\rdata: 2\ndata:3\n\n: c\n\nevent: b\rdata: x\r"
	for i := 0; i < len(in); i++ {
		if err := r.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a|1", "|2\n3", "b|x"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

func TestSSEReaderDatalessAndBound(t *testing.T) {
	in := "event: ping\n\n\n: keep-alive\n\ndata: 1\n\n"
	for _, dataless := range []bool{false, true} {
		var got []string
		r := SSEReader{Dataless: dataless, Dispatch: func(ev string, data []byte) error {
			got = append(got, ev+"|"+string(data))
			return nil
		}}
		if err := r.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
		// By the standard a block without data dispatches nothing; Dataless dispatches it
		// when it named an event, never for a bare blank line or a comment.
		want := []string{"|1"}
		if dataless {
			want = []string{"ping|", "|1"}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Dataless=%v: events %q, want %q", dataless, got, want)
		}
	}

	r := SSEReader{MaxEvent: 8, Dispatch: func(string, []byte) error { return nil }}
	if err := r.Write([]byte("data: 12")); err != nil {
		t.Fatalf("a line at the bound: %v", err)
	}
	if err := r.Write([]byte("3")); err == nil {
		t.Fatal("a line past the bound was buffered")
	}
	r = SSEReader{MaxEvent: 8, Dispatch: func(string, []byte) error { return nil }}
	if err := r.Write([]byte("data: 1234\ndata: 5678\n")); err == nil {
		t.Fatal("an event whose data passes the bound was buffered")
	}
}

// TestSSEReaderEventNameOutlivesDispatch: an assembler may keep an event's name (the
// Responses assembler keeps its terminal event's), so a later event must not change it.
func TestSSEReaderEventNameOutlivesDispatch(t *testing.T) {
	var kept []string
	r := SSEReader{Dispatch: func(ev string, _ []byte) error {
		kept = append(kept, ev)
		return nil
	}}
	if err := r.Write([]byte("event: alpha\ndata: 1\n\nevent: bravo\ndata: 2\n\n")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha", "bravo"}; !reflect.DeepEqual(kept, want) {
		t.Fatalf("kept names %q, want %q", kept, want)
	}
}
