package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/codingtest"
	"github.com/hookproxy/hookproxy/policies"
)

// Content codings on MCP routes: a server that compresses its answer to a tools/call gets
// a credential in the tool result past redaction unless hookproxy decodes the answer before
// tool.after. The client here stands for a fetch-based one: it accepts gzip, deflate, br
// and zstd, decodes them, and passes a coding it does not know on as it came.

// fetchTransport is the client side of a fetch-based client: it asks for every coding it
// knows and decodes it; it records the codings it received.
type fetchTransport struct {
	base   *http.Transport
	onSeen func(string)
}

func (f fetchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Set("Accept-Encoding", codingtest.Accept)
	resp, err := f.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	ce, err := codingtest.DecodeResponse(resp)
	if f.onSeen != nil {
		f.onSeen(ce)
	}
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

func newFetchTransport(t *testing.T, onSeen func(string)) fetchTransport {
	t.Helper()
	base := &http.Transport{DisableCompression: true}
	t.Cleanup(base.CloseIdleConnections)
	return fetchTransport{base: base, onSeen: onSeen}
}

// envKey is a made-up AWS access key id in the real format, which the built-in secrets
// policy redacts.
const envKey = "AKIAW4162OR5EL2XEMIE"

// newEnvServer is a real MCP server (the official SDK) with one tool, read_env, whose
// result holds envKey; its answers are compressed in coding c.
func newEnvServer(t *testing.T, c codingtest.Coding, negotiated, jsonResponse bool) string {
	t.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "env", Version: "1.0.0"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "read_env", Description: "Read the environment."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "AWS_ACCESS_KEY_ID=" + envKey}}}, nil, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{JSONResponse: jsonResponse})
	ts := httptest.NewServer(codingtest.Handler(c, negotiated, h))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func readEnv(t *testing.T, endpoint string, tr http.RoundTripper) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", endpoint, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "read_env", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return mcpText(res)
}

