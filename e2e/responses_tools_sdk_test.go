package e2e

import (
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The official openai-go Responses client, streamed and not, through the real proxy with
// the embedded default chain: the destructive local_shell_call and custom_tool_call never
// reach it; the harmless ones do. Control: straight to the upstream it gets them.
func TestSDKResponsesToolItemsThroughDefaultChain(t *testing.T) {
	for _, direct := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			up := newUpstream(t, codexAnswer(t))
			base := up.URL + "/v1"
			if !direct {
				base = startDefaultProxy(t, up) + "/openai/v1"
			}
			c := openai.NewClient(openaioption.WithBaseURL(base), openaioption.WithAPIKey(openaiKey),
				openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{}))
			params := responses.ResponseNewParams{Model: "gpt-5-codex", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("clean up the repo")}}
			var out []responses.ResponseOutputItemUnion
			if stream {
				s := c.Responses.NewStreaming(withTimeout(t), params)
				for s.Next() {
					if ev := s.Current(); ev.Type == "response.completed" {
						out = ev.Response.Output
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				r, err := c.Responses.New(withTimeout(t), params)
				if err != nil {
					t.Fatal(err)
				}
				out = r.Output
			}
			calls := map[string]bool{}
			for _, it := range out {
				switch it.Type {
				case "local_shell_call", "custom_tool_call", "shell_call", "apply_patch_call":
					calls[it.CallID] = true
				}
			}
			destructive := calls["call_rm"] || calls["call_exec"] || calls["call_sh"]
			if direct != destructive || !calls["call_ls"] || !calls["call_patch"] {
				t.Errorf("direct=%v stream=%v: the client got calls %v", direct, stream, calls)
			}
		}
	}
}
