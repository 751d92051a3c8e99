package responses

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// assemble feeds stream to a fresh assembler in pieces of the given sizes (cycled).
func assemble(t testing.TB, stream []byte, sizes ...int) ([]byte, error) {
	t.Helper()
	a := New().NewAssembler()
	for i := 0; len(stream) > 0; i++ {
		n := len(stream)
		if len(sizes) > 0 {
			n = min(sizes[i%len(sizes)], len(stream))
		}
		if w, err := a.Write(stream[:n]); w != n || err != nil {
			t.Fatalf("Write = %d, %v", w, err)
		}
		stream = stream[n:]
	}
	return a.Body()
}

func TestAssembler(t *testing.T) {
	want := mustDecodeResponse(t, toolResponse)
	tests := []struct {
		desc  string
		sizes []int
	}{
		{desc: "whole stream"},
		{desc: "one byte at a time", sizes: []int{1}},
		{desc: "odd splits", sizes: []int{7, 13, 2, 31}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := assemble(t, []byte(toolStream), tc.sizes...)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, body, []byte(toolResponse)) {
				t.Errorf("assembled:\n%s\nwant:\n%s", body, compact(t, toolResponse))
			}
			got := mustDecodeResponse(t, string(body))
			if !reflect.DeepEqual(got.Items, want.Items) || !reflect.DeepEqual(got.Usage, want.Usage) || got.FinishReason != want.FinishReason {
				t.Errorf("canonical view differs from the non-streamed response")
			}
		})
	}
	t.Run("every single cut", func(t *testing.T) {
		s := []byte(toolStream)
		for cut := 1; cut < len(s); cut += 3 {
			body, err := assemble(t, s, cut, len(s))
			if err != nil || !jsonEqual(t, body, []byte(toolResponse)) {
				t.Fatalf("cut %d: %v %s", cut, err, body)
			}
		}
	})
}

// withoutTerminalOutput is toolStream whose response.completed carries no output, as some
// compatible servers send it: the output is rebuilt from the item events.
func withoutTerminalOutput(t testing.TB, keepDone bool) string {
	t.Helper()
	var out []string
	for _, ev := range strings.SplitAfter(strings.ReplaceAll(toolStream, "\r\n", "\n"), "\n\n") {
		switch {
		case strings.Contains(ev, `"type":"response.completed"`):
			data := ev[strings.Index(ev, "data: ")+6 : len(ev)-2]
			d, err := sjson.Delete(data, "response.output")
			if err != nil {
				t.Fatal(err)
			}
			ev = "event: response.completed\ndata: " + d + "\n\n"
		case !keepDone && (strings.Contains(ev, `"type":"response.output_item.done"`) ||
			strings.Contains(ev, `"type":"response.content_part.done"`) || strings.Contains(ev, `"type":"response.reasoning_summary_part.done"`)):
			continue
		}
		out = append(out, ev)
	}
	return strings.Join(out, "")
}

func TestAssemblerRebuildsOutput(t *testing.T) {
	wantOutput := gjson.Get(toolResponse, "output").Raw
	t.Run("from done items", func(t *testing.T) {
		body, err := assemble(t, []byte(withoutTerminalOutput(t, true)), 5)
		if err != nil || !jsonEqual(t, []byte(gjson.GetBytes(body, "output").Raw), []byte(wantOutput)) {
			t.Fatalf("err %v output %s", err, gjson.GetBytes(body, "output").Raw)
		}
	})
	t.Run("from deltas", func(t *testing.T) {
		body, err := assemble(t, []byte(withoutTerminalOutput(t, false)), 5)
		if err != nil {
			t.Fatal(err)
		}
		got := mustDecodeResponse(t, string(body))
		want := mustDecodeResponse(t, toolResponse)
		// Without the done items the encrypted reasoning is unknown; everything else is there.
		wantParts := append(want.Items[0].Parts[:1:1], want.Items[0].Parts[2:]...)
		if !reflect.DeepEqual(summarize(got.Items[0].Parts), summarize(wantParts)) {
			t.Errorf("parts:\n got %+v\nwant %+v", summarize(got.Items[0].Parts), summarize(wantParts))
		}
		if s := gjson.GetBytes(body, "output.4.status").String(); s != "completed" {
			t.Errorf("a call finished by the stream is completed, got %q", s)
		}
	})
}

