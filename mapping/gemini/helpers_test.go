package gemini_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/gemini"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

var (
	tr       = gemini.For(gemini.Endpoint{Version: "v1beta", Model: "gemini-2.5-flash", Method: gemini.MethodGenerate})
	sseTr    = gemini.For(gemini.Endpoint{Version: "v1beta", Model: "gemini-2.5-flash", Method: gemini.MethodStreamGenerate, SSE: true})
	arrayTr  = gemini.For(gemini.Endpoint{Version: "v1beta", Model: "gemini-2.5-flash", Method: gemini.MethodStreamGenerate})
	countsTr = gemini.For(gemini.Endpoint{Version: "v1beta", Model: "gemini-2.5-flash", Method: gemini.MethodCountTokens})
)

// conversation has every request-side part kind that matters for editing: a system
// instruction, a thought with a signature, parallel calls without ids, their responses
// followed by a prompt in one user content, an image, and unknown fields at every level.
const conversation = `{"systemInstruction":{"parts":[{"text":"You are terse."}]},` +
	`"contents":[` +
	`{"role":"user","parts":[{"text":"list files"},{"inlineData":{"mimeType":"image/png","data":"aGVsbG8="}}]},` +
	`{"role":"model","parts":[{"text":"plan: ls","thought":true},{"text":"Running."},` +
	`{"functionCall":{"name":"run","args":{"cmd":"ls"}},"thoughtSignature":"SIG=="},` +
	`{"functionCall":{"name":"read","args":{"path":"a.txt"}}}]},` +
	`{"role":"user","parts":[{"functionResponse":{"name":"run","response":{"output":"a.txt\nb.txt"}}},` +
	`{"functionResponse":{"name":"read","response":{"output":"secret sk-live-1234"}}},` +
	`{"text":"now summarize","x_part":1}]}],` +
	`"tools":[{"functionDeclarations":[{"name":"run"},{"name":"read"}]}],"generationConfig":{"temperature":0}}`

func decode(t testing.TB, body string) *mapping.Request {
	t.Helper()
	req, err := tr.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return req
}

// clone deep-copies canonical items so a test can edit them.
func clone(items []ahp.Message) []ahp.Message {
	b, err := json.Marshal(items)
	if err != nil {
		panic(err)
	}
	var out []ahp.Message
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// jsonEqual fails unless a and b are the same JSON value.
func jsonEqual(t testing.TB, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

// view is what an agent acts on in a Gemini answer: the text of each category (joined, as
// clients concatenate the text of a stream), the calls with their arguments, and the
// finish reason.
func view(t testing.TB, body []byte) string {
	t.Helper()
	resp, err := sseTr.DecodeResponse(body)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "finish=%s\n", resp.FinishReason)
	for _, m := range resp.Items {
		cat, text := "", ""
		flush := func() {
			if text != "" {
				fmt.Fprintf(&b, "  %s %q\n", cat, text)
			}
			text = ""
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			if c, ok := mapping.ParseToolCall(p); ok {
				flush()
				var in any
				_ = json.Unmarshal(c.Input, &in)
				ib, _ := json.Marshal(in)
				fmt.Fprintf(&b, "  call %s %s %s\n", c.ID, c.Name, ib)
				continue
			}
			if p.Category != cat {
				flush()
				cat = p.Category
			}
			text += p.TextOf()
		}
		flush()
	}
	return b.String()
}

// equivalent compares what a client assembles from the edited stream with the held path's
// answer for the same verdicts.
func equivalent(t testing.TB, stream []byte, chunk int, script mappingtest.Script) string {
	t.Helper()
	held, err := mappingtest.Held(sseTr, stream, script)
	if err != nil {
		t.Fatalf("held path: %v", err)
	}
	edited, err := mappingtest.Edit(sseTr, stream, chunk, &mappingtest.Decider{Script: script})
	if err != nil {
		t.Fatalf("edit: %v", err)
	}
	body, err := mappingtest.Assembled(sseTr, edited)
	if err != nil {
		t.Fatalf("the edited stream does not assemble: %v\n%s", err, edited)
	}
	if got, want := view(t, body), view(t, held); got != want {
		return fmt.Sprintf("edited stream:\n%s\nheld path:\n%s\nstream sent:\n%s", got, want, edited)
	}
	return ""
}

// sse renders chunks as a Gemini SSE stream.
func sse(chunks ...string) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		b.WriteString("data: " + c + "\r\n\r\n")
	}
	return b.Bytes()
}

// streamChunks is a streamed answer: thinking, text in pieces, two parallel calls in one
// chunk, a third call alone, then the finish with usage.
var streamChunks = []string{
	`{"candidates":[{"content":{"parts":[{"text":"thinking...","thought":true}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":"Let me "}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":"check."}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"run","args":{"cmd":"rm -rf /"}},"thoughtSignature":"S1"},{"functionCall":{"name":"read","args":{"path":"a"}}}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"list","args":{}}}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":3,"totalTokenCount":18},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
}
