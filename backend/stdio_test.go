package backend_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/ahp"
)

// TestStdioFraming feeds one line of each kind and expects exactly one response line per
// request, none for notifications and blank lines, and nothing else on stdout.
func TestStdioFraming(t *testing.T) {
	srv := newDefaultServer(t, backend.WithMaxFrameBytes(4096))
	compact := func(s string) string {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(s)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	observe := `{"jsonrpc":"2.0","method":"hooks/observe","params":{"protocolVersion":"draft","event":{"id":"evt_o1","source":"urn:example:h","type":"turn.end","time":"2026-09-15T12:00:00Z","turn":{"id":"t1"},"outcome":"completed","continuationCount":0,"items":[]}}}`
	input := strings.Join([]string{
		compact(handWritten),
		"",
		"this is not JSON",
		observe,
		`{"jsonrpc":"2.0","id":"big","method":"hooks/intercept","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`,
		`{"jsonrpc":"2.0","id":"c","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`,
		// The last line has no newline: end of input still delivers it.
		`{"jsonrpc":"2.0","id":"v","method":"hooks/intercept","params":{"protocolVersion":"0.1"}}`,
	}, "\n")

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.ServeStdio(ctx, strings.NewReader(input), &out); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		t.Fatalf("output must end with a newline: %q", out.String())
	}
	got := map[string]int{} // id -> code (0 = result)
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if err := ahp.ValidateStdioFrame(line); err != nil {
			t.Errorf("stdout line is not one AHP frame: %v\n%s", err, line)
		}
		r := decodeReply(t, line)
		code := 0
		if r.Error != nil {
			code = r.Error.Code
		}
		key := string(r.ID)
		if key == "null" {
			key = "null/" + string(rune('0'+len(got)))
		}
		if _, dup := got[key]; dup {
			t.Errorf("two replies for id %s", key)
		}
		got[key] = code
		if string(r.ID) == `"evt_hand_1"` && strings.Contains(string(line), awsKeyID) {
			t.Errorf("the secret is in the reply: %s", line)
		}
	}
	want := map[string]int{`"evt_hand_1"`: 0, `"c"`: ahp.CodeMethodNotFound, `"v"`: ahp.CodeUnsupportedProtocolVersion}
	nulls := map[int]int{}
	for k, code := range got {
		if strings.HasPrefix(k, "null/") {
			nulls[code]++
			continue
		}
		if w, ok := want[k]; !ok || w != code {
			t.Errorf("reply for %s has code %d, want %d (present %v)", k, code, w, ok)
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("no reply for %v", want)
	}
	// The malformed line and the oversized one are answered with id null.
	if nulls[ahp.CodeParseError] != 1 || nulls[ahp.CodeInvalidRequest] != 1 || len(got) != 5 {
		t.Errorf("replies %v: want -32700 and -32600 with id null, and 5 lines in all", got)
	}
}

// TestStdioStopsOnCancel returns when ctx ends even though stdin stays open.
func TestStdioStopsOnCancel(t *testing.T) {
	srv := newDefaultServer(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(ctx, pr, &out) }()
	if _, err := pw.Write(append([]byte(`{"jsonrpc":"2.0","id":"c","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`), '\n')); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return after cancellation")
	}
}

// TestStdioWriteErrorStops stops serving when stdout is gone.
func TestStdioWriteErrorStops(t *testing.T) {
	srv := newDefaultServer(t)
	in := strings.NewReader(`{"jsonrpc":"2.0","id":"c","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}` + "\n")
	err := srv.ServeStdio(context.Background(), in, failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "writing a response") {
		t.Fatalf("ServeStdio = %v, want the write error", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
