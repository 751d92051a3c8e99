package backend_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// FuzzRespond: whatever arrives, the backend never panics, and anything it answers is one
// JSON-RPC 2.0 response carrying exactly one of result and error.
func FuzzRespond(f *testing.F) {
	for _, seed := range []string{
		handWritten,
		`{"jsonrpc":"2.0","id":"c","method":"hooks/capabilities","params":{"protocolVersion":"draft"}}`,
		`{"jsonrpc":"2.0","method":"hooks/observe","params":{"protocolVersion":"draft","event":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"hooks/intercept","params":{"protocolVersion":"draft","event":{"type":"tool.before","tool":{"input":[]}}}}`,
		`[]`, `null`, `{`, "\xff", `{"id":{"a":1}}`,
	} {
		f.Add([]byte(seed))
	}
	srv := newDefaultServer(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out := srv.Respond(ctx, frame)
		if out == nil {
			return
		}
		var r map[string]json.RawMessage
		err := json.Unmarshal(out, &r)
		_, hasID := r["id"]
		_, hasResult := r["result"]
		_, hasError := r["error"]
		if err != nil || string(r["jsonrpc"]) != `"2.0"` || !hasID || hasResult == hasError || len(r) != 3 {
			t.Fatalf("answer is not one JSON-RPC response: %s", out)
		}
	})
}
