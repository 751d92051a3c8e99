package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// BenchmarkChat compares a client talking to the upstream directly with the same client
// talking through hookproxy: for a 1 KiB and a 32 KiB chat request, with a JSON answer and
// with a 20-chunk SSE stream, (a) with no subscription (fast path) and (b) with one
// in-process interceptor on model.request.before that requests no change. Client,
// proxy and upstream share the process, so B/op and allocs/op count all three.
func BenchmarkChat(b *testing.B) {
	up, fast, hooked := benchServers(b)
	client := benchClient()

	targets := []struct{ name, url string }{
		{"direct", up.URL + "/v1/chat/completions"},
		{"proxy_nosub", fast.URL + chatPath},
		{"proxy_mrb_noeffect", hooked.URL + chatPath},
	}
	for _, size := range []int{1 << 10, 32 << 10} {
		for _, streaming := range []bool{false, true} {
			body := chatBody(size, streaming)
			mode := "json"
			if streaming {
				mode = "sse20"
			}
			for _, tg := range targets {
				b.Run(strconv.Itoa(size>>10)+"KiB/"+mode+"/"+tg.name, func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(len(body)))
					for b.Loop() {
						resp, err := client.Post(tg.url, "application/json", strings.NewReader(body))
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
}

// benchServers starts the benchmark upstream (a JSON answer, or a 20-chunk stream when the
// request asks for one), a proxy with no subscription, and a proxy with one in-process
// no-effect interceptor on model.request.before.
func benchServers(b *testing.B) (up *fakeUpstream, fast, hooked *httptest.Server) {
	var stream strings.Builder
	for i := 0; i < 19; i++ {
		stream.WriteString(`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"token` + strconv.Itoa(i) + ` "},"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString(`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sse := stream.String()
	up = newUpstream(b, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body[:min(len(body), 64)]), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, sse)
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatText)
	})
	// The recording upstream would keep every body: record nothing while benchmarking.
	// Client, proxy and upstream share one heap, so the upstream reads into a reused
	// buffer: its garbage would otherwise trigger collections that both sides pay for
	// and blur what the proxy itself costs.
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := bufs.Get().(*bytes.Buffer)
		buf.Reset()
		_, _ = buf.ReadFrom(r.Body)
		up.respond(w, r, buf.Bytes())
		bufs.Put(buf)
	})
	cfg := testConfig(up.URL)
	fast = startProxy(b, cfg, nil, Options{})
	hooked = startProxy(b, cfg, newTestChainWith(b, noEffectPolicy{}, intercept("model.request.before")), Options{})
	return up, fast, hooked
}

// noEffectPolicy is the benchmark's in-process interceptor: it requests no change and,
// unlike the tests' fakePolicy, keeps nothing, so the heap does not grow with the number
// of requests sent.
type noEffectPolicy struct{}

func (noEffectPolicy) Intercept(context.Context, *ahp.InterceptRequest) (*ahp.InterceptResult, error) {
	return ahp.NoEffects(), nil
}

// benchClient is the benchmark's client. Its write buffer holds a whole request, so that
// sending one does not allocate a 32 KiB copy buffer each time (net/http's default for a
// body that does not fit): that garbage, too, would be paid by both sides.
func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, WriteBufferSize: 64 << 10}}
}

// chatBody builds a chat request of about size bytes.
func chatBody(size int, stream bool) string {
	head := `{"model":"gpt-4o",`
	if stream {
		head = `{"stream":true,"model":"gpt-4o",`
	}
	head += `"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"`
	tail := `"}]}`
	n := size - len(head) - len(tail)
	if n < 0 {
		n = 0
	}
	return head + strings.Repeat("lorem ipsum ", n/12+1)[:n] + tail
}

