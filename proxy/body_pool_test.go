package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// withPoisonedReleases makes every buffer returned to the pool garbage until the test ends:
// a reader that outlives a release reads 0xA5 bytes, never the right ones by luck.
func withPoisonedReleases(t *testing.T) {
	saved := poisonReleasedBodies
	poisonReleasedBodies = true
	t.Cleanup(func() { poisonReleasedBodies = saved })
}

// The classes grow by at most half: a body is never given a buffer more than half again
// its size, and every length in the pooled range has a class.
func TestBodyClasses(t *testing.T) {
	if bodyClass(minPooledBody-1) != -1 || bodyClass(minPooledBody) != 0 {
		t.Fatalf("the pooled range starts at %d", minPooledBody)
	}
	for k := 1; k < bodyClasses; k++ {
		lo, hi := bodyClassSize(k-1), bodyClassSize(k)
		if hi <= lo || 2*hi > 3*lo {
			t.Fatalf("class %d: %d after %d", k, hi, lo)
		}
		for _, n := range []int{lo + 1, (lo + hi) / 2, hi} {
			if got := bodyClass(int64(n)); got != k {
				t.Fatalf("bodyClass(%d) = %d, want %d", n, got, k)
			}
		}
	}
	if last := bodyClassSize(bodyClasses - 1); bodyClass(int64(last)+1) != -1 {
		t.Fatalf("a body over %d bytes is pooled", last)
	}
	// A buffer whose capacity is no class's is not taken.
	before := bodyPoolStats.released.Load()
	putBodyBuffer(make([]byte, minPooledBody+1))
	if bodyPoolStats.released.Load() != before {
		t.Fatal("a buffer of no class's capacity was pooled")
	}
}

// A body read into a released buffer (garbage from the request before) is exactly the
// body, whatever it declared.
func TestPooledBufferReadsExactly(t *testing.T) {
	withPoisonedReleases(t)
	body := strings.Repeat("0123456789abcdef", 100<<10/16) // 100 KiB: the 128 KiB class
	n := int64(len(body))
	for _, tc := range []struct {
		name string
		hint int64
	}{{"declared exactly", n}, {"declared longer", n + 1000}, {"declared shorter", n - 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			// sync.Pool may drop what it is given (it does at random under -race): a few
			// tries, until a read takes the released buffer.
			taken := false
			for try := 0; try < 20 && !taken; try++ {
				putBodyBuffer(bodyBuffer(tc.hint, tc.hint, true))
				reused := bodyPoolStats.reused.Load()
				got, err := readAll(strings.NewReader(body), 4*n, tc.hint, true)
				if err != nil || string(got) != body {
					t.Fatalf("got %d bytes, %v", len(got), err)
				}
				taken = bodyPoolStats.reused.Load() > reused
			}
			if !taken {
				t.Fatal("control: the body was never read into a released buffer")
			}
		})
	}
}

// Only a body that may be released is read the pooled way: any other read (a held
// response, an MCP body, a codec that keeps its bodies) leaves the pool alone and gets a
// buffer of its exact size, while the pooled read of the same body takes the released
// buffer, or makes one of its class's capacity.
func TestOnlyReleasableBodiesArePooled(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 100<<10/16)
	n := int64(len(body))
	putBodyBuffer(bodyBuffer(n, n, true))
	reused := bodyPoolStats.reused.Load()
	got, err := readAllLimited(strings.NewReader(body), 4*n, n)
	if err != nil || string(got) != body || cap(got) != len(got) || bodyPoolStats.reused.Load() != reused {
		t.Fatalf("unpooled read: %d bytes, capacity %d, %v; took from the pool: %v", len(got), cap(got), err,
			bodyPoolStats.reused.Load() != reused)
	}
	got, err = readAll(strings.NewReader(body), 4*n, n, true)
	if err != nil || string(got) != body || cap(got) != bodyClassSize(bodyClass(n)) {
		t.Fatalf("pooled read: %d bytes, capacity %d, %v", len(got), cap(got), err)
	}
}

// The buffer returns to the pool only when the lifecycle and every reader the transport
// got are done with it; a reader closed or made after that reads nothing.
func TestBodyLeaseWaitsForEveryReader(t *testing.T) {
	withPoisonedReleases(t)
	buf := bodyBuffer(minPooledBody, minPooledBody, true)
	for i := range buf {
		buf[i] = 'x'
	}
	l := newBodyLease(buf)
	first, retry := l.reader(buf), l.reader(buf) // the body, and a GetBody for a retry
	released := bodyPoolStats.released.Load()
	l.release() // the lifecycle ends while the transport still writes
	chunk := make([]byte, 1000)
	if k, err := first.Read(chunk); err != nil || !bytes.Equal(chunk[:k], bytes.Repeat([]byte("x"), k)) {
		t.Fatalf("a reader still open read %q, %v", chunk[:k], err)
	}
	first.Close()
	first.Close() // twice: counted once
	if _, err := first.Read(chunk); err == nil {
		t.Fatal("a closed reader read")
	}
	if bodyPoolStats.released.Load() != released {
		t.Fatal("the buffer went back to the pool while a reader was open")
	}
	if all, err := io.ReadAll(retry); err != nil || len(all) != len(buf) || all[0] != 'x' || all[len(all)-1] != 'x' {
		t.Fatalf("the other reader read %d bytes, %v", len(all), err)
	}
	retry.Close()
	if bodyPoolStats.released.Load() != released+1 || buf[0] != 0xA5 {
		t.Fatal("the buffer did not go back to the pool when its last reader closed")
	}
	if k, err := l.reader(buf).Read(chunk); k != 0 || err == nil {
		t.Fatalf("a reader made after the release read %d bytes, %v", k, err)
	}
}

