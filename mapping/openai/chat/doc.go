// Package chat maps OpenAI Chat Completions onto canonical AHP content and back.
//
// Chat is the translator for Chat Completions (POST /v1/chat/completions); the Responses
// API has its own package, mapping/openai/responses. Chat reads native JSON with gjson and
// writes with sjson, so every native field it does not understand, and every message a hook
// left unchanged, survives byte for byte. It also offers AttachmentData, an optional capability beside mapping.Translator that returns the
// inline bytes of an attachment part (for the content upload binding).
//
// Client bodies are checked before they are read: valid JSON, nesting at most 256 levels,
// and no duplicate object keys (gjson reads the first of two "messages", most upstream
// parsers the last, which would let a policy inspect one value while the model gets the
// other).
//
// Decisions a reader should know about (canonical content: AHP-CONTENT-001):
//
//   - Message ids. Chat Completions has no message ids, so a request message gets
//     "m" + 16 hex digits of sha256(position, native role, whitespace-free raw JSON), marked
//     synthesized. The same message at the same position keeps its id while the
//     conversation grows. A tool message takes its tool_call_id as id (so tool.after items
//     and call.id line up) unless that id is already taken. Part ids are "<message id>.p<n>".
//     A response message takes the completion id (choice 0) or "<completion id>.choice<n>".
//   - n > 1. Every choice becomes its own assistant message, so every tool call in every
//     choice passes tool.before; on the way back, messages are matched to choices by id and
//     messages with unknown ids (injections, a replaced list) are appended to choice 0.
//   - Attachments. data: URLs (image_url, input_audio, file.file_data) become attachment
//     parts with selection "metadata", the media type of the data URL, and size and sha256
//     of the decoded bytes; a file whose data URL is text (text/*, JSON) becomes a text part
//     instead, because the protocol forbids text attachments. Remote URLs and file_id
//     references become selection "body" with a gap, since hookproxy does not fetch them.
//     Attachments are immutable: EncodeRequest re-emits the original native part of an
//     unchanged attachment and refuses one it has never seen.
//   - Tool calls are text parts with category "tool_call" (mapping.ToolCallPart). Arguments
//     that are not a JSON object become input {} plus an event gap; custom tools (free-form
//     string input) become input {"input": "<string>"}; the deprecated function_call gets
//     the synthesized id "fc_" + hash(name, arguments), stable from response to request.
package chat
