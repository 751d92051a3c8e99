package proxy

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An upstream that answers before reading the whole body (a 401 to a large upload, an MCP
// server asking for authorization) must reach the client whole, as it would straight from
// the upstream. The answer is large enough that the client is still receiving it when the
// handler's part ends, and each shape of body is tried many times: a relay that lets
// net/http discard the body under the transport cut about one answer in twenty short.
func TestEarlyAnswerReachesTheClientWhole(t *testing.T) {
	answer := bytes.Repeat([]byte("refused. "), 300<<10/9)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(up.Close)
	plain := startProxy(t, testConfig(up.URL), nil, Options{}).URL + "/plain/upload"
	mcp := startProxy(t, mcpRouteConfig(up.URL), nil, Options{MCPHandler: NewMCPHandler}).URL + "/mcp/files"

	big := make([]byte, 2<<20)
	_, _ = rand.Read(big)
	for _, tc := range []struct {
		name, url string
		body      []byte
		chunked   bool
	}{
		{"plain 2 MiB", plain, big, false},
		{"plain 200 KiB", plain, big[:200<<10], false},
		{"plain 2 MiB chunked", plain, big, true},
		{"mcp 2 MiB", mcp, big, false},
		{"mcp 200 KiB chunked", mcp, big[:200<<10], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			short := 0
			for i := 0; i < 60; i++ {
				var body io.Reader = bytes.NewReader(tc.body)
				if tc.chunked {
					body = io.MultiReader(body) // hides the length: sent chunked
				}
				resp, err := http.Post(tc.url, "application/json", body)
				if err != nil {
					t.Fatalf("try %d: %v", i, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || err != nil || !bytes.Equal(got, answer) {
					short++
					t.Logf("try %d: %d, %d of %d bytes, %v", i, resp.StatusCode, len(got), len(answer), err)
				}
			}
			if short > 0 {
				t.Fatalf("%d of 60 answers did not reach the client whole", short)
			}
		})
	}
}

// A streamed body the upstream reads before answering leaves the client's connection open
// for the next request: only an answer that starts before the body is sent closes it.
func TestRelayedUploadsKeepTheConnection(t *testing.T) {
	up := newUpstream(t, nil)
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	body := make([]byte, 64<<10)
	_, _ = rand.Read(body)
	reused := 0
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest(http.MethodPost, px.URL+"/plain/upload", bytes.NewReader(body))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused {
					reused++
				}
			},
		}))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("upload %d: status %d, connection closed %v", i, resp.StatusCode, resp.Close)
		}
	}
	if reused != 19 {
		t.Errorf("%d of 19 uploads reused the connection", reused)
	}
	for _, r := range up.requests() {
		if !bytes.Equal(r.Body, body) {
			t.Fatalf("the upstream received %d bytes, not the upload", len(r.Body))
		}
	}
}

// A client that stops sending its body once the upstream has answered gets the whole
// answer, and the connection ends soon after, not when the rate guard's allowance for the
// megabyte it sent (over a minute by default) runs out. The upstream answers first and
// then reads on, so the relay is waiting on the client when the answer is over.
func TestEarlyAnswerToAStalledUpload(t *testing.T) {
	answer := bytes.Repeat([]byte("refused. "), 100<<10/9)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(answer)
		_ = http.NewResponseController(w).Flush()
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	px := startProxy(t, testConfig(up.URL), nil, Options{})
	c, err := net.Dial("tcp", strings.TrimPrefix(px.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := "POST /plain/upload HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(4<<20) + "\r\n\r\n"
	if _, err := c.Write(append([]byte(head), make([]byte, 1<<20)...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || err != nil || !bytes.Equal(got, answer) {
		t.Fatalf("answer: %d, %d of %d bytes, %v", resp.StatusCode, len(got), len(answer), err)
	}
	if !resp.Close {
		t.Error("an answer that came before the body was sent does not close the connection")
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the answer: %d bytes, %v; want the connection closed", n, err)
	}
}
