package mapping

import (
	"bytes"
	"strings"
	"testing"
)

type sseBlock struct {
	name, data string
	hasData    bool
}

func splitAll(t testing.TB, in []byte, chunk int) (raw []byte, blocks []sseBlock) {
	s := SSESplitter{Dispatch: func(r []byte, name string, data []byte, hasData bool) error {
		raw = append(raw, r...)
		if hasData {
			blocks = append(blocks, sseBlock{strings.Clone(name), string(data), hasData})
		}
		return nil
	}}
	for len(in) > 0 {
		n := min(chunk, len(in))
		if err := s.Write(in[:n]); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	if _, err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return raw, blocks
}

func TestSSESplitterKeepsBytesAndParses(t *testing.T) {
	in := []byte(": keep-alive\n\nevent: a\ndata: {\"x\":1}\n\ndata: one\r\ndata:two\r\n\r\nevent: b\rdata: c\r\rdata: tail")
	want := []sseBlock{{"a", `{"x":1}`, true}, {"", "one\ntwo", true}, {"b", "c", true}, {"", "tail", true}}
	for chunk := 1; chunk <= len(in); chunk++ {
		raw, blocks := splitAll(t, in, chunk)
		if !bytes.Equal(raw, in) {
			t.Fatalf("chunk %d: raw bytes differ:\n%q\n%q", chunk, raw, in)
		}
		if len(blocks) != len(want) {
			t.Fatalf("chunk %d: blocks %+v", chunk, blocks)
		}
		for i := range want {
			if blocks[i] != want[i] {
				t.Fatalf("chunk %d: block %d = %+v, want %+v", chunk, i, blocks[i], want[i])
			}
		}
	}
}

func FuzzSSESplitter(f *testing.F) {
	f.Add([]byte("data: a\n\nevent: x\r\ndata: b\r\n\r\n"), 3)
	f.Fuzz(func(t *testing.T, in []byte, chunk int) {
		if chunk <= 0 {
			chunk = 1
		}
		raw, whole := splitAll(t, in, len(in)+1)
		if !bytes.Equal(raw, in) {
			t.Fatalf("raw differs")
		}
		raw2, pieces := splitAll(t, in, chunk)
		if !bytes.Equal(raw2, in) || len(whole) != len(pieces) {
			t.Fatalf("chunking changed the result: %v vs %v", whole, pieces)
		}
		for i := range whole {
			if whole[i] != pieces[i] {
				t.Fatalf("block %d differs by chunking", i)
			}
		}
	})
}

func TestSSESplitterSkipsALeadingByteOrderMark(t *testing.T) {
	// The first event after a byte-order mark is read, as TextDecoder-based clients read it
	// (the WHATWG parser drops one leading BOM); its bytes stay in raw. A BOM anywhere else
	// is part of its line.
	in := []byte("\ufeffdata: first\n\n\ufeffdata: second\n\ndata: third\n\n")
	for chunk := 1; chunk <= len(in); chunk++ {
		raw, blocks := splitAll(t, in, chunk)
		if !bytes.Equal(raw, in) {
			t.Fatalf("chunk %d: raw bytes differ", chunk)
		}
		want := []sseBlock{{"", "first", true}, {"", "third", true}}
		if len(blocks) != len(want) || blocks[0] != want[0] || blocks[1] != want[1] {
			t.Fatalf("chunk %d: blocks %+v", chunk, blocks)
		}
	}
}
