package proxy

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/internal/redistest"
	"github.com/hookproxy/hookproxy/state"
)

// BenchmarkStateStore is the cost of the conversation state per request (docs/operations.md,
// "Several replicas"): a tool loop with 1 or 50 prior tool results, all settled and known,
// plus one new result per request (its tool.after runs, its record is written), through a
// proxy with one in-process no-effect tool.after interceptor, on the memory store and on
// Redis over loopback. The Redis minus memory difference is what sharing costs: one
// MULTI/EXEC round trip to load, one to record.
func BenchmarkStateStore(b *testing.B) {
	up, _, _ := benchServers(b)
	cfg := testConfig(up.URL)
	rds := redistest.Start(b)
	stores := []struct {
		name string
		open func() state.Store
	}{
		{"memory", func() state.Store { return state.NewMemory(0, 0) }},
		{"redis", func() state.Store {
			s, err := state.NewRedis(state.RedisOptions{URL: rds.URL(), KeyPrefix: "bench:"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
	client := benchClient()
	for _, prior := range []int{1, 50} {
		for _, st := range stores {
			b.Run("prior"+strconv.Itoa(prior)+"/"+st.name, func(b *testing.B) {
				px := startProxy(b, cfg, newTestChainWith(b, noEffectPolicy{}, intercept("tool.after")), Options{State: st.open()})
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					i++
					resp, err := client.Post(px.URL+chatPath, "application/json", strings.NewReader(toolLoopBody(prior, i)))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		}
	}
}

// toolLoopBody is a chat tool loop with prior settled results and a last result whose
// content is new at every n.
func toolLoopBody(prior, n int) string {
	var m strings.Builder
	m.WriteString(`{"model":"gpt-4o","messages":[{"role":"user","content":"fix the build"}`)
	for k := 0; k <= prior; k++ {
		id := "call_" + strconv.Itoa(k)
		out := "output of step " + strconv.Itoa(k) + ": " + strings.Repeat("ok ", 40)
		if k == prior {
			out = "new output " + strconv.Itoa(n)
		}
		m.WriteString(`,{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"make\"}"}}]}`)
		m.WriteString(`,{"role":"tool","tool_call_id":"` + id + `","content":` + strconv.Quote(out) + `}`)
	}
	m.WriteString(`]}`)
	return m.String()
}
