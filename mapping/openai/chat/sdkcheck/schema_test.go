package sdkcheck

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/ahptest"
	"github.com/hookproxy/hookproxy/mapping/openai/chat"
)

// checkSchema fails the test when a message is not a valid canonical AHP message.
func checkSchema(t testing.TB, items []ahp.Message) {
	t.Helper()
	// The AHP schemas are read from ../shared (never copied into the repo).
	sch := ahptest.Schema(t, "content-item.schema.json#/$defs/message")
	for _, m := range items {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("message %s is not schema-valid: %v\n%s", m.ID, err, b)
		}
	}
}

func TestCanonicalItemsAreSchemaValid(t *testing.T) {
	c := chat.NewChat()
	tests := []struct {
		desc     string
		request  string
		response string
	}{
		{desc: "every chat message kind", request: "full_request.json"},
		{desc: "tool call response", response: "tool_response.json"},
		{desc: "edge attachments", request: "edge_attachments.json"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.request != "" {
				req, err := c.DecodeRequest(fixture(t, tc.request))
				if err != nil {
					t.Fatal(err)
				}
				checkSchema(t, req.Items)
			}
			if tc.response != "" {
				resp, err := c.DecodeResponse(fixture(t, tc.response))
				if err != nil {
					t.Fatal(err)
				}
				checkSchema(t, resp.Items)
			}
		})
	}
}
