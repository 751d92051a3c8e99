package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldCallUpstream streams a Bash call whose arguments (size bytes) arrive in pieces and
// whose end waits until release is closed, so that the proxy's stream editor holds them.
func heldCallUpstream(t *testing.T, size int, release <-chan struct{}) *fakeUpstream {
	return newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(s string) { _, _ = io.WriteString(w, s); w.(http.Flusher).Flush() }
		chunk := func(delta string) string {
			return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
		}
		send(chunk(`{"role":"assistant","content":"Running it."}`))
		send(chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"Bash","arguments":"{\"command\":\""}}]}`))
		piece := strings.Repeat("a", 16<<10)
		for n := 0; n < size; n += len(piece) {
			send(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"` + piece + `"}}]}`))
		}
		<-release
		send(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}`))
		send(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n")
		send("data: [DONE]\n\n")
	})
}

// TestHeldStreamedCallsCountTowardMaxHeldBytes: the tool calls a stream editor holds count
// in limits.maxHeldBytes like a held body: while one stream holds a 300 KiB call, a second
// one that would take the server past its 512 KiB ends with the in-stream error naming the
// limit, never with the call; once the first is done its bytes are released and the same
// request passes. Control: with room for both, both calls arrive.
func TestHeldStreamedCallsCountTowardMaxHeldBytes(t *testing.T) {
	for _, room := range []bool{false, true} {
		release := make(chan struct{})
		up := heldCallUpstream(t, 300<<10, release)
		unblock := sync.OnceFunc(func() { close(release) })
		cfg := testConfig(up.URL)
		cfg.Limits.MaxResponseBytes = 1 << 20
		cfg.Limits.MaxHeldBytes = 512 << 10
		if room {
			cfg.Limits.MaxHeldBytes = 4 << 20
		}
		s, err := New(cfg, newTestChain(t, &fakePolicy{}, intercept("tool.before")), Options{})
		if err != nil {
			t.Fatal(err)
		}
		px := httptest.NewServer(s)
		t.Cleanup(px.Close)
		// Registered after the servers: cleanups run last-first, so a failing test lets the
		// upstream's held answers end before the servers close.
		t.Cleanup(unblock)
		var wg sync.WaitGroup
		var first []byte
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, first = post(t, px.URL+chatPath, chatStreamReq, nil)
		}()
		// Wait (bounded) until the first stream's call is held.
		for deadline := time.Now().Add(30 * time.Second); s.held.Load() < 300<<10; {
			if time.Now().After(deadline) {
				t.Fatalf("the first stream's call was never held (held %d)", s.held.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		var second []byte
		if room {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, second = post(t, px.URL+chatPath, chatStreamReq, nil)
			}()
			for deadline := time.Now().Add(30 * time.Second); s.held.Load() < 600<<10; {
				if time.Now().After(deadline) {
					t.Fatalf("control: the second stream's call was never held (held %d)", s.held.Load())
				}
				time.Sleep(5 * time.Millisecond)
			}
			unblock()
		} else {
			_, _, second = post(t, px.URL+chatPath, chatStreamReq, nil)
			unblock()
		}
		wg.Wait()
		if !strings.Contains(string(first), `"name":"Bash"`) {
			t.Errorf("room=%v: the first stream lost its call: %.200s", room, lastEvent(string(first)))
		}
		switch last := lastEvent(string(second)); {
		case room && !strings.Contains(string(second), `"name":"Bash"`):
			t.Errorf("control: the second stream lost its call: %.200s", last)
		case !room && (strings.Contains(string(second), `"name":"Bash"`) || !strings.Contains(last, "limits.maxHeldBytes")):
			t.Errorf("the second stream went past limits.maxHeldBytes: %.300s", last)
		}
		// Released: nothing stays counted, and the refused request now passes.
		if !room {
			if _, _, again := post(t, px.URL+chatPath, chatStreamReq, nil); !strings.Contains(string(again), `"name":"Bash"`) {
				t.Errorf("after release the request still fails: %.200s", lastEvent(string(again)))
			}
		}
		px.Close()
		_ = s.Close()
		if n := s.held.Load(); n != 0 {
			t.Errorf("room=%v: %d bytes still counted as held after every stream ended", room, n)
		}
	}
}

// TestStreamedCallOverTheHoldLimitEndsInStream: a tool call streamed in many pieces that
// grows past limits.maxResponseBytes ends the stream with the in-stream error, without
// the call; the text before it has already gone out. Control: the same call under a
// limit that holds it arrives whole.
func TestStreamedCallOverTheHoldLimitEndsInStream(t *testing.T) {
	for _, limit := range []int64{64 << 10, 1 << 20} {
		release := make(chan struct{})
		close(release)
		up := heldCallUpstream(t, 300<<10, release)
		cfg := testConfig(up.URL)
		cfg.Limits.MaxResponseBytes = limit
		px := startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept("tool.before")), Options{})
		status, _, got := post(t, px.URL+chatPath, chatStreamReq, nil)
		s := string(got)
		over := limit < 300<<10
		switch {
		case status != 200 || !strings.Contains(s, "Running it."):
			t.Errorf("limit %d: the text did not stream: %d %.200s", limit, status, s)
		case over && (strings.Contains(s, `"name":"Bash"`) || !strings.Contains(lastEvent(s), "hold limit")):
			t.Errorf("limit %d: a call over the hold limit: %.200s", limit, lastEvent(s))
		case !over && !strings.Contains(s, `"name":"Bash"`):
			t.Errorf("control: limit %d: the call did not arrive: %.200s", limit, lastEvent(s))
		}
	}
}

// TestHeldWholeAnswerCountsAsItArrives: a response held whole (a model.response.after
// interceptor) counts in limits.maxHeldBytes (read through heldReader): an answer that
// would take the server past it is refused 503, one over limits.maxResponseBytes 502, and
// nothing stays counted afterwards. Control: with room, it passes.
func TestHeldWholeAnswerCountsAsItArrives(t *testing.T) {
	answer := strings.Replace(chatText, `"hello"`, `"`+strings.Repeat("x", 200<<10)+`"`, 1)
	for _, tc := range []struct {
		held, response int64
		status         int
	}{{100 << 10, 1 << 20, 503}, {4 << 20, 100 << 10, 502}, {4 << 20, 1 << 20, 200}} {
		up := newUpstream(t, jsonResponder(200, answer))
		cfg := testConfig(up.URL)
		cfg.Limits.MaxHeldBytes, cfg.Limits.MaxResponseBytes = tc.held, tc.response
		s, err := New(cfg, newTestChain(t, &fakePolicy{}, intercept("model.response.after")), Options{})
		if err != nil {
			t.Fatal(err)
		}
		px := httptest.NewServer(s)
		status, _, got := post(t, px.URL+chatPath, strings.Replace(chatStreamReq, `"stream":true,`, "", 1), nil)
		px.Close()
		_ = s.Close()
		if status != tc.status || (status == 200) != strings.Contains(string(got), "xxxx") {
			t.Errorf("held %d, response limit %d: %d %.200s, want %d", tc.held, tc.response, status, got, tc.status)
		}
		if n := s.held.Load(); n != 0 {
			t.Errorf("held %d: %d bytes still counted", tc.held, n)
		}
	}
}

// A request counts in limits.maxHeldBytes by the buffer its body occupies. An Anthropic
// body is read into a pooled buffer of its size class, up to half as large again: 70 KiB
// takes a buffer of about 90 KiB, which a budget of 80 KiB cannot hold. The same body
// through Chat Completions is read into a buffer of exactly its size and fits; with room
// for the buffer, the Anthropic request passes too.
func TestHeldRequestCountsItsBuffer(t *testing.T) {
	text := strings.Repeat("lorem ipsum ", 70<<10/12)
	bodies := map[string]string{
		msgsPath: `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"` + text + `"}]}`,
		chatPath: `{"model":"gpt-4o","messages":[{"role":"user","content":"` + text + `"}]}`,
	}
	for _, tc := range []struct {
		path   string
		budget int64
		want   int
	}{
		{msgsPath, 80 << 10, http.StatusServiceUnavailable},
		{chatPath, 80 << 10, http.StatusOK},
		{msgsPath, 100 << 10, http.StatusOK},
	} {
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "application/json")
			if strings.HasPrefix(r.URL.Path, "/v1/messages") {
				_, _ = io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
				return
			}
			_, _ = io.WriteString(w, chatText)
		})
		cfg := testConfig(up.URL)
		cfg.Limits.MaxHeldBytes = tc.budget
		px := startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept("model.request.before")), Options{})
		resp, err := http.Post(px.URL+tc.path, "application/json", strings.NewReader(bodies[tc.path]))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %d KiB held at most: %d %s, want %d", tc.path, tc.budget>>10, resp.StatusCode, answer, tc.want)
		}
	}
}
