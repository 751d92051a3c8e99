package gemini_test

import (
	"testing"

	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// BenchmarkStreamEditModifiedCall: a streamed response whose first tool call is rewritten
// (modify(input)) through the stream editor.
func BenchmarkStreamEditModifiedCall(b *testing.B) {
	mappingtest.BenchEdit(b, tr, sse(streamChunks...), mappingtest.ModifyFirst)
}
