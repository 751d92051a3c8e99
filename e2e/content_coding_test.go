package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/internal/codingtest"
)

// Content codings: an upstream that compresses its answer — whatever the request's
// Accept-Encoding said — in a coding the client decodes gets its tool calls past the chain
// unless hookproxy decodes the answer before judging it. Clients built on fetch (the
// official Node SDKs) decode gzip, deflate, br and zstd, and hand a body in a coding they
// do not know to the SDK as it came. fetchClient stands for such a client in front of the
// official Go SDKs; the encoders are the real ones.

// newCodedUpstream is the recording model API of upstream_test.go answering in coding c.
func newCodedUpstream(t *testing.T, a answer, c codingtest.Coding) *upstream {
	t.Helper()
	u := &upstream{answer: a}
	u.Server = httptest.NewServer(codingtest.Handler(c, false, http.HandlerFunc(u.serve)))
	t.Cleanup(u.Close)
	return u
}

// fetchClient is a loopback front for target that behaves as fetch does for the client
// behind it: it accepts gzip, deflate, br and zstd, decodes them, passes any other coding
// on undecoded, and records the Content-Encoding of every answer it received.
type fetchClient struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

func newFetchClient(t *testing.T, target string) *fetchClient {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &fetchClient{}
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(tu)
			pr.Out.Header.Set("Accept-Encoding", codingtest.Accept)
		},
		Transport:     tr,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			// identity, or a coding fetch does not know, is passed on as is
			ce, err := codingtest.DecodeResponse(resp)
			f.mu.Lock()
			f.seen = append(f.seen, ce)
			f.mu.Unlock()
			return err
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole request body is read before it is forwarded, as fetch sends it. A body
		// still being forwarded when the answer starts races net/http's server, which
		// discards what is left of an unread request body once a response is written: the
		// transport forwarding it then fails its write and closes the connection the
		// answer is coming in on (an "unexpected EOF" for the client, once in a few hundred
		// runs on a busy machine).
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *fetchClient) codings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// TestCompressedAnswersAreJudged: the model asks for Bash `rm -rf /` and Read in an answer
// compressed in each coding, JSON and streamed. Straight from the upstream, the official
// SDK behind a fetch-like client receives the destructive call; through hookproxy with the
// default chain it receives only Read, in a body with no Content-Encoding.
func TestCompressedAnswersAreJudged(t *testing.T) {
	for _, p := range providers {
		for _, c := range codingtest.All {
			for _, stream := range []bool{false, true} {
				t.Run(p.name+"/"+c.Name+"/"+modeName(stream), func(t *testing.T) {
					up := newCodedUpstream(t, p.calls, c)

					// Control: without hookproxy the client runs rm -rf.
					direct := newFetchClient(t, up.URL)
					res, err := p.send(withTimeout(t), direct.URL, newRecorder(t), convPrompt, stream)
					if err != nil {
						t.Fatalf("control: %v", err)
					}
					if !hasCall(res, "Bash", "rm -rf") {
						t.Fatalf("control: the client did not get the destructive call: %+v", res.Calls)
					}
					if got := direct.codings(); len(got) != 1 || got[0] != c.Header {
						t.Fatalf("control: the upstream answered in %q, want %q", got, c.Header)
					}

					base := startDefaultProxyB(t, up.URL)
					via := newFetchClient(t, base+p.prefix)
					res, err = p.send(withTimeout(t), via.URL, newRecorder(t), convPrompt, stream)
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Calls) != 1 || res.Calls[0].Name != "Read" {
						t.Fatalf("client got calls %+v, want only Read", res.Calls)
					}
					if got := via.codings(); len(got) != 1 || got[0] != "" {
						t.Errorf("hookproxy answered in coding %q, want identity", got)
					}
					reqs := up.requests()
					if ae := reqs[len(reqs)-1].Header.Get("Accept-Encoding"); ae != "gzip" {
						t.Errorf("hookproxy asked the upstream for Accept-Encoding %q, want gzip only", ae)
					}
				})
			}
		}
	}
}

func hasCall(res result, name, argsPart string) bool {
	for _, c := range res.Calls {
		if c.Name == name && strings.Contains(c.Args, argsPart) {
			return true
		}
	}
	return false
}

// TestUnknownCodingAnswerRefused: an answer labelled with a coding hookproxy cannot decode
// is refused with a 502 in the provider's format, never relayed. Straight from the
// upstream, a fetch-like client passes the body on undecoded and the SDK runs rm -rf.
func TestUnknownCodingAnswerRefused(t *testing.T) {
	for _, p := range providers {
		for _, stream := range []bool{false, true} {
			t.Run(p.name+"/"+modeName(stream), func(t *testing.T) {
				up := newCodedUpstream(t, p.calls, codingtest.Unknown)
				direct := newFetchClient(t, up.URL)
				res, err := p.send(withTimeout(t), direct.URL, newRecorder(t), convPrompt, stream)
				if err != nil || !hasCall(res, "Bash", "rm -rf") {
					t.Fatalf("control: the client did not get the destructive call: %+v, %v", res.Calls, err)
				}

				base := startDefaultProxyB(t, up.URL)
				via := newFetchClient(t, base+p.prefix)
				res, err = p.send(withTimeout(t), via.URL, newRecorder(t), convPrompt, stream)
				if err == nil {
					t.Fatalf("the answer was relayed: %+v", res.Calls)
				}
				ae, ok := p.asAPIError(err)
				if !ok || ae.Status != http.StatusBadGateway || !strings.Contains(ae.Message, "x-snappy-framed") {
					t.Fatalf("want a 502 in the provider's format naming the coding, got %v (%+v)", err, ae)
				}
			})
		}
	}
}