// net/http may close a request body while its writer is reading it (a cancelled
// request): Close waits for the Read, and no Read follows it.
func TestLeasedReaderCloseDuringRead(t *testing.T) {
	withPoisonedReleases(t)
	for range 50 {
		buf := bodyBuffer(minPooledBody, minPooledBody, true)
		for i := range buf {
			buf[i] = 'x'
		}
		l := newBodyLease(buf)
		r := l.reader(buf)
		l.release()
		var wg sync.WaitGroup
		wg.Add(1)
		bad := make(chan string, 1)
		go func() {
			defer wg.Done()
			p := make([]byte, 64)
			for {
				k, err := r.Read(p)
				if bytes.IndexByte(p[:k], 0xA5) >= 0 {
					bad <- "read a released buffer"
					return
				}
				if err != nil {
					return
				}
			}
		}()
		r.Close()
		wg.Wait()
		select {
		case msg := <-bad:
			t.Fatal(msg)
		default:
		}
	}
}

// Conversations long enough to be pooled, side by side, through the proxy, with every
// released buffer poisoned: each upstream receives exactly its client's body (or, on the
// turns a policy edits, the edit of it), so no request read a buffer another had taken.
func TestPooledBodiesServeConversations(t *testing.T) {
	withPoisonedReleases(t)
	// The upstream answers with the digest of what it received.
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		sum := sha256.Sum256(body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"%s"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`,
			hex.EncodeToString(sum[:]))
	})
	// Every fourth request ends with a secret, which the policy redacts (the body is
	// rendered anew; the buffer it was read into is released all the same).
	pol := &fakePolicy{effects: func(ev *ahp.Event) []ahp.Effect {
		b, _ := json.Marshal(ev.Items)
		if !bytes.Contains(b, []byte("SECRET-123")) {
			return nil
		}
		return []ahp.Effect{{Type: ahp.EffectModify, Target: ahp.TargetRequest, Operation: ahp.OpReplace,
			Value: msgs(t, redact(ev.Items)...)}}
	}}
	px := startProxy(t, testConfig(up.URL), newTestChain(t, pol, intercept("model.request.before")), Options{})
	reused := bodyPoolStats.reused.Load()
	const conversations, turns = 4, 16
	var wg sync.WaitGroup
	errs := make(chan error, conversations)
	for c := range conversations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var history []string
			filler := strings.Repeat(fmt.Sprintf("conversation %d reads a file. ", c), 2500) // ~75 KiB
			history = append(history, `{"role":"user","content":"`+filler+`"}`)
			for turn := range turns {
				text := fmt.Sprintf("conversation %d turn %d: %s", c, turn, strings.Repeat("new output line. ", 150))
				history = append(history, fmt.Sprintf(`{"role":"assistant","content":"answer %d of conversation %d"}`, turn, c),
					`{"role":"user","content":"`+text+`"}`)
				last := history[len(history)-1]
				if turn%4 == 3 {
					// The newest message carries a secret this time (the next request's
					// history has the message without it).
					last = `{"role":"user","content":"` + text + ` my key is SECRET-123"}`
				}
				body := `{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[` + strings.Join(history[:len(history)-1], ",") + "," + last + `]}`
				resp, err := http.Post(px.URL+msgsPath, "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var got struct {
					Content []struct{ Text string } `json:"content"`
				}
				if resp.StatusCode != 200 || json.Unmarshal(out, &got) != nil || len(got.Content) != 1 {
					errs <- fmt.Errorf("conversation %d turn %d: status %d %.200s", c, turn, resp.StatusCode, out)
					return
				}
				sum := sha256.Sum256([]byte(body))
				if edited, same := turn%4 == 3, got.Content[0].Text == hex.EncodeToString(sum[:]); edited == same {
					errs <- fmt.Errorf("conversation %d turn %d: edited %v, yet the upstream received the client's bytes: %v", c, turn, edited, same)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, r := range up.requests() {
		if bytes.Contains(r.Body, []byte("SECRET-123")) || bytes.IndexByte(r.Body, 0xA5) >= 0 {
			t.Fatalf("the upstream received a secret or a released buffer's bytes: %.200s", r.Body)
		}
	}
	if bodyPoolStats.reused.Load()-reused < conversations*turns/2 {
		t.Fatalf("control: only %d of %d bodies were read into a released buffer", bodyPoolStats.reused.Load()-reused, conversations*turns)
	}
}
