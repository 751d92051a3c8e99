package gemini_test

import (
	"strings"
	"testing"
)

// longConversation is an agent loop of n tool rounds, as a Gemini body.
func longConversation(n int) string {
	var b strings.Builder
	b.WriteString(`{"systemInstruction":{"parts":[{"text":"You are a coding agent."}]},"contents":[{"role":"user","parts":[{"text":"fix the build"}]}`)
	for i := 0; i < n; i++ {
		b.WriteString(`,{"role":"model","parts":[{"text":"Looking."},{"functionCall":{"name":"run","args":{"cmd":"go build ./..."}},"thoughtSignature":"c2ln"}]}`)
		b.WriteString(`,{"role":"user","parts":[{"functionResponse":{"name":"run","response":{"output":"` + strings.Repeat("main.go:1: undefined: x ", 20) + `"}}}]}`)
	}
	b.WriteString(`],"tools":[{"functionDeclarations":[{"name":"run"}]}]}`)
	return b.String()
}

// BenchmarkDecodeRequest: every hooked Gemini request is decoded whole.
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(longConversation(50))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := tr.DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRequestOneEdit: a redaction in the last tool result re-renders only its
// content.
func BenchmarkEncodeRequestOneEdit(b *testing.B) {
	body := []byte(longConversation(50))
	req, err := tr.DecodeRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	items := clone(req.Items)
	last := &items[len(items)-1].Parts[0]
	last.Text = ptr(`{"output":"[REDACTED]"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := tr.EncodeRequest(req, items); err != nil {
			b.Fatal(err)
		}
	}
}
