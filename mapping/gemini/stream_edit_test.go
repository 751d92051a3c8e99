package gemini_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/mappingtest"
)

// TestStreamEdit: for every verdict pattern and chunking, the client assembles from the
// edited stream what the held path would have sent.
func TestStreamEdit(t *testing.T) {
	stream := sse(streamChunks...)
	for _, tc := range []struct {
		desc   string
		script mappingtest.Script
	}{
		{"allow all", mappingtest.Script{}},
		{"deny first of a parallel pair", mappingtest.Script{0: {Remove: true, Note: "Tool call run was blocked"}}},
		{"deny second, rewrite third", mappingtest.Script{1: {Remove: true, Note: "no"}, 2: {Input: json.RawMessage(`{"dir":"/tmp"}`)}}},
		{"deny all", mappingtest.Script{0: {Remove: true, Note: "a"}, 1: {Remove: true, Note: "b"}, 2: {Remove: true, Note: "c"}}},
		{"flow stop at first", mappingtest.Script{0: {Remove: true, Stop: true, Note: "stop"}}},
	} {
		for _, chunk := range []int{0, 1, 13} {
			if why := equivalent(t, stream, chunk, tc.script); why != "" {
				t.Fatalf("%s, chunk %d:\n%s", tc.desc, chunk, why)
			}
		}
	}
}

// TestStreamEditFlows: text reaches the client before any call is decided, a denied call
// never does, and a flow stop removes the later calls unasked.
func TestStreamEditFlows(t *testing.T) {
	stream := sse(streamChunks...)
	var sent strings.Builder
	d := &mappingtest.Decider{Script: mappingtest.Script{0: {Remove: true, Note: "blocked run"}}}
	ed := sseTr.NewStreamEditor(&sent, d)
	d.OnDecide = func(c mapping.StreamCall) {
		if c.Index == 0 && !strings.Contains(sent.String(), "check.") {
			t.Errorf("the text was not sent before the first call was decided:\n%s", sent.String())
		}
	}
	if _, err := ed.Write(stream); err != nil {
		t.Fatal(err)
	}
	if err := ed.Close(); err != nil {
		t.Fatal(err)
	}
	out := sent.String()
	if strings.Contains(out, "rm -rf") || !strings.Contains(out, `"path":"a"`) || !strings.Contains(out, "blocked run") {
		t.Fatalf("edited stream:\n%s", out)
	}
	if len(d.Decided) != 3 {
		t.Fatalf("decided %d calls", len(d.Decided))
	}
	// The unchanged chunks are relayed byte for byte.
	for _, c := range streamChunks[:3] {
		if !strings.Contains(out, "data: "+c+"\r\n\r\n") {
			t.Fatalf("chunk not relayed as it was: %s", c)
		}
	}

	stop := &mappingtest.Decider{Script: mappingtest.Script{0: {Remove: true, Stop: true, Note: "stop"}}}
	got, err := mappingtest.Edit(sseTr, stream, 5, stop)
	if err != nil {
		t.Fatal(err)
	}
	if len(stop.Decided) != 1 || len(stop.Skips) != 2 || strings.Contains(string(got), "functionCall") {
		t.Fatalf("flow stop: decided %d skipped %d\n%s", len(stop.Decided), len(stop.Skips), got)
	}

	// A decider error ends the editing: nothing after the call goes out.
	boom := errors.New("backend gone")
	failing := &mappingtest.Decider{Err: boom, ErrAt: 0}
	got, err = mappingtest.Edit(sseTr, stream, 0, failing)
	if !errors.Is(err, boom) || strings.Contains(string(got), "functionCall") || strings.Contains(string(got), "STOP") {
		t.Fatalf("err = %v\n%s", err, got)
	}
}

// TestStreamEditHostedCalls: code Gemini ran while streaming is reported after the stream
// (it ran before the answer existed: observed, never prevented), as the held path's
// decoder reports it.
func TestStreamEditHostedCalls(t *testing.T) {
	stream := sse(
		`{"candidates":[{"content":{"parts":[{"executableCode":{"language":"PYTHON","code":"print(6*7)"}}],"role":"model"},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"42\n"}}],"role":"model"},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"It is 42."}],"role":"model"},"finishReason":"STOP","index":0}]}`,
	)
	var out strings.Builder
	ed := sseTr.NewStreamEditor(&out, &mappingtest.Decider{})
	if _, err := ed.Write(stream); err != nil {
		t.Fatal(err)
	}
	if err := ed.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != string(stream) {
		t.Fatalf("a stream without calls was not relayed byte for byte:\n%s", out.String())
	}
	got := ed.(mapping.HostedCallReporter).HostedCalls()
	body, err := mappingtest.Assembled(sseTr, stream)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := sseTr.DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "code_execution" || !strings.Contains(string(got[0].Input), "print(6*7)") || !strings.Contains(got[0].Result, `42\n`) || got[0].IsError {
		t.Fatalf("hosted calls = %+v", got)
	}
	if len(resp.HostedCalls) != 1 || resp.HostedCalls[0].Result != got[0].Result {
		t.Fatalf("the held path reports %+v", resp.HostedCalls)
	}
}

// TestStreamedCallDecodedOnce: a streamed tool call passes through one decode of the call.
func TestStreamedCallDecodedOnce(t *testing.T) {
	mappingtest.DecodedOnce(t, tr, sse(streamChunks...))
}
