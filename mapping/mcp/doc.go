// Package mcp maps the Model Context Protocol's tool calls, as they travel over JSON-RPC,
// onto canonical AHP content and back. It owns the MCP framing: JSON-RPC messages and
// batches (jsonrpc.go), the keys a response is paired with its request by (ids.go),
// tools/call (call.go), CallToolResult mapping (result.go) and the SSE framing of
// Streamable HTTP answers (sse.go), with the progress notifications hookproxy sends itself
// (progress.go). The HTTP side (requests, headers,
// sessions, limits) and the enforcement of settlements live in package proxy.
//
// Native JSON is read with gjson and patched with sjson, so a message or result that no
// policy changed leaves byte for byte as it arrived, and unknown members (_meta, future
// fields) survive an edit.
//
// Decisions a reader should know about:
//
//   - Strict client bodies. A POST body is one JSON-RPC message or a batch. Duplicate object
//     keys, and envelope or params keys that differ from a protocol key only in letter case,
//     are refused as an invalid request: gjson reads the first occurrence while other
//     parsers keep the last (or match case-insensitively), so such a body would let a
//     policy inspect one tools/call while the server runs another. Results the proxy must
//     read are checked the same way for the same reason (ParseResult).
//   - tools/call without an id is refused too: a notification gets no answer, so a server
//     that ran it anyway would have run a tool no hook saw.
//   - Items of tool.after. One role "tool" message per result; each content item becomes one
//     part, in order: text items (and embedded text resources) are text parts with category
//     "tool_result"; image, audio and blob resources are attachment parts with selection
//     "metadata" and the size and sha256 of the decoded bytes (hookproxy never uploads
//     them); resource links and unknown item types are serialized into a text part, since
//     the protocol has no JSON part kind. structuredContent becomes one more text part
//     holding its JSON. isError is the outcome, not content.
//   - Applying an effective output (Output.Apply). Parts are matched to content items by
//     id. An unchanged part re-emits its original item byte for byte; a changed text part
//     rewrites only the item's text; new text parts become new text items; attachments
//     cannot be created or edited (hookproxy holds no bytes for them). structuredContent
//     is kept only when no original text changed: once a policy rewrote or removed text,
//     an untouched structuredContent would hand the caller exactly what the policy took
//     out of the text (a redacted secret, say) in another form. If the policy rewrote the
//     structured part itself to valid JSON, that JSON becomes the new structuredContent, so
//     a consistent edit of both keeps a tool's output schema satisfied; otherwise it is
//     dropped.
//   - Refusals. A refused tools/call is answered with a CallToolResult
//     {"content":[{"type":"text","text":REASON}],"isError":true}, so the agent's model sees
//     the reason and can adapt. The JSON-RPC error form (DenialError) uses code
//     CodePolicyDenied with data {"code": CODE}.
package mcp
