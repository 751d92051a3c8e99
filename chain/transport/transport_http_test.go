package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/chain/registration"
)

// recorder is a loopback AHP backend that records what it received.
type recorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	uris    []string
	hits    atomic.Int32
	conns   atomic.Int32 // TCP connections accepted
}

func (r *recorder) record(req *http.Request) []byte {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.headers = append(r.headers, req.Header.Clone())
	r.uris = append(r.uris, req.URL.RequestURI())
	r.mu.Unlock()
	r.hits.Add(1)
	return body
}

// newBackendServer starts an httptest server on 127.0.0.1 whose handler sees the
// request after it was recorded.
func newBackendServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int32)) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		h(w, r, rec.hits.Load())
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rec.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, rec
}

func httpBackend(url string) registration.Backend {
	return registration.Backend{ID: "test.http", Transport: registration.Transport{Type: registration.TransportHTTP, URL: url}}
}

func jsonReply(body string) func(http.ResponseWriter, *http.Request, int32) {
	return func(w http.ResponseWriter, _ *http.Request, _ int32) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

const replyBody = `{"jsonrpc":"2.0", "id":"evt_1","result":{"protocolVersion":"draft","effects":[ ]}}`

func TestHTTPInterceptReturnsReplyByteExact(t *testing.T) {
	srv, rec := newBackendServer(t, jsonReply(replyBody))
	tr := mustNew(t, httpBackend(srv.URL+"/hooks?tenant=a"), Options{})

	got, err := intercept(t, tr, "evt_1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != replyBody {
		t.Fatalf("reply = %q, want the body byte for byte", got)
	}
	if rec.uris[0] != "/hooks?tenant=a" {
		t.Errorf("posted to %q, want the exact configured path and query", rec.uris[0])
	}
	h := rec.headers[0]
	if h.Get("Content-Type") != "application/json" || h.Get("Accept") != "application/json" {
		t.Errorf("headers = %v", h)
	}
	if _, ok := h["Authorization"]; ok {
		t.Error("Authorization sent without an authentication binding")
	}
	var req struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  struct {
			Event struct {
				ID string `json:"id"`
			} `json:"event"`
		} `json:"params"`
	}
	if err := json.Unmarshal(rec.bodies[0], &req); err != nil {
		t.Fatal(err)
	}
	if req.JSONRPC != "2.0" || req.ID != "evt_1" || req.Method != "hooks/intercept" || req.Params.Event.ID != "evt_1" {
		t.Fatalf("request = %s", rec.bodies[0])
	}
}

