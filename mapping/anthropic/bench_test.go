package anthropic_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

// request32K builds an agent conversation of about 32 KiB: a cached system prompt and
// turns of text, tool calls and tool results.
func request32K() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":4096,"stream":true,"system":[{"type":"text","text":"` +
		strings.Repeat("You are a careful coding agent. ", 20) + `","cache_control":{"type":"ephemeral"}}],"messages":[`)
	b.WriteString(`{"role":"user","content":"fix the failing tests"}`)
	for i := 0; b.Len() < 32<<10-600; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Step %d: reading the file."},`+
			`{"type":"tool_use","id":"toolu_%04d","name":"Read","input":{"path":"pkg/file%d.go","limit":200}}]}`, i, i, i)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%04d","content":"%s"}]}`,
			i, strings.Repeat(`package pkg\nfunc F() int { return 1 }\n`, 8))
	}
	b.WriteString(`,{"role":"user","content":[{"type":"text","text":"continue","cache_control":{"type":"ephemeral"}}]}]}`)
	return []byte(b.String())
}

func BenchmarkDecodeRequest32KiB(b *testing.B) {
	body := request32K()
	// fresh: the whole decode, as for a request no earlier one shares messages with;
	// repeated: the same body again, which resumes the remembered decode (resume.go).
	for _, mode := range []struct {
		name   string
		decode func([]byte) (*mapping.Request, error)
	}{{"fresh", anthropic.DecodeFresh}, {"repeated", tr.DecodeRequest}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := mode.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeRequestUnchanged is the fast path of every request no hook changed: it
// must return the original bytes without allocating in proportion to the body.
func BenchmarkEncodeRequestUnchanged(b *testing.B) {
	req := decode(b, string(request32K()))
	items := clone(req.Items)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.EncodeRequest(req, items); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequestOneToolResultChanged(b *testing.B) {
	req := decode(b, string(request32K()))
	items := clone(req.Items)
	i := find(b, items, "tool", 3)
	items[i].Parts[0].Text = ptr("[redacted]")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.EncodeRequest(req, items); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAssembler(b *testing.B) {
	stream := []byte(sseStream)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		a := tr.NewAssembler()
		_, _ = a.Write(stream)
		if _, err := a.Body(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEncodeRequestUnchangedDoesNotAllocate(t *testing.T) {
	req := decode(t, string(request32K()))
	items := clone(req.Items)
	if n := testing.AllocsPerRun(20, func() { _, _ = tr.EncodeRequest(req, items) }); n != 0 {
		t.Errorf("EncodeRequest(unchanged) allocates %v times", n)
	}
}

// BenchmarkDecodeResponse decodes a JSON Messages response as a coding agent's turn ends:
// a sentence of text and one tool call, with usage.
func BenchmarkDecodeResponse(b *testing.B) {
	body := []byte(`{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[{"type":"text","text":"I'll read the file to see what it holds before changing anything."},` +
		`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"Read","input":{"file_path":"/work/src/pkg/file.go","limit":200}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":2095,"cache_creation_input_tokens":0,` +
		`"cache_read_input_tokens":41000,"output_tokens":503,"service_tier":"standard"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.DecodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}
