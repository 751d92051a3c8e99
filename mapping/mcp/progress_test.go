package mcp

import (
	"encoding/json"
	"testing"
)

func TestProgressToken(t *testing.T) {
	for meta, want := range map[string]string{
		`{"progressToken":"abc"}`: `"abc"`,
		`{"progressToken":42}`:    `42`,
		`{"progressToken":-3}`:    `-3`,
		`{"progressToken":1.5}`:   ``, // MCP: a string or an integer
		`{"progressToken":null}`:  ``,
		`{"progressToken":{}}`:    ``,
		`{"other":1}`:             ``,
		``:                        ``,
	} {
		if got := string(ProgressToken(json.RawMessage(meta))); got != want {
			t.Errorf("ProgressToken(%s) = %q, want %q", meta, got, want)
		}
	}
}

func TestProgressNotification(t *testing.T) {
	raw := ProgressNotification(json.RawMessage(`"t\"1"`), 3, `waiting "for" approval`)
	var n struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		ID      *int   `json:"id"`
		Params  struct {
			ProgressToken any     `json:"progressToken"`
			Progress      float64 `json:"progress"`
			Message       string  `json:"message"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if n.JSONRPC != "2.0" || n.Method != "notifications/progress" || n.ID != nil || n.Params.ProgressToken != `t"1` ||
		n.Params.Progress != 3 || n.Params.Message != `waiting "for" approval` {
		t.Fatalf("%s decoded as %+v", raw, n)
	}
	b, err := ParseBody(raw)
	if err != nil || b.Messages[0].Kind != KindNotification {
		t.Fatalf("ParseBody: %v", err)
	}
}
