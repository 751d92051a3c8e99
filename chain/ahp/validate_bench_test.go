package ahp_test

import (
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// BenchmarkValidateMessage: the whole-message validation a backend (hookproxy backend,
// backend.Server) runs on every hooks/intercept it receives, for a model.request.before of
// a short chat and of a 32 KiB prompt.
func BenchmarkValidateMessage(b *testing.B) {
	msg := func(id, role, text string) string {
		return `{"id":"` + id + `","role":"` + role + `","parts":[{"id":"` + id + `.p0","kind":"text","mediaType":"text/plain","selection":"body","text":"` + text + `"}]}`
	}
	for _, tc := range []struct{ name, text string }{
		{"small", "What is the capital of France? Answer in one word."},
		{"32KiB", strings.Repeat("2026-09-15 12:00:00 INFO request served in 12 ms path=/v1/items status=200\\n", 32<<10/78)},
	} {
		items := msg("m0", "system", "You are a helpful assistant.") + "," + msg("m1", "user", tc.text)
		frame := []byte(intercept(ev("model.request.before", modelMA+`,"params":{"temperature":0},"items":[`+items+`]`), `{"effects":["deny"]}`))
		if err := ahp.ValidateMessage(frame); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if err := ahp.ValidateMessage(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
