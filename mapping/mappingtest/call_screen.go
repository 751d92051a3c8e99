package mappingtest

import (
	"encoding/json"
	"testing"

	"github.com/hookproxy/hookproxy/mapping"
)

// CheckScreen checks the promise of mapping.CallScreen for one body, given what the
// codec's DecodeResponse made of it: a body the screen clears is JSON and holds no tool
// call. The proxy forwards a cleared body without decoding it, so a wrong answer here would
// let a call past tool.before. (A cleared body may still be one DecodeResponse rejects for
// its shape, a choice without a message say: with no call in it, it passes as it would
// with no subscription.)
func CheckScreen(t *testing.T, sc mapping.CallScreen, body []byte, resp *mapping.Response, err error) {
	t.Helper()
	if !sc.NoToolCalls(body) {
		return
	}
	if !json.Valid(body) {
		t.Fatalf("screen cleared a body that is not JSON (DecodeResponse: %v):\n%s", err, body)
	}
	if err == nil && len(mapping.ToolCalls(resp.Items)) > 0 {
		t.Fatalf("screen cleared a body with %d tool calls:\n%s", len(mapping.ToolCalls(resp.Items)), body)
	}
}
