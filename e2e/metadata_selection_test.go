package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestMetadataSubscriptionReceivesNoText: a backend over the HTTP binding whose subscription
// selects content "metadata" (AHP-CONTENT-002) receives, on the wire, each text part as its
// size and SHA-256 and never the text; a backend of the same request selecting "body" is
// the control that the text was there to be sent.
func TestMetadataSubscriptionReceivesNoText(t *testing.T) {
	const (
		prompt = "Summarise the quarterly figures in /srv/reports/q3-confidential.txt for the board."
		result = "Revenue rose 12 percent\nMargins held at 41 percent\n"
	)
	up := newUpstream(t, answer{json: anthropicText, sse: anthropicTextSSE})
	meta, body := newHTTPBackend(t, "none"), newHTTPBackend(t, "none")
	entry := func(id string, b *httpBackend, content string) map[string]any {
		return map[string]any{"id": id, "transport": map[string]any{"type": "http", "url": b.endpoint()},
			"subscriptions": []any{map[string]any{"events": []string{"model.request.before"}, "mode": "intercept",
				"timeoutMs": 5000, "failurePolicy": "fail-closed", "content": map[string]string{"default": content}}}}
	}
	base := startProxy(t, up, entry("com.example.e2e.meta", meta, "metadata"), entry("com.example.e2e.body", body, "body"))
	req := `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"` + prompt + `"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_m1","name":"Read","input":{"file_path":"/srv/reports/q3.txt"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_m1","content":"Revenue rose 12 percent\nMargins held at 41 percent\n"}]}]}`
	if status, out := postJSON(t, base+"/anthropic/v1/messages", req); status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	frameOf := func(b *httpBackend) []byte {
		frames := b.Frames(t)
		if len(frames) != 1 {
			t.Fatalf("%s received %d frames, want 1", b.endpoint(), len(frames))
		}
		return frames[0]
	}
	bodyFrame, metaFrame := frameOf(body), frameOf(meta)
	// Control: the body subscription receives both texts.
	for _, s := range []string{prompt, "Revenue rose 12 percent"} {
		if !strings.Contains(string(bodyFrame), s) {
			t.Fatalf("control: the body subscription did not receive %q:\n%s", s, bodyFrame)
		}
	}
	for _, s := range []string{"quarterly", "q3-confidential", "Revenue", "Margins"} {
		if strings.Contains(string(metaFrame), s) {
			t.Errorf("the metadata subscription received %q:\n%s", s, metaFrame)
		}
	}
	// Each text part is described by size and digest, and by nothing else of its content.
	want := map[string]bool{}
	for _, s := range []string{prompt, result} {
		sum := sha256.Sum256([]byte(s))
		want[hex.EncodeToString(sum[:])] = true
	}
	seen := 0
	gjson.GetBytes(metaFrame, "params.event.items").ForEach(func(_, m gjson.Result) bool {
		m.Get("parts").ForEach(func(_, p gjson.Result) bool {
			if p.Get("kind").String() != "text" {
				return true
			}
			if p.Get("selection").String() != "metadata" || p.Get("text").Exists() || p.Get("body").Exists() {
				t.Errorf("part sent to the metadata subscription: %s", p.Raw)
			}
			if !p.Get("size").Exists() || len(p.Get("sha256").String()) != 64 {
				t.Errorf("part without size and sha256: %s", p.Raw)
			}
			if want[p.Get("sha256").String()] {
				seen++
			}
			return true
		})
		return true
	})
	if seen != len(want) {
		t.Errorf("the digests of the prompt and the tool result were found %d times, want %d:\n%s", seen, len(want), metaFrame)
	}
	if len(up.requests()) != 1 {
		t.Errorf("upstream received %d requests, want 1", len(up.requests()))
	}
}
