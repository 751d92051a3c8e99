package chat

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// request32K builds a realistic agent request of about 32 KiB: a system prompt, tools, and
// turns of user text, assistant tool calls and tool results.
func request32K() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","stream":true,"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}],"messages":[`)
	b.WriteString(`{"role":"system","content":` + jsonString(strings.Repeat("You are a careful coding agent. ", 40)) + `}`)
	for i := 0; b.Len() < 32<<10; i++ {
		fmt.Fprintf(&b, `,{"role":"user","content":%s}`, jsonString(fmt.Sprintf("Step %d: please look at file %d and explain it.", i, i)))
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":%s}}]}`,
			i, jsonString(fmt.Sprintf(`{"path":"src/file_%d.go"}`, i)))
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":%s}`, i, jsonString(strings.Repeat(fmt.Sprintf("line %d of the file\n", i), 30)))
	}
	b.WriteString(`,{"role":"user","content":"Now summarize."}]}`)
	return []byte(b.String())
}

func BenchmarkDecodeRequest32K(b *testing.B) {
	body := request32K()
	c := NewChat()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRequestUnchanged is the common path: no hook changed anything, so the
// original bytes go upstream. It must not allocate in proportion to the body.
func BenchmarkEncodeRequestUnchanged(b *testing.B) {
	c := NewChat()
	req, err := c.DecodeRequest(request32K())
	if err != nil {
		b.Fatal(err)
	}
	items := cloneItems(req.Items)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.EncodeRequest(req, items); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEncodeRequestUnchangedDoesNotAllocate(t *testing.T) {
	c := NewChat()
	req, err := c.DecodeRequest(request32K())
	if err != nil {
		t.Fatal(err)
	}
	items := cloneItems(req.Items)
	if n := testing.AllocsPerRun(20, func() { c.EncodeRequest(req, items) }); n != 0 {
		t.Errorf("EncodeRequest of unchanged items allocates %v times", n)
	}
}

func BenchmarkEncodeRequestOneEdit(b *testing.B) {
	c := NewChat()
	req, err := c.DecodeRequest(request32K())
	if err != nil {
		b.Fatal(err)
	}
	items := setText(req.Items, len(req.Items)-1, 0, "Now summarize briefly.")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.EncodeRequest(req, items); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAssembler(b *testing.B) {
	stream := []byte(toolStream)
	c := NewChat()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		a := c.NewAssembler()
		for s := stream; len(s) > 0; {
			n := min(64, len(s)) // network-sized reads
			a.Write(s[:n])
			s = s[n:]
		}
		if _, err := a.Body(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteStream(b *testing.B) {
	body := []byte(toolResponse)
	c := NewChat()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.WriteStream(io.Discard, body); err != nil {
			b.Fatal(err)
		}
	}
}
