package chain

import (
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// TestExtensionKeys: extension keys are reverse-DNS names and core behaviour does not
// depend on them (AHP-EXT-001): a deny carrying a well-named extension is the same deny,
// an extension key that is not reverse-DNS rejects the whole reply, and result-level
// extensions are ignored by the decision.
func TestExtensionKeys(t *testing.T) {
	tb := ReplyContext{RequestID: "evt_1", EventType: ahp.EventToolBefore}
	frame := func(result string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"evt_1","result":` + result + `}`)
	}
	tests := []struct {
		desc     string
		result   string
		wantErr  string
		wantDeny bool
	}{
		{desc: "deny with a reverse-DNS extension", result: `{"protocolVersion":"draft","effects":[{"type":"deny","reason":"no","extensions":{"com.example.ticket":{"id":7}}}]}`, wantDeny: true},
		{desc: "deny with a bare extension key", result: `{"protocolVersion":"draft","effects":[{"type":"deny","reason":"no","extensions":{"ticket":1}}]}`, wantErr: "reverse-DNS"},
		{desc: "result extensions do not change the decision", result: `{"protocolVersion":"draft","effects":[],"extensions":{"com.example.trace":"abc"}}`},
		{desc: "result extension with a bare key", result: `{"protocolVersion":"draft","effects":[],"extensions":{"trace":"abc"}}`, wantErr: "reverse-DNS"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			st, err := ValidateReply(frame(tc.result), tb)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := st.State.Permission == ahp.PermissionDeny; got != tc.wantDeny {
				t.Fatalf("deny = %v, want %v", got, tc.wantDeny)
			}
		})
	}
}
