// Package anthropic translates the Anthropic Messages API (POST /v1/messages) to canonical
// AHP content and back (AHP-CONTENT-001).
//
// Request side: the top-level system prompt becomes one system message; each native user or
// assistant message becomes a canonical message, except that every tool_result block is
// split out into its own role-tool message, so the native user message
// [tool_result, tool_result, text] becomes canonical [tool, tool, user]. Encoding walks the
// effective canonical list back onto the original body: unchanged messages and blocks are
// copied byte for byte, split user messages are regrouped, and only what changed is
// re-rendered (gjson reads, sjson patches).
//
// Response side: a message object becomes one assistant message whose id is the native
// message id; tool_use blocks are tool_call parts (mapping.ToolCallPart). Streams are
// assembled from Anthropic's SSE events and re-emitted in the same format.
//
// Choices the protocol leaves open, made here:
//   - a document block with a text source is a text part (attachments cannot be text/*);
//     its text is rewritten in source.data;
//   - a system or developer message that is not in the leading run of the list (an
//     injection mid-conversation) is rendered as a user text block wrapped in
//     <system-message>…</system-message> (or <developer-message>) rather than appended to
//     the top-level system prompt, which would invalidate the provider's prompt cache;
//   - blocks the canonical model has no place for (server tool blocks, search results,
//     container uploads, documents with a content source) become text parts with a gap and
//     are carried natively, byte for byte, while their part is present;
//   - thinking blocks are signed by the provider: their text cannot be rewritten or
//     invented (ErrReasoningImmutable), only kept or removed;
//   - a synthesized response carries zero usage natively (SDKs require the object), and
//     DecodeResponse reports no usage for it, so no usage is ever invented in events.
//
// Request decodes are remembered in a bounded process-wide memo (resume.go): the next
// request of a conversation, which repeats the messages decoded before, resumes that
// decode and decodes only what is new, with the same result as a decode from the start.
package anthropic