func TestHTTPBearerToken(t *testing.T) {
	srv, rec := newBackendServer(t, jsonReply(replyBody))
	const secret = "tok-3f9a-secret"

	for _, tc := range []struct {
		desc    string
		auth    *registration.Authentication
		env     string // value of HOOKPROXY_TEST_TOKEN; "-" leaves it unset
		want    Kind   // "" for success
		wantHdr string
	}{
		{"token from the environment", &registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_TOKEN"}, secret, "", "Bearer " + secret},
		{"unset variable", &registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_TOKEN"}, "-", KindCredentials, ""},
		{"empty variable", &registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_TOKEN"}, "", KindCredentials, ""},
		{"token with a line break", &registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_TOKEN"}, secret + "\r\nX-Injected: 1", KindCredentials, ""},
		{"tokenRef to the environment", &registration.Authentication{Type: "bearer", TokenRef: "env:HOOKPROXY_TEST_TOKEN"}, secret, "", "Bearer " + secret},
		{"tokenRef to an unset variable", &registration.Authentication{Type: "bearer", TokenRef: "env:HOOKPROXY_TEST_TOKEN"}, "-", KindCredentials, ""},
		{"tokenRef of a secret provider hookproxy does not have", &registration.Authentication{Type: "bearer", TokenRef: "vault:ahp/token"}, secret, KindCredentials, ""},
		{"oauth without a client secret", &registration.Authentication{Type: "oauth", Issuer: "https://login.example.com", ClientID: "hookproxy", Flow: "client_credentials"}, secret, KindCredentials, ""},
		{"oauth interactive flow", &registration.Authentication{Type: "oauth", Issuer: "https://login.example.com", ClientID: "hookproxy", Flow: "authorization_code_pkce"}, secret, KindCredentials, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.env == "-" {
				t.Setenv("HOOKPROXY_TEST_TOKEN", "") // restored after the test
				os.Unsetenv("HOOKPROXY_TEST_TOKEN")
			} else {
				t.Setenv("HOOKPROXY_TEST_TOKEN", tc.env)
			}
			b := httpBackend(srv.URL)
			b.Authentication = tc.auth
			tr := mustNew(t, b, Options{})
			before := rec.hits.Load()
			_, err := intercept(t, tr, "evt_1", 2*time.Second)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				rec.mu.Lock()
				got := rec.headers[len(rec.headers)-1].Values("Authorization")
				rec.mu.Unlock()
				if len(got) != 1 || got[0] != tc.wantHdr {
					t.Fatalf("Authorization = %q", got)
				}
				return
			}
			wantKind(t, err, tc.want)
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error text %q carries the token", err)
			}
			if rec.hits.Load() != before {
				t.Fatal("the backend was contacted without credentials")
			}
		})
	}
}

func TestHTTPStatusFailures(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		status   int
		wantHits int32
	}{
		{"500 is not retried", http.StatusInternalServerError, 1},
		{"401 is not retried", http.StatusUnauthorized, 1},
		{"429 is not retried", http.StatusTooManyRequests, 1},
		{"202 is not an intercept reply", http.StatusAccepted, 1},
		{"503 every time gives up after the retry budget", http.StatusServiceUnavailable, httpRetryMax + 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv, rec := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, `{"error":"backend-secret-detail"}`)
			})
			tr := mustNew(t, httpBackend(srv.URL), Options{})
			_, err := intercept(t, tr, "evt_1", 5*time.Second)
			wantKind(t, err, KindHTTPStatus)
			if strings.Contains(err.Error(), "backend-secret-detail") {
				t.Fatalf("error text %q carries the backend body", err)
			}
			if got := rec.hits.Load(); got != tc.wantHits {
				t.Fatalf("backend hit %d times, want %d", got, tc.wantHits)
			}
		})
	}
}

// TestHTTPRetryResendsIdenticalBytes: a retry carries the same event, identities and
// content, byte for byte (AHP-CORE-004).
func TestHTTPRetryResendsIdenticalBytes(t *testing.T) {
	srv, rec := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, n int32) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, replyBody)
	})
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	got, err := intercept(t, tr, "evt_1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != replyBody {
		t.Fatalf("reply = %q", got)
	}
	if len(rec.bodies) != 2 {
		t.Fatalf("backend saw %d requests, want 2", len(rec.bodies))
	}
	if !bytes.Equal(rec.bodies[0], rec.bodies[1]) {
		t.Fatalf("retry body differs:\n%s\n%s", rec.bodies[0], rec.bodies[1])
	}
	for _, b := range rec.bodies {
		if !replyIDMatches(b, "evt_1") {
			t.Fatalf("request %s does not carry id evt_1", b)
		}
	}
}

