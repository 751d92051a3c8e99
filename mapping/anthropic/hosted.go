package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/mapping"
)

// maxHostedResult bounds the result text an observation carries.
const maxHostedResult = 16 << 10

// hostedCalls lists the server tools Anthropic ran while answering (server_tool_use and
// mcp_tool_use blocks, with the *_tool_result block that answers each): already executed,
// so they are observed, never prevented.
func hostedCalls(content gjson.Result) []mapping.HostedCall {
	var calls []mapping.HostedCall
	at := map[string]int{}
	content.ForEach(func(_, b gjson.Result) bool {
		typ := b.Get("type").String()
		switch {
		case typ == "server_tool_use" || typ == "mcp_tool_use":
			in := b.Get("input")
			input := json.RawMessage(`{}`)
			if in.IsObject() {
				if c, err := mapping.Compact([]byte(in.Raw)); err == nil {
					input = json.RawMessage(c)
				}
			}
			id := b.Get("id").String()
			at[id] = len(calls)
			calls = append(calls, mapping.HostedCall{ID: id, Name: b.Get("name").String(), Input: input})
		case strings.HasSuffix(typ, "_tool_result") && typ != blockToolResult:
			k, ok := at[b.Get("tool_use_id").String()]
			if !ok {
				return true
			}
			r := b.Get("content")
			text := r.Raw
			if r.Type == gjson.String {
				text = r.Str
			}
			if len(text) > maxHostedResult {
				text = text[:maxHostedResult]
			}
			calls[k].Result = text
			calls[k].IsError = b.Get("is_error").Bool() || strings.HasSuffix(r.Get("type").String(), "_error")
		}
		return true
	})
	return calls
}
