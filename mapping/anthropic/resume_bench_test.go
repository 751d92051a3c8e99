package anthropic_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

// sessionBodies returns two consecutive requests of a Claude-Code-shaped session (as
// e2e's BenchmarkAgentSession sends them: ~12 KB of system prompt, ~35 KB of tools, turns
// of text, a Read tool_use and ~2 KB of tool output, the cache breakpoint on the last
// message) whose second is about size bytes.
func sessionBodies(size int) (prev, next []byte) {
	rng := rand.New(rand.NewPCG(3, 3))
	words := strings.Fields(`the a function returns error value when nil config request handler server client buffer stream`)
	text := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	system := `[{"type":"text","text":"You are Claude Code."},{"type":"text","text":` + strconv.Quote(text(2000)) +
		`,"cache_control":{"type":"ephemeral"}}]`
	var tools []string
	for i := 0; i < 16; i++ {
		tools = append(tools, fmt.Sprintf(`{"name":"T%d","description":%s,"input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}`,
			i, strconv.Quote(text(300))))
	}
	head := `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":false,"metadata":{"user_id":"user_0_session_1"},` +
		`"system":` + system + `,"tools":[` + strings.Join(tools, ",") + `],"messages":[`
	msgs := []string{`{"role":"user","content":[{"type":"text","text":` + strconv.Quote(text(60)) + `}]}`}
	body := func() []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for i, m := range msgs {
			if i > 0 {
				b.WriteByte(',')
			}
			if i == len(msgs)-1 {
				m = strings.Replace(m, `"}]}`, `","cache_control":{"type":"ephemeral"}}]}`, 1)
			}
			b.WriteString(m)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
	for turn := 1; ; turn++ {
		prev = body()
		id := fmt.Sprintf("toolu_%04d", turn)
		var out strings.Builder
		for i := 1; out.Len() < 1600; i++ {
			fmt.Fprintf(&out, "%6d\t%s\n", i, text(8))
		}
		msgs = append(msgs, `{"role":"assistant","content":[{"type":"text","text":`+strconv.Quote("Let me read. "+text(20))+`},`+
			`{"type":"tool_use","id":"`+id+`","name":"Read","input":{"file_path":"/repo/f`+strconv.Itoa(turn)+`.go"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":`+strconv.Quote(out.String())+`}]}`)
		if next = body(); len(next) >= size {
			return prev, next
		}
	}
}

// BenchmarkDecodeTurn decodes the next request of a session from the start (fresh) and
// resuming the decode of the request before it (resumed).
func BenchmarkDecodeTurn(b *testing.B) {
	for _, size := range []int{100 << 10, 300 << 10} {
		prev, next := sessionBodies(size)
		b.Run(fmt.Sprintf("%dKB/fresh", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := anthropic.DecodeFresh(next); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%dKB/resumed", size>>10), func(b *testing.B) {
			anthropic.ForgetDecodes()
			resumed := 0
			defer anthropic.OnResume(func(int) { resumed++ })()
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := tr.DecodeRequest(prev); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := tr.DecodeRequest(next); err != nil {
					b.Fatal(err)
				}
			}
			if resumed < b.N {
				b.Fatalf("%d of %d decodes resumed", resumed/2, b.N)
			}
		})
	}
}
