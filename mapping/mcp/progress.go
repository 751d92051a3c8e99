package mcp

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// MethodProgress is the MCP notification that reports progress on a request whose
// params._meta carried a progressToken (MCP 2025-06-18, basic/utilities/progress).
const MethodProgress = "notifications/progress"

// ProgressToken returns params._meta.progressToken of a request (meta is params._meta as
// ToolCall.Meta holds it), verbatim, or nil when there is none. MCP makes the token a
// string or an integer; any other value is not one a client pairs a notification with,
// so it counts as none.
func ProgressToken(meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 {
		return nil
	}
	t := gjson.GetBytes(meta, "progressToken")
	switch {
	case t.Type == gjson.String:
	case t.Type == gjson.Number && t.Num == math.Trunc(t.Num):
	default:
		return nil
	}
	return json.RawMessage(t.Raw)
}

// ProgressNotification renders notifications/progress for token (echoed as the client
// sent it): progress must increase with each notification of one token; message is the
// human-readable status (MCP 2025-03-26 and later). No total: how long a wait lasts is
// not known.
func ProgressNotification(token json.RawMessage, progress int, message string) []byte {
	out := make([]byte, 0, len(token)+len(message)+96)
	out = append(out, `{"jsonrpc":"2.0","method":"`+MethodProgress+`","params":{"progressToken":`...)
	out = append(out, token...)
	out = append(out, `,"progress":`...)
	out = strconv.AppendInt(out, int64(progress), 10)
	out = append(out, `,"message":`...)
	out = appendString(out, message)
	return append(out, "}}"...)
}
