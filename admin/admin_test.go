package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/internal/ahptest"
	"github.com/hookproxy/hookproxy/metrics"
)

// serve runs the admin handler on a loopback listener.
func serve(t *testing.T, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(New(opts))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

var client = &http.Client{Timeout: 5 * time.Second}

func do(t *testing.T, method, url, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

func TestHealthAndReadiness(t *testing.T) {
	var notReady error
	url := serve(t, Options{Ready: func() error { return notReady }})

	resp, body := do(t, http.MethodGet, url+"/healthz", "", nil)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodGet, url+"/readyz", "", nil)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("readyz while ready: %d %q", resp.StatusCode, body)
	}

	notReady = errors.New("stdio backend com.example.scanner is not running")
	resp, body = do(t, http.MethodGet, url+"/readyz", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "com.example.scanner is not running") {
		t.Fatalf("readyz while not ready: %d %q", resp.StatusCode, body)
	}
	// Liveness does not depend on readiness.
	if resp, _ := do(t, http.MethodGet, url+"/healthz", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz while not ready: %d", resp.StatusCode)
	}
}

func TestMetricsRoute(t *testing.T) {
	m := metrics.New()
	m.ReloadResult(true)
	url := serve(t, Options{Metrics: m.Handler()})
	resp, body := do(t, http.MethodGet, url+"/metrics", "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `hookproxy_config_reloads_total{result="success"} 1`) {
		t.Fatalf("metrics: %d\n%s", resp.StatusCode, body)
	}

	url = serve(t, Options{})
	if resp, _ := do(t, http.MethodGet, url+"/metrics", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("metrics without a handler: %d, want 404", resp.StatusCode)
	}
}

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Manifest        json.RawMessage `json:"manifest"`
	} `json:"result"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func TestCapabilities(t *testing.T) {
	url := serve(t, Options{})
	const ok = `{"jsonrpc":"2.0","id":"discovery","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`
	for _, tc := range []struct {
		desc     string
		path     string
		body     string
		wantCode int    // 0 = success
		wantID   string // compact JSON of the echoed id
		wantData string
	}{
		{desc: "discovery on /", path: "/", body: ok, wantID: `"discovery"`},
		{desc: "discovery on /ahp", path: "/ahp", body: ok, wantID: `"discovery"`},
		{desc: "integer id", path: "/ahp", body: `{"jsonrpc":"2.0","id":7,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, wantID: `7`},
		{desc: "wrong protocol version", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"2025-01-01"}}`,
			wantCode: -32001, wantID: `1`, wantData: `{"supported":["draft"]}`},
		{desc: "obsolete 0.1 version", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"0.1"}}`,
			wantCode: -32001, wantID: `1`, wantData: `{"supported":["draft"]}`},
		{desc: "unknown method", path: "/", body: `{"jsonrpc":"2.0","id":"a","method":"hooks/nope","params":{}}`, wantCode: -32601, wantID: `"a"`},
		{desc: "intercept is not served here", path: "/ahp", body: `{"jsonrpc":"2.0","id":"a","method":"hooks/intercept","params":{"protocolVersion":"draft"}}`, wantCode: -32601, wantID: `"a"`},
		{desc: "malformed JSON", path: "/", body: `{"jsonrpc":"2.0","id":1,`, wantCode: -32700, wantID: `null`},
		{desc: "invalid UTF-8", path: "/", body: "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"hooks/capabilities\"}", wantCode: -32700, wantID: `null`},
		{desc: "batch", path: "/", body: `[` + ok + `]`, wantCode: -32600, wantID: `null`},
		{desc: "not an object", path: "/", body: `"hooks/capabilities"`, wantCode: -32600, wantID: `null`},
		{desc: "wrong jsonrpc", path: "/", body: `{"jsonrpc":"1.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, wantCode: -32600, wantID: `1`},
		{desc: "missing method", path: "/", body: `{"jsonrpc":"2.0","id":1,"params":{"protocolVersion":"draft"}}`, wantCode: -32600, wantID: `1`},
		{desc: "object id", path: "/", body: `{"jsonrpc":"2.0","id":{},"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, wantCode: -32600, wantID: `null`},
		{desc: "empty string id", path: "/", body: `{"jsonrpc":"2.0","id":"","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, wantCode: -32600, wantID: `null`},
		{desc: "fractional id", path: "/", body: `{"jsonrpc":"2.0","id":1.5,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`, wantCode: -32600, wantID: `null`},
		{desc: "params closed", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"draft","session":{"id":"s"}}}`, wantCode: -32602, wantID: `1`},
		{desc: "params missing", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities"}`, wantCode: -32602, wantID: `1`},
		{desc: "params not an object", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":["draft"]}`, wantCode: -32602, wantID: `1`},
		{desc: "version missing", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{}}`, wantCode: -32602, wantID: `1`},
		{desc: "version not a string", path: "/", body: `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":1}}`, wantCode: -32602, wantID: `1`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := do(t, http.MethodPost, url+tc.path, "application/json", []byte(tc.body))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200 (JSON-RPC errors travel in a 200): %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			var reply rpcReply
			if err := json.Unmarshal(body, &reply); err != nil {
				t.Fatalf("reply is not JSON: %v: %s", err, body)
			}
			if reply.JSONRPC != "2.0" || string(reply.ID) != tc.wantID {
				t.Fatalf("jsonrpc %q id %s, want id %s", reply.JSONRPC, reply.ID, tc.wantID)
			}
			if tc.wantCode == 0 {
				if reply.Error != nil || reply.Result == nil {
					t.Fatalf("want a result: %s", body)
				}
				if err := ahptest.Validate(t, "capabilities-response.schema.json", body); err != nil {
					t.Fatalf("capabilities response fails the schema: %v\n%s", err, body)
				}
				return
			}
			if reply.Error == nil || reply.Result != nil {
				t.Fatalf("want an error: %s", body)
			}
			if reply.Error.Code != tc.wantCode {
				t.Fatalf("code %d (%s), want %d", reply.Error.Code, reply.Error.Message, tc.wantCode)
			}
			if tc.wantData != "" && string(reply.Error.Data) != tc.wantData {
				t.Fatalf("data %s, want %s", reply.Error.Data, tc.wantData)
			}
			if err := ahptest.Validate(t, "json-rpc-message.schema.json", body); err != nil {
				t.Fatalf("error response fails the JSON-RPC schema: %v\n%s", err, body)
			}
		})
	}
}

