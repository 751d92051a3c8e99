package mcp

import (
	"strings"
	"testing"
)

// The per-POST work on the tools/call path: strict parse, call extraction, and the
// canonical view of a result with a few kilobytes of text.

func BenchmarkParseToolCall(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/src/main.go","limit":200},"_meta":{"progressToken":"p"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseBody(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := ToolCallOf(&m.Messages[0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResultItems(b *testing.B) {
	text := strings.Repeat("package main // line of source\n", 128)
	raw := []byte(`{"content":[{"type":"text","text":` + string(appendString(nil, text)) + `}],"structuredContent":{"lines":128}}`)
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseResult(raw)
		if err != nil {
			b.Fatal(err)
		}
		_ = NewOutput("m", r)
	}
}
