package e2e

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Streaming benchmarks through the embedded default chain. Client, proxy and
// upstream share the process; each iteration runs the same exchange directly and through
// the proxy back to back, and the metrics are medians, so load drift on a shared machine
// hits both sides alike. Read the reported µs metrics, not ns/op.

func benchClientE2E() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
}

func postStream(b *testing.B, c *http.Client, url, body string) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+openaiKey)
	req.Header.Set("X-Api-Key", anthropicKey)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	return resp
}

// readUntil reads the stream until it contains want and returns when that happened.
func readUntil(b *testing.B, r *bufio.Reader, want string) time.Time {
	var seen strings.Builder
	for {
		line, err := r.ReadString('\n')
		seen.WriteString(line)
		if strings.Contains(line, want) {
			return time.Now()
		}
		if err != nil {
			b.Fatalf("stream ended without %q: %v (%q)", want, err, seen.String())
		}
	}
}

func medianMicros(xs []time.Duration) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return float64(s[len(s)/2].Nanoseconds()) / 1e3
}

// BenchmarkStreamFirstText: time from sending the request to reading the first text
// delta of a paced stream (the upstream waits 2 ms between events), directly and through
// the default chain, whose tool.before interceptors used to hold the whole answer.
// Target: added-µs within 2 ms.
func BenchmarkStreamFirstText(b *testing.B) {
	for _, name := range []string{"openai-chat", "openai-responses", "anthropic"} {
		g := gatedStreams[name]
		b.Run(name, func(b *testing.B) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				for _, blk := range append(slices.Clone(g.before), g.after...) {
					_, _ = io.WriteString(w, blk+"\n\n")
					fl.Flush()
					time.Sleep(2 * time.Millisecond)
				}
			}))
			defer up.Close()
			proxied := startDefaultProxyB(b, up.URL) + g.path
			direct := up.URL + strings.TrimPrefix(strings.TrimPrefix(g.path, "/openai"), "/anthropic")
			c := benchClientE2E()
			var d, p, added []time.Duration
			i := 0
			for b.Loop() {
				var pair [2]time.Duration
				for k := range 2 {
					url := direct
					if (k+i)%2 == 1 {
						url = proxied
					}
					start := time.Now()
					resp := postStream(b, c, url, g.body)
					at := readUntil(b, bufio.NewReader(resp.Body), g.firstText)
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if url == direct {
						pair[0] = at.Sub(start)
					} else {
						pair[1] = at.Sub(start)
					}
				}
				d, p, added = append(d, pair[0]), append(p, pair[1]), append(added, pair[1]-pair[0])
				i++
			}
			b.ReportMetric(medianMicros(d), "direct-µs")
			b.ReportMetric(medianMicros(p), "proxy-µs")
			b.ReportMetric(medianMicros(added), "added-µs")
		})
	}
}

// BenchmarkStreamCallEmission: time from the upstream writing the event that completes a
// tool call to the client reading that call, directly and through the default chain
// (the built-in tools and secrets policies settle its tool.before in process in between).
// Target: added-µs ≤ 1000.
func BenchmarkStreamCallEmission(b *testing.B) {
	for _, name := range []string{"openai-chat", "openai-responses", "anthropic"} {
		g := gatedStreams[name]
		b.Run(name, func(b *testing.B) {
			sent := make(chan time.Time, 1)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				for _, blk := range g.before {
					_, _ = io.WriteString(w, blk+"\n\n")
				}
				fl.Flush()
				sent <- time.Now()
				_, _ = io.WriteString(w, strings.Join(g.after, "\n\n")+"\n\n")
				fl.Flush()
			}))
			defer up.Close()
			proxied := startDefaultProxyB(b, up.URL) + g.path
			direct := up.URL + strings.TrimPrefix(strings.TrimPrefix(g.path, "/openai"), "/anthropic")
			c := benchClientE2E()
			var d, p, added []time.Duration
			i := 0
			for b.Loop() {
				var pair [2]time.Duration
				for k := range 2 {
					url := direct
					if (k+i)%2 == 1 {
						url = proxied
					}
					resp := postStream(b, c, url, g.body)
					at := readUntil(b, bufio.NewReader(resp.Body), "ls -la")
					from := <-sent
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if url == direct {
						pair[0] = at.Sub(from)
					} else {
						pair[1] = at.Sub(from)
					}
				}
				d, p, added = append(d, pair[0]), append(p, pair[1]), append(added, pair[1]-pair[0])
				i++
			}
			b.ReportMetric(medianMicros(d), "direct-µs")
			b.ReportMetric(medianMicros(p), "proxy-µs")
			b.ReportMetric(medianMicros(added), "added-µs")
		})
	}
}

// BenchmarkStreamTextDefaultChain: B/op of a text-only answer of 200 and 2,000 deltas
// through the default chain. The proxy keeps nothing of text it relayed, so B/op must stay
// flat as the stream grows tenfold.
func BenchmarkStreamTextDefaultChain(b *testing.B) {
	delta := map[string]string{
		"openai-chat":      `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"token "},"finish_reason":null}]}`,
		"openai-responses": "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":SEQ,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"token \"}",
		"anthropic":        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token \"}}",
	}
	tail := map[string][]string{
		"openai-chat": {`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `data: [DONE]`},
		"openai-responses": {
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":SEQ,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"completed\",\"model\":\"gpt-4o\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"token\",\"annotations\":[]}]}]}}",
		},
		"anthropic": {
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}",
		},
	}
	for _, name := range []string{"openai-chat", "openai-responses", "anthropic"} {
		g := gatedStreams[name]
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			seq := len(g.before)
			for _, blk := range g.before {
				_, _ = io.WriteString(w, blk+"\n\n")
			}
			// The deltas are written from one reused buffer, so that B/op measures the
			// proxy and the client, not this upstream.
			pre, post, _ := strings.Cut(delta[name]+"\n\n", "SEQ")
			buf := make([]byte, 0, len(pre)+len(post)+20)
			for range n {
				buf = append(buf[:0], pre...)
				if strings.Contains(delta[name], "SEQ") {
					buf = strconv.AppendInt(buf, int64(seq), 10)
					buf = append(buf, post...)
				}
				_, _ = w.Write(buf)
				seq++
				fl.Flush()
			}
			for _, blk := range tail[name] {
				_, _ = io.WriteString(w, strings.Replace(blk, "SEQ", strconv.Itoa(seq), 1)+"\n\n")
				seq++
			}
		}))
		proxied := startDefaultProxyB(b, up.URL) + g.path
		c := benchClientE2E()
		for _, n := range []int{200, 2000} {
			b.Run(name+"/"+strconv.Itoa(n)+"deltas", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					resp := postStream(b, c, proxied+"?n="+strconv.Itoa(n), g.body)
					got, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if got < int64(n*len(delta[name])) {
						b.Fatalf("%d bytes for %d deltas", got, n)
					}
				}
			})
		}
		up.Close()
	}
}
