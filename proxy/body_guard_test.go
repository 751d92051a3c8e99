package proxy

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// trickle sends a POST whose body arrives one byte per gap, and returns the status the
// proxy answered with and how long it took.
func trickle(t *testing.T, addr, path string, body string, gap time.Duration) (int, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < len(body); i++ {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(gap)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

func TestTricklingBodyIsCutOff(t *testing.T) {
	up := newUpstream(t, jsonResponder(200, chatText))
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hello there, this is a slow body"}]}`
	for _, chain := range []bool{false, true} {
		cfg := testConfig(up.URL)
		cfg.Limits.RequestBodyGrace = 300 * time.Millisecond
		cfg.Limits.MinRequestBodyRate = 1000
		var px = startProxy(t, cfg, nil, Options{})
		if chain {
			px = startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept("model.request.before")), Options{})
		}
		addr := strings.TrimPrefix(px.URL, "http://")
		status, took := trickle(t, addr, chatPath, body, 100*time.Millisecond)
		if status != http.StatusRequestTimeout || took > 5*time.Second {
			t.Errorf("chain=%v: a body at 10 B/s got %d after %v", chain, status, took)
		}
		// Control: the same body at full speed is served.
		if status, _ := trickle(t, addr, chatPath, body, 0); status != 200 {
			t.Errorf("chain=%v: control got %d", chain, status)
		}
	}
}

func TestDeclaredLengthDoesNotSizeTheBuffer(t *testing.T) {
	b, err := readAllLimited(strings.NewReader("tiny"), 64<<20, 32<<20)
	if err != nil || string(b) != "tiny" || cap(b) > maxUpfront {
		t.Fatalf("%q %v cap %d", b, err, cap(b))
	}
	big := strings.Repeat("x", maxUpfront*3)
	b, err = readAllLimited(strings.NewReader(big), 64<<20, int64(len(big)))
	if err != nil || string(b) != big {
		t.Fatalf("a body larger than the up-front buffer: %d bytes, %v", len(b), err)
	}
}

func TestServerWideLimits(t *testing.T) {
	gate := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if strings.Contains(r.URL.Path, "slow") {
			<-gate
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(chatText))
	})
	cfg := testConfig(up.URL)
	cfg.Limits.MaxConcurrentRequests = 1
	px := startProxy(t, cfg, nil, Options{})
	done := make(chan int)
	go func() {
		s, _, _ := post(t, px.URL+"/plain/slow", `{}`, nil)
		done <- s
	}()
	for len(up.requests()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if s, _, body := post(t, px.URL+chatPath, `{"model":"m","messages":[]}`, nil); s != http.StatusServiceUnavailable || !strings.Contains(string(body), "maxConcurrentRequests") {
		t.Errorf("over the concurrency cap: %d %s", s, body)
	}
	close(gate)
	if s := <-done; s != 200 {
		t.Errorf("the request in flight: %d", s)
	}
	if s, _, _ := post(t, px.URL+chatPath, `{"model":"m","messages":[]}`, nil); s != 200 {
		t.Errorf("control: after the first ended: %d", s)
	}

	cfg = testConfig(up.URL)
	cfg.Limits.MaxHeldBytes = 1000
	px = startProxy(t, cfg, newTestChain(t, &fakePolicy{}, intercept("model.request.before")), Options{})
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	if s, _, body := post(t, px.URL+chatPath, big, nil); s != http.StatusServiceUnavailable || !strings.Contains(string(body), "maxHeldBytes") {
		t.Errorf("over the held-bytes budget: %d %s", s, body)
	}
	if s, _, _ := post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil); s != 200 {
		t.Errorf("control: a small body: %d", s)
	}
}
