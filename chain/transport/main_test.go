package transport

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

// fakeBackendArg makes the test binary act as a stdio backend. The mode travels in argv,
// not in an environment variable, because backends get a minimal environment (PATH and
// HOME only) and the tests check exactly that.
const fakeBackendArg = "hookproxy-test-fake-backend"

func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == fakeBackendArg {
		// syscall.Exit skips the runtime's exit hooks: a race-enabled binary would
		// otherwise pause a second at exit, which per_event calls would wait for.
		syscall.Exit(runFakeBackend(os.Args[2], os.Args[3:]))
	}
	goleak.VerifyTestMain(m)
}

// runFakeBackend is a tiny AHP stdio backend. Modes:
//
//	echo            answer every request with no effects (pid, request count, notifications seen)
//	crash-after N   answer N requests, then exit 3 on the next one without answering
//	stale-first     before each answer, write frames with other ids and a notification
//	garbage         answer a request whose id contains "bad" with a line that is not JSON
//	sleep-forever   read everything, answer nothing, ignore EOF
//	slow            delay the answer by 300 ms when the id contains "slow"
//	multi-line      answer twice
//	exit-nonzero    answer, then exit 2
//	no-reply        exit 0 on the first request without answering
//	orphan          start a helper that keeps stdout and stderr open, then exit 4
//	unterminated    answer without the trailing newline, then exit 0
//	huge N          answer with a line of N bytes
//	stderr-spam     write ~512 KiB of stderr (some lines very long), then answer
//	env             answer with the sorted names of the environment variables
//	record FILE     append every notification line to FILE (relative to cwd)
func runFakeBackend(mode string, args []string) int {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	requests, notifications := 0, 0
	argN := func() int {
		if len(args) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(args[0])
		return n
	}
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			if mode == "sleep-forever" {
				time.Sleep(time.Hour)
			}
			return 0
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &req) != nil {
			fmt.Fprintln(os.Stderr, "fake backend: unreadable request")
			return 9
		}
		if len(req.ID) == 0 {
			notifications++
			if mode == "record" {
				f, err := os.OpenFile(args[0], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
				if err != nil {
					return 8
				}
				f.Write(line)
				f.Close()
			}
			continue
		}
		requests++
		answer := func(extra map[string]any) {
			ext := map[string]any{"test.pid": os.Getpid(), "test.n": requests, "test.observed": notifications}
			for k, v := range extra {
				ext[k] = v
			}
			b, _ := json.Marshal(map[string]any{
				"jsonrpc": "2.0", "id": req.ID,
				"result": map[string]any{"protocolVersion": "draft", "effects": []any{}, "extensions": ext},
			})
			out.Write(b)
			out.WriteByte('\n')
			out.Flush()
		}
		switch mode {
		case "echo", "record":
			answer(nil)
		case "crash-after":
			if requests > argN() {
				return 3
			}
			answer(nil)
		case "stale-first":
			var id string
			_ = json.Unmarshal(req.ID, &id)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%q,"result":{"protocolVersion":"draft","effects":[],"extensions":{"test.stale":true}}}`+"\n", "stale-"+id)
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":12345,"result":{"protocolVersion":"draft","effects":[]}}`+"\n")
			fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"hooks/observe","params":{}}`+"\n")
			out.Flush()
			answer(nil)
		case "garbage":
			if !strings.Contains(string(req.ID), "bad") {
				answer(nil)
				break
			}
			fmt.Fprintln(out, "this is not json")
			out.Flush()
		case "sleep-forever":
		case "slow":
			if strings.Contains(string(req.ID), "slow") {
				time.Sleep(300 * time.Millisecond)
			}
			answer(nil)
		case "multi-line":
			answer(nil)
			answer(nil)
		case "exit-nonzero":
			answer(nil)
			return 2
		case "no-reply":
			return 0
		case "orphan":
			// Leave a helper behind that holds stdout and stderr open, then die.
			exe, _ := os.Executable()
			helper := exec.Command(exe, fakeBackendArg, "sleep-forever")
			helper.Stdout, helper.Stderr = os.Stdout, os.Stderr
			if helper.Start() != nil {
				return 6
			}
			return 4
		case "unterminated":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"draft","effects":[]}}`, req.ID)
			out.Flush()
			return 0
		case "huge":
			answer(map[string]any{"test.padding": strings.Repeat("x", argN())})
		case "stderr-spam":
			long := strings.Repeat("e", 100<<10)
			for i := 0; i < 400; i++ {
				fmt.Fprintf(os.Stderr, "diagnostic line %d %s\n", i, strings.Repeat("d", 1000))
			}
			fmt.Fprintln(os.Stderr, long)
			answer(nil)
		case "env":
			var names []string
			for _, kv := range os.Environ() {
				names = append(names, strings.SplitN(kv, "=", 2)[0])
			}
			sort.Strings(names)
			answer(map[string]any{"test.env": names})
		default:
			fmt.Fprintln(os.Stderr, "fake backend: unknown mode", mode)
			return 7
		}
	}
}

// ---- shared helpers ----

func testParams(id string) *ahp.InterceptParams {
	return &ahp.InterceptParams{
		ProtocolVersion: ahp.ProtocolVersion,
		Event: &ahp.Event{
			ID: id, Source: "urn:hookproxy:test", Type: "tool.before", Time: "2026-09-15T12:00:00Z",
			Tool: &ahp.Tool{Name: "Bash"},
		},
		Capabilities: &ahp.Capabilities{Effects: []string{ahp.EffectDeny}},
	}
}

func testObserveParams(id string) *ahp.ObserveParams {
	return &ahp.ObserveParams{
		ProtocolVersion: ahp.ProtocolVersion,
		Event:           &ahp.Event{ID: id, Source: "urn:hookproxy:test", Type: "tool.after", Time: "2026-09-15T12:00:01Z"},
	}
}

func stdioBackend(lifecycle, mode string, extra ...string) registration.Backend {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return registration.Backend{
		ID: "test.stdio",
		Transport: registration.Transport{
			Type: registration.TransportStdio, Command: exe,
			Args: append([]string{fakeBackendArg, mode}, extra...), Lifecycle: lifecycle,
		},
	}
}

func mustNew(t *testing.T, b registration.Backend, opts Options) Transport {
	t.Helper()
	tr, err := New(b, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func wantKind(t *testing.T, err error, kind Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %s", kind)
	}
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *transport.Error", err, err)
	}
	if te.Kind != kind {
		t.Fatalf("kind = %s (%v), want %s", te.Kind, err, kind)
	}
}

// replyExt decodes result.extensions of a fake backend reply and checks its id.
func replyExt(t *testing.T, frame []byte, id string) map[string]json.RawMessage {
	t.Helper()
	var resp struct {
		ID     string `json:"id"`
		Result struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(frame, &resp); err != nil {
		t.Fatalf("reply %q: %v", frame, err)
	}
	if resp.ID != id {
		t.Fatalf("reply id = %q, want %q", resp.ID, id)
	}
	return resp.Result.Extensions
}

func extInt(t *testing.T, ext map[string]json.RawMessage, key string) int {
	t.Helper()
	n, err := strconv.Atoi(string(ext[key]))
	if err != nil {
		t.Fatalf("extension %s = %q", key, ext[key])
	}
	return n
}
