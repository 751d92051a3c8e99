package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRigScenarios is the bench rig's table (../shared/bench, docs/benchmarks.md) as
// a Go benchmark: the rig's three request shapes, sent directly to a loopback upstream and
// through hookproxy configured as the rig configures it (hookproxy-launch.sh):
//   - none: no subscription (pass-through);
//   - deny: secrets refusing at model.request.before and tools at tool.before, in process;
//   - http: one loopback AHP HTTP backend on model.request.before that allows everything.
//
// Shapes: small (a system and a user message, JSON answer), stream (the same request
// answered by 20 SSE content chunks) and large (a 32 KiB pasted log in the user message).
// Each iteration sends the request once directly and once through the proxy, back to back
// and alternating which goes first, so that load drifting on a shared machine hits both
// alike; read direct-µs, proxy-µs and added-µs (medians), not ns/op. Client, proxy,
// upstream and backend share one process: the rig, with the proxy on its own core, is the
// measure of CPU per request; this is the one to run before and after a change.
func BenchmarkRigScenarios(b *testing.B) {
	up := newRigUpstream(b)
	backend := newHTTPBackend(b, "none")
	proxies := []struct {
		name  string
		hooks []map[string]any
	}{
		{"none", nil},
		{"deny", []map[string]any{
			hookEntry("dev.hookproxy.secrets", map[string]any{"type": "in_process", "policy": "secrets", "config": map[string]any{"action": "deny"}},
				subscription{events: []string{"model.request.before"}, timeoutMs: 500}),
			hookEntry("dev.hookproxy.tools", map[string]any{"type": "in_process", "policy": "tools", "config": map[string]any{
				"deny": []any{map[string]any{"tool": "Bash", "inputPattern": "rm -rf", "reason": "recursive delete"}}}},
				subscription{events: []string{"tool.before"}, timeoutMs: 500}),
		}},
		{"http", []map[string]any{
			hookEntry("dev.bench.backend", map[string]any{"type": "http", "url": backend.endpoint()},
				subscription{events: []string{"model.request.before"}, timeoutMs: 500}),
		}},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, WriteBufferSize: 64 << 10}}
	send := func(url, body string) time.Duration {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatalf("%s: status %d, %d bytes", url, resp.StatusCode, n)
		}
		return time.Since(start)
	}
	bases := map[string]string{}
	for _, p := range proxies {
		// As `hookproxy serve` builds it (app.BuildChain: the built-in policies too).
		if p.hooks == nil {
			bases[p.name] = startProxy(b, up.upstream())
		} else {
			bases[p.name] = startInlineProxy(b, up.URL, registrationDoc(b, p.hooks...))
		}
	}
	// The rig's block check: the deny chain must refuse its violation body (an AWS key id in
	// the last message) without the upstream; a benchmark of a chain that lets it through
	// would measure nothing.
	violation := strings.Replace(rigScenarios()[0].body, "TCP and UDP", "TCP and UDP (my key is AKIAIOSFODNN7EXAMPLE)", 1)
	resp, err := client.Post(bases["deny"]+"/openai/v1/chat/completions", "application/json", strings.NewReader(violation))
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || up.served.Load() != 0 {
		b.Fatalf("deny chain: violation answered %d, upstream served %d requests", resp.StatusCode, up.served.Load())
	}
	for _, sc := range rigScenarios() {
		for _, p := range proxies {
			base := bases[p.name]
			b.Run(sc.name+"/"+p.name, func(b *testing.B) {
				var direct, proxied, added []time.Duration
				i := 0
				for b.Loop() {
					var d, x time.Duration
					if i%2 == 0 {
						d = send(up.URL+"/v1/chat/completions", sc.body)
						x = send(base+"/openai/v1/chat/completions", sc.body)
					} else {
						x = send(base+"/openai/v1/chat/completions", sc.body)
						d = send(up.URL+"/v1/chat/completions", sc.body)
					}
					i++
					direct, proxied, added = append(direct, d), append(proxied, x), append(added, x-d)
				}
				b.ReportMetric(medianMicros(direct), "direct-µs")
				b.ReportMetric(medianMicros(proxied), "proxy-µs")
				b.ReportMetric(medianMicros(added), "added-µs")
			})
		}
	}
}

type rigScenario struct{ name, body string }

// rigScenarios are the rig's bodies (bodies/*.json): the same messages, and for large a
// pasted log of the same shape and size, generated here so that the test needs nothing
// beside the repository.
func rigScenarios() []rigScenario {
	const system = `{"role":"system","content":"You are a concise networking tutor. Answer in one short paragraph."}`
	small := `{"model":"gpt-4o-mini","messages":[` + system + `,{"role":"user","content":"What are the main differences between TCP and UDP, and when should I use each?"}],"temperature":0.2,"max_tokens":256}`
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[` + system + `,{"role":"user","content":"Explain how TCP congestion control works in a few sentences."}],"temperature":0.2,"max_tokens":256}`
	var log strings.Builder
	log.WriteString(`Here is the log from the last incident. Which upstream is failing and why?\n\n`)
	for i := 0; log.Len() < 32<<10-400; i++ {
		level, status := "INFO", 200
		if i%7 == 0 {
			level, status = "WARN", 503
		}
		fmt.Fprintf(&log, `2026-11-30T12:%02d:%02d.%03dZ %s svc=checkout request_id=req-%06d method=GET path=/api/v1/orders/{id} status=%d duration_ms=%d upstream=inventory-%d bytes=%d\n`,
			i/60%60, i%60, i*7%1000, level, i, status, i*13%97, i%3, i*31%512)
	}
	large := `{"model":"gpt-4o-mini","messages":[` + system + `,{"role":"user","content":"` + log.String() + `"}],"temperature":0.2,"max_tokens":256}`
	return []rigScenario{{"small", small}, {"stream", stream}, {"large", large}}
}

// rigUpstream answers as the rig's mock does: a chat completion, or a role chunk, 20
// content chunks, a finish chunk and [DONE], each flushed on its own, when the request
// streams. It keeps nothing per request (request bodies are read into pooled buffers).
type rigUpstream struct {
	*httptest.Server
	served atomic.Int64
}

func (u *rigUpstream) upstream() *upstream { return &upstream{Server: u.Server} }

func newRigUpstream(b *testing.B) *rigUpstream {
	const head = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764504000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":`
	events := []string{head + `{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"}
	for i := 0; i < 20; i++ {
		events = append(events, head+`{"content":"token`+strconv.Itoa(i)+` "},"logprobs":null,"finish_reason":null}]}`+"\n\n")
	}
	events = append(events, head+`{},"logprobs":null,"finish_reason":"stop"}]}`+"\n\n", "data: [DONE]\n\n")
	const answer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1764504000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"TCP is connection-oriented and reliable; UDP is connectionless and fast.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":16,"total_tokens":56}}`
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	u := &rigUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.served.Add(1)
		buf := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(buf)
		buf.Reset()
		_, _ = buf.ReadFrom(r.Body)
		if !bytes.Contains(buf.Bytes(), []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			fl.Flush()
		}
	}))
	b.Cleanup(u.Close)
	return u
}
