package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// FuzzUpstreamChatJudged feeds the proxy chat completions answers, JSON and streamed, with
// duplicate keys, events after [DONE] and arguments that are not JSON, and checks what the
// client receives the way an SDK reads it (encoding/json: the last duplicate wins): every
// tool call the client can run was judged at tool.before with exactly that name and input
// and was not denied (the policy denies any input mentioning "rm"), and nothing follows
// the stream's [DONE].
func FuzzUpstreamChatJudged(f *testing.F) {
	call := func(args string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
			`{"id":"call_1","type":"function","function":{"name":"Bash","arguments":` + args + `}}]},"finish_reason":"tool_calls"}]}`
	}
	chunk := func(delta string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	for _, s := range []string{
		call(`"{\"command\":\"ls\"}"`),
		call(`"{\"command\":\"ls\"}","arguments":"{\"command\":\"rm -rf /\"}"`),
		call(`"{\"command\":\"ls\"}"},"function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"`),
		call(`"not json rm"`),
		strings.Replace(call(`"{\"command\":\"ls\"}"`), `"name":"Bash"`, `"name":"Bash","name":"Rm"`, 1),
	} {
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":"}}]}`) +
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`) + "data: [DONE]\n\n",
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}","arguments":"{\"command\":\"rm -rf /\"}"}}]}`) + "data: [DONE]\n\n",
		chunk(`{"content":"hi"}`) + "data: [DONE]\n\n" +
			chunk(`{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"rm -rf /\"}"}}]}`),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Bash","arguments":"rm -rf"}}]}`) + "data: [DONE]\n\n",
	} {
		f.Add([]byte(s), true)
	}

	var mu sync.Mutex
	var answer []byte
	var streamed bool
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		body, sse := answer, streamed
		mu.Unlock()
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		if ev.Tool != nil && strings.Contains(string(ev.Tool.Input), "rm") {
			return []ahp.Effect{{Type: ahp.EffectDeny, Reason: "no rm"}}
		}
		return nil
	}}
	s, err := New(testConfig("http://127.0.0.1:9"), newTestChain(f, pol, intercept(ahp.EventToolBefore)), Options{Transport: rt})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })

	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		mu.Lock()
		answer, streamed = body, stream
		mu.Unlock()
		before := len(pol.callsOf(ahp.EventToolBefore))
		req := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
		if stream {
			req = chatStreamReq
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, chatPath, strings.NewReader(req)))
		judged := map[string]bool{} // name + "\x00" + input of the calls judged and not denied
		for _, p := range pol.callsOf(ahp.EventToolBefore)[before:] {
			if !strings.Contains(string(p.Event.Tool.Input), "rm") {
				judged[p.Event.Tool.Name+"\x00"+canonJSON(string(p.Event.Tool.Input))] = true
			}
		}
		if rec.Code != 200 {
			return // refused or failed: nothing runs
		}
		if foldedKey(rec.Body.Bytes()) {
			// encoding/json matches keys case-insensitively ("Tool_calls"); the SDKs agents
			// use (openai-go reads with gjson, the JS, Python and Rust ones) match exactly,
			// as the proxy does. docs/limitations.md says so.
			return
		}
		var calls [][2]string
		if stream {
			calls = clientStreamCalls(t, rec.Body.Bytes())
		} else {
			calls = clientJSONCalls(rec.Body.Bytes())
		}
		for _, c := range calls {
			if !judged[c[0]+"\x00"+canonJSON(inputAsJudged(c[1]))] {
				t.Fatalf("the client got call %s(%s), which was not judged as such (judged: %v)\nupstream: %q\nclient: %q", c[0], c[1], judged, body, rec.Body.Bytes())
			}
		}
	})
}

// foldedKey reports whether body (JSON, or the data of SSE events) has an object key that
// only case-folds to a member name the client structs read.
func foldedKey(body []byte) bool {
	names := []string{"choices", "message", "delta", "tool_calls", "function", "name", "arguments", "index"}
	var walk func(v gjson.Result) bool
	walk = func(v gjson.Result) bool {
		if !v.IsObject() && !v.IsArray() {
			return false // ForEach on a scalar visits the scalar itself
		}
		found := false
		v.ForEach(func(k, e gjson.Result) bool {
			for _, n := range names {
				if k.Type == gjson.String && k.Str != n && strings.EqualFold(k.Str, n) {
					found = true
					return false
				}
			}
			found = walk(e)
			return !found
		})
		return found
	}
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			line = d
		}
		if walk(gjson.Parse(line)) {
			return true
		}
	}
	return false
}

// canonJSON is s decoded and encoded again by encoding/json, numbers kept as written (so
// escapes and key order do not matter when two inputs are compared by value), or s itself
// when it is not JSON.
func canonJSON(s string) string {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// inputAsJudged is the tool input a call's arguments text is judged as: the object when
// it is one, otherwise the raw text under mapping.RawArgumentsKey.
func inputAsJudged(args string) string {
	var obj map[string]any
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return compactInput(json.RawMessage(args))
	}
	raw, _ := json.Marshal(map[string]string{mapping.RawArgumentsKey: args})
	return string(raw)
}

type chatToolCall struct {
	Index    int `json:"index"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// clientJSONCalls reads the tool calls of a chat completion as encoding/json does.
func clientJSONCalls(body []byte) [][2]string {
	var resp struct {
		Choices []struct {
			Message struct {
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &resp) != nil {
		return nil // not a completion an SDK would accept
	}
	var out [][2]string
	for _, ch := range resp.Choices {
		for _, c := range ch.Message.ToolCalls {
			out = append(out, [2]string{c.Function.Name, c.Function.Arguments})
		}
	}
	return out
}

// clientStreamCalls accumulates a chat stream's tool calls per choice and index as an
// SDK accumulator does, and fails on any event after [DONE].
func clientStreamCalls(t *testing.T, body []byte) [][2]string {
	type acc struct{ name, args string }
	calls := map[[2]int]*acc{}
	var order [][2]int
	done := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		line = strings.TrimSpace(line)
		if done {
			t.Fatalf("the client got an event after [DONE]: %q\nclient: %q", line, body)
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					ToolCalls []chatToolCall `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		for _, ch := range ev.Choices {
			for _, c := range ch.Delta.ToolCalls {
				k := [2]int{ch.Index, c.Index}
				a := calls[k]
				if a == nil {
					a = &acc{}
					calls[k] = a
					order = append(order, k)
				}
				a.name += c.Function.Name
				a.args += c.Function.Arguments
			}
		}
	}
	var out [][2]string
	for _, k := range order {
		out = append(out, [2]string{calls[k].name, calls[k].args})
	}
	return out
}
