package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// The fuzz targets run in CI for a few seconds each (.ci/fuzz-targets); their committed seed
// corpus is the f.Add seeds plus testdata/fuzz/<FuzzName>/.

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		fullRequest,
		`{"messages":[]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"user":"u"}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"r"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"file","file":{"file_data":"aGk=","filename":"a.md"}}]}]}`,
		`{"messages":[{"role":"assistant","function_call":{"name":"f","arguments":"x"}},{"role":"function","name":"f","content":"y"}]}`,
		`{"messages":[{"role":"user","content":"a","content":"b"}]}`,
	} {
		f.Add([]byte(s))
	}
	c := NewChat()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := c.DecodeRequest(body)
		if err != nil {
			var br *mapping.BadRequest
			if !errors.As(err, &br) || br.Reason == "" {
				t.Fatalf("error is not a *mapping.BadRequest with a reason: %v", err)
			}
			return
		}
		if len(req.ToolResults) > len(req.Items) || req.PromptStart >= len(req.Items) {
			t.Fatalf("inconsistent request: %d items, %d results, prompt start %d", len(req.Items), len(req.ToolResults), req.PromptStart)
		}
		checkSchema(t, req.Items)
		// Every part's origin points at that part in the translator's private copy (the
		// decoder recorded the right place), and the copy equals what the caller got. Tool
		// calls have call origins instead.
		st := req.Native.(*chatRequest)
		for i := range req.Items {
			for j := range req.Items[i].Parts {
				np := st.part(req.Items[i].Parts[j].ID)
				if np == nil && st.call(req.Items[i].Parts[j].ID) != nil {
					continue
				}
				if np == nil || np.canon != &st.items[i].Parts[j] || !oaiwire.PartsEqual(np.canon, &req.Items[i].Parts[j]) {
					t.Fatalf("part %s: origin does not point at its private copy", req.Items[i].Parts[j].ID)
				}
			}
		}
		out, err := c.EncodeRequest(req, cloneItems(req.Items))
		if err != nil || string(out) != string(body) {
			t.Fatalf("unchanged items: err %v, same bytes %v", err, string(out) == string(body))
		}
		// In every message, an edit of the first text part and of every function call's
		// input renders, decodes again, and is what the model sees at that position.
		const edit = "fuzz <&> \u2028 edit"
		for i := range req.Items {
			for j := range req.Items[i].Parts {
				items := cloneItems(req.Items)
				p := &items[i].Parts[j]
				want := edit
				switch {
				case p.Kind != ahp.KindText || p.Text == nil:
					continue
				case p.Category == ahp.CategoryToolCall:
					nc := st.call(p.ID)
					if nc == nil || nc.kind == callCustom {
						continue
					}
					call, _ := mapping.ParseToolCall(p)
					call.Input = json.RawMessage(`{"fuzz":"<&>"}`)
					*p = mapping.ToolCallPart(p.ID, call)
					want = `"input":{"fuzz":"<&>"}`
				default:
					s := edit
					p.Text = &s
				}
				out, err := c.EncodeRequest(req, items)
				if err != nil {
					t.Fatalf("edit of %s: %v", p.ID, err)
				}
				again, err := c.DecodeRequest(out)
				if err != nil {
					t.Fatalf("edited body does not decode: %v\n%s", err, out)
				}
				found := false
				for _, q := range again.Items[i].Parts {
					found = found || strings.Contains(normalizeJSON(q.TextOf()), want)
				}
				if !found {
					t.Fatalf("edit of %s lost: %s", p.ID, out)
				}
				if p.Category != ahp.CategoryToolCall {
					break // one text edit per message
				}
			}
		}
		if len(req.Items) > 0 {
			out, err := c.EncodeRequest(req, req.Items[:len(req.Items)-1])
			if err != nil {
				t.Fatalf("removing the last message: %v", err)
			}
			if _, err := c.DecodeRequest(out); err != nil {
				t.Fatalf("shortened body does not decode: %v\n%s", err, out)
			}
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		toolResponse,
		toolStreamBody,
		`{"id":"r","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
		`{"id":"r","choices":[{"message":{"content":[{"type":"text","text":"a"}],"audio":{"id":"a","data":"AAAA","transcript":"t"}}},{"message":{"function_call":{"name":"f","arguments":{"x":1}}}}]}`,
		`{"error":{"message":"m","type":"t"}}`,
	} {
		f.Add([]byte(s))
	}
	c := NewChat()
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := c.DecodeResponse(body)
		mappingtest.CheckScreen(t, c, body, resp, err)
		if err != nil {
			var ue *mapping.UpstreamError
			if !errors.Is(err, mapping.ErrMalformed) && !errors.As(err, &ue) {
				t.Fatalf("error is neither ErrMalformed nor *mapping.UpstreamError: %v", err)
			}
			return
		}
		checkSchema(t, resp.Items)
		out, err := c.EncodeResponse(resp, cloneItems(resp.Items), resp.FinishReason)
		if err != nil || string(out) != string(body) {
			t.Fatalf("unchanged items: err %v, same bytes %v", err, string(out) == string(body))
		}
		// Removing every tool call (a flow stop) leaves a valid completion without calls.
		items := cloneItems(resp.Items)
		for i := range items {
			var kept []ahp.Part
			for _, p := range items[i].Parts {
				if p.Category != ahp.CategoryToolCall {
					kept = append(kept, p)
				}
			}
			items[i].Parts = kept
		}
		out, err = c.EncodeResponse(resp, items, c.TerminalFinishReason())
		if err != nil {
			t.Fatalf("flow stop: %v", err)
		}
		stopped, err := c.DecodeResponse(out)
		if err != nil {
			t.Fatalf("stopped body does not decode: %v\n%s", err, out)
		}
		if n := len(mapping.ToolCalls(stopped.Items)); n != 0 || stopped.FinishReason != "stop" {
			t.Fatalf("%d tool calls left, finish %q", n, stopped.FinishReason)
		}
		checkStreamRoundTrip(t, body, resp)
	})
}

// checkStreamRoundTrip re-emits body as SSE, assembles it again, and checks that what an
// agent would act on (text and tool calls, per choice) is unchanged.
func checkStreamRoundTrip(t *testing.T, body []byte, resp *mapping.Response) {
	t.Helper()
	c := NewChat()
	var sb strings.Builder
	if err := c.WriteStream(&sb, body); err != nil {
		t.Fatalf("WriteStream: %v", err)
	}
	a := c.NewAssembler()
	a.Write([]byte(sb.String()))
	again, err := a.Body()
	if err != nil {
		t.Fatalf("re-assemble: %v\n%s", err, sb.String())
	}
	back, err := c.DecodeResponse(again)
	if err != nil {
		t.Fatalf("re-assembled body does not decode: %v\n%s", err, again)
	}
	if len(back.Items) != len(resp.Items) {
		t.Fatalf("%d choices after the round trip, want %d", len(back.Items), len(resp.Items))
	}
	for i := range resp.Items {
		if x, y := agentView(resp.Items[i].Parts), agentView(back.Items[i].Parts); x != y {
			t.Fatalf("choice %d differs after the round trip:\n%s\n%s", i, x, y)
		}
	}
}

// agentView summarizes parts as an agent acts on them: text in order, then each tool call's
// name and input (ids of calls without a native id are derived and may differ). Invalid
// UTF-8 is compared as U+FFFD, one per invalid byte: a re-emitted stream is valid JSON
// text, written as encoding/json writes it, so each byte an upstream sent that is not
// UTF-8 reaches the agent as a replacement character of its own. (strings.ToValidUTF8
// would fold a run of them into one.)
func agentView(ps []ahp.Part) string {
	raw := agentViewRaw(ps)
	var b strings.Builder
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRuneInString(raw[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(raw[i : i+n])
		}
		i += n
	}
	return b.String()
}

func agentViewRaw(ps []ahp.Part) string {
	var b strings.Builder
	for i := range ps {
		if c, ok := mapping.ParseToolCall(&ps[i]); ok {
			// By value: "\ufffd" and a literal U+FFFD are the same input.
			var v any
			in, _ := json.Marshal(c.Input)
			if json.Unmarshal(c.Input, &v) == nil {
				in, _ = json.Marshal(v)
			}
			b.WriteString("|call " + c.Name + " " + string(in))
			continue
		}
		b.WriteString(ps[i].TextOf())
	}
	return b.String()
}

func FuzzAssembler(f *testing.F) {
	f.Add([]byte(toolStream), uint16(7))
	f.Add([]byte("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n"), uint16(1))
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"m\"}}\n\n"), uint16(3))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-1,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"), uint16(0))
	c := NewChat()
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		a := c.NewAssembler()
		k := int(cut) % (len(stream) + 1)
		if n, err := a.Write(stream[:k]); n != k || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if n, err := a.Write(stream[k:]); n != len(stream)-k || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		body, err := a.Body()
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("assembled body is not JSON: %s", body)
		}
		resp, err := c.DecodeResponse(body)
		if err != nil {
			if !errors.Is(err, mapping.ErrMalformed) {
				t.Fatalf("decode: %v", err)
			}
			return
		}
		checkStreamRoundTrip(t, body, resp)
	})
}