func TestHTTPRetriesStopAtTheDeadline(t *testing.T) {
	srv, rec := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		time.Sleep(60 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	const deadline = 150 * time.Millisecond
	start := time.Now()
	_, err := intercept(t, tr, "evt_1", deadline)
	wantKind(t, err, KindTimeout)
	if el := time.Since(start); el > 5*deadline {
		t.Fatalf("call returned after %v with a %v deadline", el, deadline)
	}
	// Let any attempt that was already in flight at the deadline reach the server, then
	// count. Attempts start at 0 ms, >= 70 ms and >= 140 ms (60 ms handler + >= 10 ms
	// backoff), so at most 3 fit in the 150 ms deadline; RetryMax allows a 4th, which would
	// only be sent if retries went on past the deadline. Counting after the wait (instead
	// of comparing two snapshots) does not mistake a late-arriving in-flight attempt for a
	// retry sent after the deadline.
	time.Sleep(300 * time.Millisecond)
	if hits := rec.hits.Load(); hits < 1 || hits > 3 {
		t.Fatalf("backend hit %d times, want 1 to 3: a retry was sent after the deadline", hits)
	}
}

func TestHTTPRedirectIsNeverFollowed(t *testing.T) {
	target, targetRec := newBackendServer(t, jsonReply(replyBody))
	for _, observe := range []bool{false, true} {
		srv, _ := newBackendServer(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		})
		t.Setenv("HOOKPROXY_TEST_TOKEN", "tok")
		b := httpBackend(srv.URL)
		b.Authentication = &registration.Authentication{Type: "bearer", TokenEnv: "HOOKPROXY_TEST_TOKEN"}
		tr := mustNew(t, b, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		if observe {
			err = tr.Observe(ctx, testObserveParams("obs_1"))
		} else {
			_, err = tr.Intercept(ctx, "evt_1", testParams("evt_1"))
		}
		cancel()
		wantKind(t, err, KindRedirect)
	}
	if n := targetRec.hits.Load(); n != 0 {
		t.Fatalf("redirect target contacted %d times", n)
	}
}

func TestHTTPOversizedReply(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":"evt_1","result":{"pad":"` + strings.Repeat("x", 2048) + `"}}`
	for _, tc := range []struct {
		desc    string
		chunked bool
	}{
		{"declared length", false},
		{"chunked body", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv, _ := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
				w.Header().Set("Content-Type", "application/json")
				if tc.chunked {
					for i := 0; i < len(big); i += 256 {
						io.WriteString(w, big[i:min(i+256, len(big))])
						w.(http.Flusher).Flush()
					}
					return
				}
				io.WriteString(w, big)
			})
			tr := mustNew(t, httpBackend(srv.URL), Options{MaxReplyBytes: 1024})
			_, err := intercept(t, tr, "evt_1", 2*time.Second)
			wantKind(t, err, KindOversized)
		})
	}
}

func TestHTTPConnectionReset(t *testing.T) {
	srv, rec := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST instead of FIN
		}
		conn.Close()
	})
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	_, err := intercept(t, tr, "evt_1", 5*time.Second)
	wantKind(t, err, KindConnection)
	if got := rec.hits.Load(); got != httpRetryMax+1 {
		t.Fatalf("backend hit %d times, want %d (connection failures are retried)", got, httpRetryMax+1)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	tr := mustNew(t, httpBackend(url), Options{})
	_, err := intercept(t, tr, "evt_1", 2*time.Second)
	wantKind(t, err, KindConnection)
}

func TestHTTPHangingServerTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv, _ := newBackendServer(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	const deadline = 200 * time.Millisecond
	start := time.Now()
	_, err := intercept(t, tr, "evt_1", deadline)
	wantKind(t, err, KindTimeout)
	if el := time.Since(start); el > 5*deadline {
		t.Fatalf("call returned after %v with a %v deadline", el, deadline)
	}
}

func TestHTTPCancelled(t *testing.T) {
	srv, _ := newBackendServer(t, func(w http.ResponseWriter, r *http.Request, _ int32) { <-r.Context().Done() })
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := tr.Intercept(ctx, "evt_1", testParams("evt_1"))
	wantKind(t, err, KindCancelled)
}