// TestCompressedRequestBodyIsExamined: a request body the client compresses is decoded,
// judged and sent on decoded — the credential in it reaches the upstream redacted — and a
// body in a coding hookproxy cannot decode is refused with 415 before the upstream sees it.
func TestCompressedRequestBodyIsExamined(t *testing.T) {
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + deployPrompt + `"}]}`
	for _, c := range codingtest.All {
		t.Run(c.Name, func(t *testing.T) {
			var coded bytes.Buffer
			w := c.Writer(&coded)
			_, _ = io.WriteString(w, body)
			_ = w.Close()
			send := func(url string) (int, []byte) {
				req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, url, bytes.NewReader(coded.Bytes()))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Content-Encoding", c.Header)
				req.Header.Set("Authorization", "Bearer "+openaiKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, b
			}

			// Control: straight to the upstream, the coded body carries the keys.
			direct := newUpstream(t, answer{json: openaiText})
			send(direct.URL + "/v1/chat/completions")
			got := direct.only(t)
			dr, _, err := codingtest.Decode(got.Header.Get("Content-Encoding"), bytes.NewReader(got.Body))
			if err != nil {
				t.Fatalf("control: %v", err)
			}
			if plain, _ := io.ReadAll(dr); !bytes.Contains(plain, []byte(defaultAWSKey)) {
				t.Fatalf("control: the upstream did not receive the key in the coded body: %q", plain)
			}

			up := newUpstream(t, answer{json: openaiText})
			status, b := send(startDefaultProxy(t, up) + "/openai/v1/chat/completions")
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, b)
			}
			got = up.only(t)
			if ce := got.Header.Get("Content-Encoding"); ce != "" {
				t.Errorf("the decoded body went upstream labelled %q", ce)
			}
			if !gjson.ValidBytes(got.Body) {
				t.Fatalf("the upstream received no JSON: %q", got.Body)
			}
			mustNotContain(t, "upstream body", string(got.Body), defaultAWSKey, defaultGitHubPAT)
			mustContain(t, "upstream body", string(got.Body), "[REDACTED:aws_access_key_id:", "Deploy with key ")
		})
	}
	t.Run("unknown", func(t *testing.T) {
		up := newUpstream(t, answer{json: openaiText})
		req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, startDefaultProxy(t, up)+"/openai/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "x-snappy-framed")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(gjson.GetBytes(b, "error.message").String(), "x-snappy-framed") {
			t.Fatalf("%d %s, want 415 naming the coding", resp.StatusCode, b)
		}
		if n := len(up.requests()); n != 0 {
			t.Fatalf("the upstream received %d requests", n)
		}
	})
}

// TestCompressedStreamsFlowAsTheyArrive: decoding does not hold a stream back. The gated
// upstreams of stream_flow_test.go, answering in each coding, send their text and wait; the
// client reads that text through hookproxy before the upstream sends the rest, and the
// destructive call in the rest is still removed.
func TestCompressedStreamsFlowAsTheyArrive(t *testing.T) {
	for name, g := range gatedStreams {
		for _, c := range codingtest.All {
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				gate := make(chan struct{})
				gated := newGatedUpstream(t, g, gate)
				up := httptest.NewServer(codingtest.Handler(c, false, gated.Config.Handler))
				t.Cleanup(up.Close)
				req, _ := http.NewRequestWithContext(withTimeout(t), http.MethodPost, startDefaultProxyB(t, up.URL)+g.path, strings.NewReader(g.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+openaiKey)
				req.Header.Set("X-Api-Key", anthropicKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d, coding %q: %s", resp.StatusCode, resp.Header.Get("Content-Encoding"), b)
				}
				br := bufio.NewReader(resp.Body)
				var got strings.Builder
				for !strings.Contains(got.String(), g.firstText) {
					line, err := br.ReadString('\n')
					got.WriteString(line)
					if err != nil {
						t.Fatalf("stream ended before the first text (read %q): %v", got.String(), err)
					}
				}
				close(gate)
				rest, err := io.ReadAll(br)
				if err != nil {
					t.Fatalf("reading the rest: %v", err)
				}
				all := got.String() + string(rest)
				mustContain(t, "the client's stream", all, "ls -la", "blocked by policy")
				mustNotContain(t, "the client's stream", withoutRefusals(all), "rm -rf")
			})
		}
	}
}
