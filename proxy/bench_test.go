package proxy

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkChat compares a client talking to the upstream directly with the same client
// talking through hookproxy: for a 1 KiB and a 32 KiB chat request, with a JSON answer and
// with a 20-chunk SSE stream, (a) with no subscription (fast path) and (b) with one
// in-process interceptor on model.request.before that requests no change. Client,
// proxy and upstream share the process, so B/op and allocs/op count all three.
func BenchmarkChat(b *testing.B) {
	jsonAnswer := chatText
	var stream strings.Builder
	for i := 0; i < 19; i++ {
		stream.WriteString(`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"token` + strconv.Itoa(i) + ` "},"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString(`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sse := stream.String()

	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body[:min(len(body), 64)]), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, sse)
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, jsonAnswer)
	})
	// The recording upstream would keep every body: record nothing while benchmarking.
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		up.respond(w, r, body)
	})

	cfg := testConfig(up.URL)
	fast := startProxy(b, cfg, nil, Options{})
	hooked := startProxy(b, cfg, newTestChain(b, &fakePolicy{}, intercept("model.request.before")), Options{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

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