// BenchmarkChatAdded measures what the proxy adds to a request, robustly on a shared
// machine: every iteration sends the same request once directly and once through the
// proxy, back to back (alternating which goes first), and the metrics are the medians of
// each series and the median of the per-iteration differences. Drift in the machine's load
// then affects both sides of each pair alike instead of whichever sub-benchmark ran during
// a busy second. ns/op is the pair; read direct-µs, proxy-µs and added-µs.
func BenchmarkChatAdded(b *testing.B) {
	up, fast, hooked := benchServers(b)
	client := benchClient()
	send := func(url, body string) time.Duration {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	type shape struct {
		name      string
		body      string
		streaming bool
	}
	var shapes []shape
	for _, size := range []int{1 << 10, 32 << 10} {
		for _, streaming := range []bool{false, true} {
			mode := "json"
			if streaming {
				mode = "sse20"
			}
			shapes = append(shapes, shape{strconv.Itoa(size>>10) + "KiB/" + mode, chatBody(size, streaming), streaming})
		}
	}
	// A realistic agent request: system prompt, tools, and many turns of user text,
	// assistant tool calls and multi-line tool results (107 messages).
	shapes = append(shapes, shape{"32KiB-agent/json", agentBody(32 << 10), false})
	for _, sh := range shapes {
		body := sh.body
		{
			for _, tg := range []struct{ name, url string }{
				{"nosub", fast.URL + chatPath},
				{"mrb_noeffect", hooked.URL + chatPath},
			} {
				b.Run(sh.name+"/"+tg.name, func(b *testing.B) {
					var direct, proxied, added []float64
					i := 0
					for b.Loop() {
						var d, p time.Duration
						if i%2 == 0 {
							d = send(up.URL+"/v1/chat/completions", body)
							p = send(tg.url, body)
						} else {
							p = send(tg.url, body)
							d = send(up.URL+"/v1/chat/completions", body)
						}
						i++
						direct = append(direct, float64(d.Microseconds()))
						proxied = append(proxied, float64(p.Microseconds()))
						added = append(added, float64((p - d).Microseconds()))
					}
					b.ReportMetric(median(direct), "direct-µs")
					b.ReportMetric(median(proxied), "proxy-µs")
					b.ReportMetric(median(added), "added-µs")
				})
			}
		}
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// agentBody builds a chat request of about size bytes shaped like an agent's: a system
// prompt, a tool, and turns of user text, assistant tool calls and multi-line tool results.
func agentBody(size int) string {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}],"messages":[`)
	b.WriteString(`{"role":"system","content":"` + strings.Repeat("You are a careful coding agent. ", 40) + `"}`)
	for i := 0; b.Len() < size-64; i++ {
		n := strconv.Itoa(i)
		b.WriteString(`,{"role":"user","content":"Step ` + n + `: please look at file ` + n + ` and explain it."}`)
		b.WriteString(`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_` + n + `","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"src/file_` + n + `.go\"}"}}]}`)
		b.WriteString(`,{"role":"tool","tool_call_id":"call_` + n + `","content":"` + strings.Repeat("line "+n+" of the file\\n", 30) + `"}`)
	}
	b.WriteString(`,{"role":"user","content":"Now summarize."}]}`)
	return b.String()
}

// BenchmarkStreamLength shows what a passed-through stream costs in memory as it grows:
// the same request answered by streams of 20, 200 and 2000 chunks (each flushed on its
// own, as a model emits tokens), directly, through the proxy with no subscription, and
// with one request-side interceptor (the response still passes through). B/op counts
// client, proxy and upstream together. Nothing in the proxy keeps or copies the stream per
// chunk, so B/op stays flat as the stream grows a hundredfold; what does grow (about one
// 8-byte allocation per relayed write, net/http formatting the chunk-size line of writes
// over 255 bytes) is garbage the moment it is made.
func BenchmarkStreamLength(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"token "},"finish_reason":null}]}` + "\n\n")
	done := []byte(`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	up, fast, hooked := benchServers(b)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n, _ := strconv.Atoi(r.URL.Query().Get("chunks"))
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := 0; i < n; i++ {
			_, _ = w.Write(chunk)
			f.Flush()
		}
		_, _ = w.Write(done)
	})
	client := benchClient()
	body := chatBody(1<<10, true)
	for _, tg := range []struct{ name, url string }{
		{"direct", up.URL + "/v1/chat/completions"},
		{"nosub", fast.URL + chatPath},
		{"mrb_noeffect", hooked.URL + chatPath},
	} {
		for _, n := range []int{20, 200, 2000} {
			b.Run(tg.name+"/"+strconv.Itoa(n)+"chunks", func(b *testing.B) {
				b.ReportAllocs()
				url := tg.url + "?chunks=" + strconv.Itoa(n)
				for b.Loop() {
					resp, err := client.Post(url, "application/json", strings.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					got, cerr := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || got < int64(n*len(chunk)) {
						b.Fatalf("status %d, %d bytes for %d chunks: %v", resp.StatusCode, got, n, cerr)
					}
				}
			})
		}
	}
}