func TestHTTPReplyFraming(t *testing.T) {
	for _, tc := range []struct {
		desc, contentType, body string
		want                    Kind
	}{
		{"text/html content type", "text/html", replyBody, KindMalformed},
		{"missing content type", "", replyBody, KindMalformed},
		{"json with utf-8 charset", "application/json; charset=utf-8", replyBody, ""},
		{"json with latin-1 charset", "application/json; charset=iso-8859-1", replyBody, KindMalformed},
		{"batch", "application/json", "[" + replyBody + "]", KindMalformed},
		{"not json", "application/json", "{not json", KindMalformed},
		{"two objects", "application/json", replyBody + replyBody, KindMalformed},
		{"invalid utf-8", "application/json", `{"jsonrpc":"2.0","id":"evt_1","result":"` + "\xff\xfe" + `"}`, KindMalformed},
		{"empty body", "application/json", "", KindMalformed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv, _ := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
				w.Header()["Content-Type"] = nil
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				io.WriteString(w, tc.body)
			})
			tr := mustNew(t, httpBackend(srv.URL), Options{})
			_, err := intercept(t, tr, "evt_1", 2*time.Second)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, tc.want)
		})
	}
}

func TestHTTPObserve(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		status int
		want   Kind
	}{
		{"202 accepted", http.StatusAccepted, ""},
		{"204 no content", http.StatusNoContent, ""},
		{"200 with a body is still delivery", http.StatusOK, ""},
		{"400 fails", http.StatusBadRequest, KindHTTPStatus},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv, rec := newBackendServer(t, func(w http.ResponseWriter, _ *http.Request, _ int32) {
				w.WriteHeader(tc.status)
			})
			tr := mustNew(t, httpBackend(srv.URL), Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := tr.Observe(ctx, testObserveParams("obs_1"))
			if tc.want != "" {
				wantKind(t, err, tc.want)
			} else if err != nil {
				t.Fatal(err)
			}
			var note map[string]json.RawMessage
			if err := json.Unmarshal(rec.bodies[0], &note); err != nil {
				t.Fatal(err)
			}
			if _, hasID := note["id"]; hasID || string(note["method"]) != `"hooks/observe"` {
				t.Fatalf("notification = %s", rec.bodies[0])
			}
		})
	}
}

func TestHTTPConnectionsAreReused(t *testing.T) {
	srv, rec := newBackendServer(t, jsonReply(replyBody))
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	for i := 0; i < 5; i++ {
		if _, err := intercept(t, tr, "evt_1", 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.conns.Load(); n != 1 {
		t.Fatalf("5 sequential calls opened %d connections, want 1", n)
	}
}

// A proxy with many requests in flight keeps one idle connection per request for the
// next wave, not cleanhttp's GOMAXPROCS+1: otherwise each wave reconnects for most events.
func TestHTTPConcurrentConnectionsStayPooled(t *testing.T) {
	const inFlight = 16
	var arrived sync.WaitGroup
	var release chan struct{}
	var mu sync.Mutex
	srv, rec := newBackendServer(t, func(w http.ResponseWriter, r *http.Request, _ int32) {
		mu.Lock()
		gate := release
		mu.Unlock()
		arrived.Done()
		<-gate // every call of the wave holds its own connection
		jsonReply(replyBody)(w, r, 0)
	})
	tr := mustNew(t, httpBackend(srv.URL), Options{})
	for wave := 0; wave < 2; wave++ {
		mu.Lock()
		release = make(chan struct{})
		mu.Unlock()
		arrived.Add(inFlight)
		errs := make(chan error, inFlight)
		for i := 0; i < inFlight; i++ {
			go func() {
				_, err := intercept(t, tr, "evt_1", 5*time.Second)
				errs <- err
			}()
		}
		arrived.Wait()
		close(release)
		for i := 0; i < inFlight; i++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := rec.conns.Load(); n != inFlight {
		t.Fatalf("two waves of %d concurrent calls opened %d connections, want %d (the second wave reuses the first's)", inFlight, n, inFlight)
	}
}

func TestHTTPCertificateIsVerifiedAndNotRetried(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rec.conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)

	tr := mustNew(t, httpBackend(srv.URL), Options{}) // platform trust: the test CA is unknown
	_, err := intercept(t, tr, "evt_1", 2*time.Second)
	wantKind(t, err, KindConnection)
	if rec.hits.Load() != 0 {
		t.Fatal("a request was delivered over an unverified connection")
	}
	if n := rec.conns.Load(); n != 1 {
		t.Fatalf("%d connection attempts, want 1: a certificate failure is not retried", n)
	}
}