func TestAssemblerErrors(t *testing.T) {
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
	tests := []struct {
		desc, stream string
		upstream     *mapping.UpstreamError // nil: a plain error
	}{
		{desc: "error event", stream: created + "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\",\"param\":null,\"sequence_number\":1}\n\n",
			upstream: &mapping.UpstreamError{Type: "rate_limit_exceeded", Message: "slow down"}},
		{desc: "nested error event", stream: "data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n",
			upstream: &mapping.UpstreamError{Type: "invalid_request_error", Message: "bad"}},
		{desc: "error event not JSON", stream: "event: error\ndata: overloaded\n\n",
			upstream: &mapping.UpstreamError{Type: "error", Message: "overloaded"}},
		{desc: "response.failed", stream: created + "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"},\"output\":[]}}\n\n",
			upstream: &mapping.UpstreamError{Type: "server_error", Message: "boom"}},
		{desc: "truncated", stream: toolStream[:len(toolStream)/2]},
		{desc: "empty", stream: ""},
		{desc: "not JSON", stream: created + "data: {nope\n\n"},
		{desc: "index out of range", stream: created + "data: {\"type\":\"response.output_item.added\",\"output_index\":99999,\"item\":{}}\n\n"},
		{desc: "negative index", stream: created + "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":-1,\"delta\":\"x\"}\n\n"},
		{desc: "fractional index", stream: created + "data: {\"type\":\"response.output_item.added\",\"output_index\":0.5,\"item\":{}}\n\n"},
		{desc: "terminal without output nor items", stream: created + "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n" +
			"data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"late\"}\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body, err := assemble(t, []byte(tc.stream), 3)
			var ue *mapping.UpstreamError
			switch {
			case tc.upstream != nil:
				if !errors.As(err, &ue) || *ue != *tc.upstream {
					t.Errorf("err = %v (body %s), want %+v", err, body, tc.upstream)
				}
			case tc.desc == "terminal without output nor items":
				// A completed response with no items is an empty output; events after the
				// terminal event do not belong to it.
				if err != nil || gjson.GetBytes(body, "output").Raw != "[]" {
					t.Errorf("err %v body %s", err, body)
				}
			default:
				if err == nil || errors.As(err, &ue) {
					t.Errorf("err = %v, want a plain error", err)
				}
			}
		})
	}
}

func TestWriteStream(t *testing.T) {
	var buf bytes.Buffer
	if err := New().WriteStream(&buf, []byte(toolResponse)); err != nil {
		t.Fatal(err)
	}
	stream := buf.String()
	// Every event names its type, carries it in its data and numbers itself in order.
	var types []string
	for i, ev := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		lines := strings.Split(ev, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("event %d is not one event line and one data line: %q", i, ev)
		}
		data := gjson.Parse(lines[1][6:])
		typ := strings.TrimPrefix(lines[0], "event: ")
		if data.Get("type").String() != typ || data.Get("sequence_number").Int() != int64(i) || data.Get("error").Exists() {
			t.Errorf("event %d: %s", i, lines[1])
		}
		types = append(types, typ)
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("event types:\n got %q\nwant %q", types, want)
	}
	// The stream assembles back to the same response.
	body, err := assemble(t, buf.Bytes(), 1)
	if err != nil || string(body) != compact(t, toolResponse) {
		t.Errorf("round trip: %v\n%s", err, body)
	}
	// Rebuilt from the item events alone, it is the same output too.
	noOutput := strings.Replace(stream, `"type":"response.completed","response":{`, `"type":"response.completed","response":{"output":null,`, 1)
	noOutput = strings.Replace(noOutput, `"output":[{`, `"x":[{`, 1) // the terminal response's own output
	if body, err := assemble(t, []byte(noOutput)); err != nil ||
		!jsonEqual(t, []byte(gjson.GetBytes(body, "output").Raw), []byte(gjson.Get(toolResponse, "output").Raw)) {
		t.Errorf("rebuilt: %v %s", err, gjson.GetBytes(body, "output").Raw)
	}
}

func TestWriteStreamShapes(t *testing.T) {
	long := strings.Repeat("é", 5000) // 10000 bytes: three deltas, cut at rune boundaries
	tests := []struct {
		desc, body string
		terminal   string
		want       string // the assembled body, when not the body itself
	}{
		{"refusal", `{"id":"r","object":"response","status":"completed","output":[{"id":"m","type":"message","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"I can't."}]}]}`, "response.completed", ""},
		{"incomplete", `{"id":"r","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"id":"m","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"` + long + `","annotations":[]}]}]}`, "response.incomplete", ""},
		{"reasoning content", `{"id":"r","object":"response","status":"completed","output":[{"id":"rs","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]}]}`, "response.completed", ""},
		{"no output", `{"id":"r","object":"response","status":"completed"}`, "response.completed",
			`{"id":"r","object":"response","status":"completed","output":[]}`},
		{"pretty printed", "{\n  \"id\": \"r\",\n  \"status\": \"completed\",\n  \"output\": [ ]\n}", "response.completed", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var buf bytes.Buffer
			if err := New().WriteStream(&buf, []byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "event: "+tc.terminal+"\n") {
				t.Errorf("no %s event:\n%s", tc.terminal, buf.String())
			}
			want := tc.want
			if want == "" {
				want = compact(t, tc.body)
			}
			body, err := assemble(t, buf.Bytes(), 2)
			if err != nil || string(body) != want {
				t.Errorf("round trip: %v\n%s", err, body)
			}
		})
	}
	t.Run("deltas cut at rune boundaries", func(t *testing.T) {
		var buf bytes.Buffer
		body := `{"id":"r","status":"completed","output":[{"id":"m","type":"message","role":"assistant","content":[{"type":"output_text","text":"` + long + `"}]}]}`
		if err := New().WriteStream(&buf, []byte(body)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, "data: ") && gjson.Get(line[6:], "type").String() == "response.output_text.delta" {
				n++
				if d := gjson.Get(line[6:], "delta").String(); len(d) > streamPiece || strings.ContainsRune(d, '\uFFFD') {
					t.Errorf("delta of %d bytes", len(d))
				}
			}
		}
		if n != 3 {
			t.Errorf("%d deltas, want 3", n)
		}
	})
	for _, bad := range []string{`nope`, `[]`, `{"output":{}}`} {
		if err := New().WriteStream(&bytes.Buffer{}, []byte(bad)); !errors.Is(err, mapping.ErrMalformed) {
			t.Errorf("WriteStream(%s) = %v, want ErrMalformed", bad, err)
		}
	}
}