// TestMCPCompressedResultIsRedacted: a tools/call answered by a server that compresses its
// answer (SSE or JSON) in each coding — forced, or only because the client's
// Accept-Encoding allowed it — reaches the client with the credential redacted by the
// built-in secrets policy. Straight to the server, the same client reads the credential.
func TestMCPCompressedResultIsRedacted(t *testing.T) {
	secrets, err := policies.NewSecrets(policies.SecretsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codingtest.All {
		for _, negotiated := range []bool{false, true} {
			if negotiated && c.Header == "x-gzip" {
				continue // no client asks for x-gzip
			}
			for _, m := range mcpServerModes {
				name := c.Name + "/" + map[bool]string{false: "forced", true: "negotiated"}[negotiated] + "/" + m.name
				t.Run(name, func(t *testing.T) {
					server := newEnvServer(t, c, negotiated, m.json)
					var seen []string
					record := func(ce string) { seen = append(seen, ce) }

					// Control: straight to the server, the client reads the key.
					if got := readEnv(t, server, newFetchTransport(t, record)); !strings.Contains(got, envKey) {
						t.Fatalf("control: the result lacks the key: %q", got)
					}
					if !containsString(seen, c.Header) {
						t.Fatalf("control: the server never answered in %s (%q)", c.Header, seen)
					}

					seen = nil
					endpoint := startMCPProxy(t, server, newTestChainWith(t, secrets, intercept(ahp.EventToolAfter)), nil)
					got := readEnv(t, endpoint, newFetchTransport(t, record))
					if strings.Contains(got, envKey) || !strings.Contains(got, "[REDACTED:aws_access_key_id:") {
						t.Fatalf("the client read %q", got)
					}
				})
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestMCPUnknownCodingRefused: an MCP server's answer to a tools/call in a coding hookproxy
// cannot decode is refused with a JSON-RPC error (HTTP 502) naming the coding; a client
// that passes unknown codings on as they came would otherwise read the result unchecked.
func TestMCPUnknownCodingRefused(t *testing.T) {
	result := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"AWS_ACCESS_KEY_ID=` + envKey + `"}]}}`
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "x-snappy-framed")
		_, _ = io.WriteString(w, result)
	})
	// Control: straight to the server, the answer holds the key.
	if _, _, b := mcpPost(t, up.URL+"/mcp", mcpReadCall, nil); !strings.Contains(string(b), envKey) {
		t.Fatalf("control: %s", b)
	}
	secrets, err := policies.NewSecrets(policies.SecretsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChainWith(t, secrets, intercept(ahp.EventToolAfter)), nil)
	status, _, b := mcpPost(t, endpoint, mcpReadCall, nil)
	if status != http.StatusBadGateway || strings.Contains(string(b), envKey) ||
		!strings.Contains(gjson.GetBytes(b, "error.message").String(), "x-snappy-framed") || gjson.GetBytes(b, "id").Raw != "7" {
		t.Fatalf("%d %s, want a JSON-RPC error for id 7 naming the coding", status, b)
	}
}

// TestMCPCompressedRequestIsJudged: a tools/call in a compressed request body is decoded
// and judged — the denied delete_file never reaches the server — and an allowed call
// reaches it decoded. A coding hookproxy cannot decode is refused with 415.
func TestMCPCompressedRequestIsJudged(t *testing.T) {
	for _, c := range codingtest.All {
		t.Run(c.Name, func(t *testing.T) {
			var coded bytes.Buffer
			w := c.Writer(&coded)
			_, _ = io.WriteString(w, mcpDeleteCall)
			_ = w.Close()
			up := newUpstream(t, jsonResponder(200, `{"jsonrpc":"2.0","id":"d1","result":{"content":[{"type":"text","text":"deleted"}]}}`))
			endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolBefore, ahp.EventToolAfter)), nil)
			status, _, b := mcpPost(t, endpoint, coded.String(), map[string]string{"Content-Encoding": c.Header})
			if status != 200 || !strings.Contains(string(b), "No deletes.") || len(up.requests()) != 0 {
				t.Fatalf("%d %s; the server received %d requests", status, b, len(up.requests()))
			}

			// Control: an allowed call in the same coding reaches the server, decoded.
			coded.Reset()
			w = c.Writer(&coded)
			_, _ = io.WriteString(w, mcpReadCall)
			_ = w.Close()
			mcpPost(t, endpoint, coded.String(), map[string]string{"Content-Encoding": c.Header})
			got := up.only(t)
			if string(got.Body) != mcpReadCall || got.Header.Get("Content-Encoding") != "" {
				t.Fatalf("the server received %q labelled %q", got.Body, got.Header.Get("Content-Encoding"))
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		up := newUpstream(t, nil)
		endpoint := startMCPProxy(t, up.URL+"/mcp", newTestChain(t, redactPolicy(), intercept(ahp.EventToolBefore)), nil)
		status, _, b := mcpPost(t, endpoint, mcpDeleteCall, map[string]string{"Content-Encoding": "x-snappy-framed"})
		if status != http.StatusUnsupportedMediaType || !strings.Contains(string(b), "x-snappy-framed") || len(up.requests()) != 0 {
			t.Fatalf("%d %s; the server received %d requests", status, b, len(up.requests()))
		}
	})
}

// TestModelUnknownCodingRefused: on a model route, an answer in a coding hookproxy cannot
// decode is a 502 in the provider's format, JSON or streamed; an answer the chain does not
// read (no response-side subscription) is relayed as the upstream sent it.
func TestModelUnknownCodingRefused(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "x-snappy-framed")
		_, _ = io.WriteString(w, chatTwoCalls)
	})
	px := startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept(ahp.EventToolBefore)), Options{})
	status, _, b := post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, nil)
	if status != http.StatusBadGateway || gjson.GetBytes(b, "error.type").String() == "" ||
		!strings.Contains(gjson.GetBytes(b, "error.message").String(), "x-snappy-framed") {
		t.Fatalf("%d %s", status, b)
	}
	// Control: with only model.request.before subscribed the answer is not read, and the
	// client's own coding negotiation stands.
	px = startProxy(t, testConfig(up.URL), newTestChain(t, &fakePolicy{}, intercept(ahp.EventModelRequestBefore)), Options{})
	status, hdr, _ := post(t, px.URL+chatPath, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, nil)
	if status != 200 || hdr.Get("Content-Encoding") != "x-snappy-framed" {
		t.Fatalf("not read: %d %v", status, hdr)
	}
}

// FuzzDecodeRequestBody: any Content-Encoding header and any body decode within the
// limit or fail with an error; nothing panics, and a coding hookproxy cannot decode is
// always a *codingError.
func FuzzDecodeRequestBody(f *testing.F) {
	for _, c := range codingtest.All {
		var b bytes.Buffer
		w := c.Writer(&b)
		_, _ = io.WriteString(w, mcpReadCall)
		_ = w.Close()
		f.Add(c.Header, b.Bytes())
	}
	f.Add("gzip, br", []byte{0x1f, 0x8b, 8, 0})
	f.Add("identity", []byte(`{}`))
	f.Add("x-snappy-framed", []byte(`{}`))
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, coding string, body []byte) {
		h := http.Header{"Content-Encoding": {coding}}
		out, err := decodeRequestBody(h, body, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("decoded %d bytes past the limit", len(out))
		}
		if _, cerr := contentCodings(h); cerr != nil {
			var ce *codingError
			if !errors.As(err, &ce) {
				t.Fatalf("unknown coding %q decoded: %v", coding, err)
			}
		}
	})
}

// TestDecodeEmptyCodedBody: an empty body labelled with a coding (a 204, or a server that
// labels everything) reads as empty, as clients read it, not as a decoding failure; a
// truncated one is an error.
func TestDecodeEmptyCodedBody(t *testing.T) {
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		for _, body := range []io.ReadCloser{http.NoBody, io.NopCloser(strings.NewReader(""))} {
			resp := &http.Response{Header: http.Header{"Content-Encoding": {c}}, Body: body, ContentLength: -1}
			if err := decodeResponseBody(resp); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || len(b) != 0 || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("%s: %q %v %v", c, b, err, resp.Header)
			}
		}
	}
	resp := &http.Response{Header: http.Header{"Content-Encoding": {"gzip"}}, Body: io.NopCloser(bytes.NewReader([]byte{0x1f, 0x8b, 8})), ContentLength: -1}
	_ = decodeResponseBody(resp)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("a truncated gzip body read without error")
	}
}
