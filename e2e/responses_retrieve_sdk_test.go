package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	hpresponses "github.com/hookproxy/hookproxy/mapping/openai/responses"
)

// retrieveServer imitates the Responses API's read-back of a background response:
// GET /v1/responses/resp_codex1 answers codexResponse as JSON, or as its event stream when
// asked to stream (the query's stream=true, or openai-go's JSON body {"stream":true}),
// from starting_after on. It records what each GET carried.
type retrieveServer struct {
	*httptest.Server
	mu   sync.Mutex
	gets []string // query and body of each request
}

func newRetrieveServer(t *testing.T) *retrieveServer {
	t.Helper()
	var buf bytes.Buffer
	if err := hpresponses.New().WriteStream(&buf, []byte(codexResponse)); err != nil {
		t.Fatal(err)
	}
	events := strings.SplitAfter(buf.String(), "\n\n")
	s := &retrieveServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.gets = append(s.gets, r.Method+" "+r.URL.RawQuery+" "+string(body))
		s.mu.Unlock()
		if r.Method != http.MethodGet || r.URL.Path != "/v1/responses/resp_codex1" {
			http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
			return
		}
		if r.URL.Query().Get("stream") != "true" && !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, codexResponse)
			return
		}
		after := int64(-1)
		if v := r.URL.Query().Get("starting_after"); v != "" {
			after = gjson.Parse(v).Int()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			if _, data, ok := strings.Cut(ev, "data: "); ok && gjson.Get(data, "sequence_number").Int() <= after {
				continue
			}
			_, _ = io.WriteString(w, ev)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// TestSDKResponsesRetrieveThroughDefaultChain: openai-go reads a background response back
// (Responses.Get) and resumes its stream (Responses.GetStreaming, with and without
// starting_after) through the proxy with the embedded default chain: the destructive calls
// never reach it, the harmless ones do. Control: straight to the upstream it gets them.
func TestSDKResponsesRetrieveThroughDefaultChain(t *testing.T) {
	up := newRetrieveServer(t)
	proxied := startDefaultProxyB(t, up.URL) + "/openai/v1"
	for _, direct := range []bool{true, false} {
		for _, mode := range []string{"get", "stream", "resume"} {
			base := proxied
			if direct {
				base = up.URL + "/v1"
			}
			c := openai.NewClient(openaioption.WithBaseURL(base), openaioption.WithAPIKey(openaiKey),
				openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{}))
			var out []responses.ResponseOutputItemUnion
			var done []string // call ids of output_item.done events
			if mode == "get" {
				r, err := c.Responses.Get(withTimeout(t), "resp_codex1", responses.ResponseGetParams{})
				if err != nil {
					t.Fatalf("direct=%v %s: %v", direct, mode, err)
				}
				out = r.Output
			} else {
				params := responses.ResponseGetParams{}
				if mode == "resume" {
					params.StartingAfter = openai.Int(3)
				}
				s := c.Responses.GetStreaming(withTimeout(t), "resp_codex1", params)
				for s.Next() {
					switch ev := s.Current(); ev.Type {
					case "response.completed":
						out = ev.Response.Output
					case "response.output_item.done":
						done = append(done, ev.Item.CallID)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("direct=%v %s: %v", direct, mode, err)
				}
			}
			calls := map[string]bool{}
			for _, it := range out {
				switch it.Type {
				case "local_shell_call", "custom_tool_call", "shell_call", "apply_patch_call":
					calls[it.CallID] = true
				}
			}
			for _, id := range done {
				if id != "" && !calls[id] {
					t.Errorf("direct=%v %s: output_item.done of %s, which the final response does not hold", direct, mode, id)
				}
			}
			destructive := calls["call_rm"] || calls["call_exec"] || calls["call_sh"]
			if direct != destructive || !calls["call_ls"] || !calls["call_patch"] {
				t.Errorf("direct=%v %s: the client got calls %v", direct, mode, calls)
			}
		}
	}
	up.mu.Lock()
	t.Logf("upstream saw: %q", up.gets)
	up.mu.Unlock()
}