func TestCapabilitiesFixtureRequest(t *testing.T) {
	// The protocol's own golden discovery request gets a schema-valid answer, which states
	// the conformance claim (AHP-CORE-001).
	req, err := os.ReadFile(filepath.Join(ahptest.FixturesDir(t), "http", "capabilities-request.valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, http.MethodPost, serve(t, Options{})+"/ahp", "application/json; charset=utf-8", req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := ahptest.Validate(t, "capabilities-response.schema.json", body); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	// The answer states the conformance claim (AHP-CORE-001) under a reverse-DNS key.
	var got struct {
		Result struct {
			Extensions map[string]struct {
				Role     string   `json:"role"`
				Bindings []string `json:"bindings"`
				Profiles []string `json:"profiles"`
			} `json:"extensions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	c, ok := got.Result.Extensions["dev.hookproxy.conformance"]
	if !ok || c.Role != "harness" || strings.Join(c.Bindings, ",") != "http,stdio" ||
		strings.Join(c.Profiles, ",") != "base,tool-interception,http,stdio" {
		t.Fatalf("conformance claim %+v in %s", c, body)
	}
}

func TestCapabilitiesHTTPLevel(t *testing.T) {
	url := serve(t, Options{})
	const ok = `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`

	if resp, _ := do(t, http.MethodPost, url+"/", "text/plain", []byte(ok)); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d, want 415", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodPost, url+"/", "", []byte(ok)); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("no content type: %d, want 415", resp.StatusCode)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"draft"},"pad":"` + strings.Repeat("x", maxRPCBytes) + `"}`
	if resp, _ := do(t, http.MethodPost, url+"/", "application/json", []byte(big)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: %d, want 413", resp.StatusCode)
	}
	resp, body := do(t, http.MethodPost, url+"/ahp", "application/json", []byte(`{"jsonrpc":"2.0","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`))
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Errorf("notification: %d %q, want 204 and no body", resp.StatusCode, body)
	}
	resp, _ = do(t, http.MethodGet, url+"/ahp", "", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET /ahp: %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if resp, _ := do(t, http.MethodGet, url+"/nope", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d, want 404", resp.StatusCode)
	}
}

func TestManifestEndpointMatchesDiscovery(t *testing.T) {
	url := serve(t, Options{})
	resp, pretty := do(t, http.MethodGet, url+"/ahp/manifest", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /ahp/manifest: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Contains(pretty, []byte("\n  \"events\": [")) {
		t.Fatalf("manifest is not pretty-printed:\n%s", pretty)
	}
	_, body := do(t, http.MethodPost, url+"/", "application/json",
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`))
	var reply rpcReply
	if err := json.Unmarshal(body, &reply); err != nil || reply.Result == nil {
		t.Fatalf("discovery: %v %s", err, body)
	}
	var a, b bytes.Buffer
	if err := json.Compact(&a, pretty); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&b, reply.Result.Manifest); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("GET /ahp/manifest differs from hooks/capabilities:\n%s\n%s", a.String(), b.String())
	}
	// The human view, wrapped as a discovery result, is schema-valid too.
	wrapped := []byte(`{"jsonrpc":"2.0","id":"people","result":{"protocolVersion":"draft","manifest":` + a.String() + `}}`)
	if err := ahptest.Validate(t, "capabilities-response.schema.json", wrapped); err != nil {
		t.Fatal(err)
	}
}

func TestManifestOverride(t *testing.T) {
	m := Manifest()
	m.ToolPaths = []string{ToolPathMCP}
	_, body := do(t, http.MethodGet, serve(t, Options{Manifest: &m})+"/ahp/manifest", "", nil)
	var got CapabilityManifest
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ToolPaths) != 1 || got.ToolPaths[0] != ToolPathMCP {
		t.Fatalf("override not served: %v", got.ToolPaths)
	}
}

// TestIndex: GET / answers a short JSON index whose every GET entry is really served
// (metrics only when there are metrics); POST / stays the JSON-RPC endpoint.
func TestIndex(t *testing.T) {
	m := metrics.New()
	for _, tc := range []struct {
		desc        string
		opts        Options
		wantMetrics bool
	}{{"with metrics", Options{Metrics: m.Handler()}, true}, {"without metrics", Options{}, false}} {
		t.Run(tc.desc, func(t *testing.T) {
			url := serve(t, tc.opts)
			resp, body := do(t, http.MethodGet, url+"/", "", nil)
			var idx struct {
				Service   string            `json:"service"`
				Endpoints map[string]string `json:"endpoints"`
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &idx) != nil {
				t.Fatalf("GET /: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if _, ok := idx.Endpoints["GET /metrics"]; ok != tc.wantMetrics {
				t.Errorf("index lists /metrics = %v, want %v", ok, tc.wantMetrics)
			}
			for ep := range idx.Endpoints {
				path, ok := strings.CutPrefix(ep, "GET ")
				if !ok {
					continue
				}
				if resp, _ := do(t, http.MethodGet, url+path, "", nil); resp.StatusCode != http.StatusOK {
					t.Errorf("the index lists %s, which answers %d", ep, resp.StatusCode)
				}
			}
			resp, body = do(t, http.MethodPost, url+"/", "application/json", []byte(`{"jsonrpc":"2.0","id":1,"method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`))
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"manifest"`) {
				t.Errorf("POST / is no longer hooks/capabilities: %d %s", resp.StatusCode, body)
			}
		})
	}
}
