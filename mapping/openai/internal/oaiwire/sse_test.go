package oaiwire

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
