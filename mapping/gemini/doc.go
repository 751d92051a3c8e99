// Package gemini translates the Google Gemini API (generateContent, streamGenerateContent
// and countTokens, in its v1 and v1beta versions, and the same calls on Vertex AI) to
// canonical AHP content and back (AHP-CONTENT-001).
//
// Gemini names the model and the call in the path
// (/v1beta/models/{model}:streamGenerateContent), not in the body, so a translator is
// bound to one endpoint (ParseEndpoint, For); the translators themselves are stateless.
//
// Request side: systemInstruction becomes one system message; each native content becomes
// a canonical message (role "model" is assistant, "user" or no role is user), except that
// every functionResponse part is split out into its own role-tool message, so a native
// user content [functionResponse, functionResponse, text] becomes canonical
// [tool, tool, user]. Encoding walks the effective canonical list back onto the original
// body: unchanged contents and parts are copied byte for byte, split user contents are
// regrouped, and only what changed is re-rendered.
//
// Response side: each candidate becomes one assistant message; functionCall parts are
// tool_call parts (mapping.ToolCallPart), thought parts are reasoning. A streamed response
// is assembled from its chunks (the SSE form with alt=sse, or the JSON array without it).
//
// Choices the API leaves open, made here:
//   - a functionCall without a native id gets a derived one from its name and arguments
//     (numbered when the same call repeats in one message), so the call keeps its id from
//     the response to every later request that replays it, whatever else was removed;
//   - a functionResponse is joined to the call it answers by id, else by name in the
//     model content before it, in order;
//   - inlineData and fileData parts are attachment metadata (type and size, never the
//     bytes); parts the canonical model has no place for (executableCode,
//     codeExecutionResult, videoMetadata, ...) become text parts with a gap and are
//     carried natively, byte for byte, while their part is present;
//   - a system or developer message that is not at the head of the list (an injection
//     mid-conversation) is rendered as a user text part wrapped in
//     <system-message>…</system-message>, as Gemini has only user and model contents;
//   - the JSON-array stream (no alt=sse) is held whole and answered as a one-element array
//     when it was edited; only the SSE stream is edited call by call.
package gemini
