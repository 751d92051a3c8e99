package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/policies"
)

// The token a config file served as a base64 resource blob carries (made up, real format).
const blobToken = "ghp_Vj5T3JeO5VGC2ZGwZcDTeBewmjfUM7bFkIsz"

// newMCPBlobServer is a real MCP server with two tools answering with embedded resources
// sent as base64 blobs: read_config a JSON file holding a token, read_logo a PNG.
func newMCPBlobServer(t *testing.T, jsonResponse bool) string {
	t.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "cfg", Version: "1.0.0"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "read_config", Description: "Read the config.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcpsdk.CallToolRequest, map[string]any) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///app/config.json", MIMEType: "application/json",
					Blob: []byte(`{"registry":"ghcr.io","token":"` + blobToken + `"}`)}},
			}}, nil, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "read_logo", Description: "Read the logo.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcpsdk.CallToolRequest, map[string]any) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///app/logo.png", MIMEType: "image/png",
					Blob: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + blobToken)}},
			}}, nil, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{JSONResponse: jsonResponse})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func blobs(res *mcpsdk.CallToolResult) (json, png string) {
	for _, c := range res.Content {
		if er, ok := c.(*mcpsdk.EmbeddedResource); ok && er.Resource != nil {
			switch er.Resource.MIMEType {
			case "application/json":
				json = string(er.Resource.Blob)
			case "image/png":
				png = string(er.Resource.Blob)
			}
		}
	}
	return json, png
}

// TestMCPTextBlobRedacted: a text resource sent as a base64 blob is text the secrets policy
// reads at tool.after; the client (the official SDK) decodes a blob holding the placeholder
// instead of the token, and the resource keeps its uri and type. A binary blob (image/png)
// is not text and arrives byte for byte. Control: straight to the server, the client decodes the token.
func TestMCPTextBlobRedacted(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		t.Run(map[bool]string{true: "json", false: "sse"}[jsonResponse], func(t *testing.T) {
			upstream := newMCPBlobServer(t, jsonResponse)
			direct := mcpConnect(t, upstream, "", nil)
			res := mcpCall(t, direct, &mcpsdk.CallToolParams{Name: "read_config", Arguments: map[string]any{}})
			if j, _ := blobs(res); !strings.Contains(j, blobToken) {
				t.Fatalf("control: the blob does not carry the token: %q", j)
			}

			sec, err := policies.NewSecrets(policies.SecretsConfig{})
			if err != nil {
				t.Fatal(err)
			}
			ch := newTestChainWith(t, sec, intercept(ahp.EventToolAfter))
			cs := mcpConnect(t, startMCPProxy(t, upstream, ch, nil), "", nil)
			res = mcpCall(t, cs, &mcpsdk.CallToolParams{Name: "read_config", Arguments: map[string]any{}})
			j, _ := blobs(res)
			if strings.Contains(j, blobToken) || !strings.Contains(j, `"token":"[REDACTED:github_token:`) || !strings.Contains(j, `"registry":"ghcr.io"`) {
				t.Fatalf("decoded blob through the proxy: %q", j)
			}
			if er, ok := res.Content[0].(*mcpsdk.EmbeddedResource); !ok || er.Resource.URI != "file:///app/config.json" {
				t.Fatalf("resource = %+v", res.Content[0])
			}
			res = mcpCall(t, cs, &mcpsdk.CallToolParams{Name: "read_logo", Arguments: map[string]any{}})
			if _, png := blobs(res); png != "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"+blobToken {
				t.Fatalf("binary blob changed: %q", png)
			}
		})
	}
}
