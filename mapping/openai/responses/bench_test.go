package responses

import (
	"bytes"
	"testing"
)

// The translator runs on every intercepted model call: decoding, the unchanged-request fast
// path, rendering an edit, and assembling a held stream are the hot paths.

func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(fullRequest)
	tr := New()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequestEdited(b *testing.B) {
	tr := New()
	req, err := tr.DecodeRequest([]byte(fullRequest))
	if err != nil {
		b.Fatal(err)
	}
	items := setText(req.Items, 4, 0, "[REDACTED]")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.EncodeRequest(req, items); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAssembler(b *testing.B) {
	stream := []byte(toolStream)
	tr := New()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		a := tr.NewAssembler()
		a.Write(stream)
		if _, err := a.Body(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteStream(b *testing.B) {
	body := []byte(toolResponse)
	tr := New()
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := tr.WriteStream(&buf, body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEncodeRequestUnchangedDoesNotAllocate(t *testing.T) {
	tr := New()
	req, err := tr.DecodeRequest([]byte(fullRequest))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := tr.EncodeRequest(req, req.Items); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("the unchanged path allocates %v times", n)
	}
}
