// Package responses maps the OpenAI Responses API (POST /v1/responses) onto canonical AHP
// content and back. It reads native JSON with gjson and writes with sjson, so every native
// member it does not understand, and every item a hook left unchanged, survives byte for
// byte.
//
// Decisions a reader should know about (canonical content: AHP-CONTENT-001):
//
//   - instructions is a system message, first in Items. It is written back as
//     "instructions" (never moved into input): patched when the message's text changed,
//     removed when the message was.
//   - input as a string is one user message, and stays a string while the effective list is
//     one user text. input items: message items keep their role; function_call_output is a
//     role-tool message whose id is its call_id (so tool.after items and call.id agree),
//     with one text part (category tool_result) holding the output string or its text
//     entries joined, then its image and file entries.
//   - Tool items the client runs (tools.go): function_call, custom_tool_call,
//     local_shell_call, shell_call, apply_patch_call and computer_call are tool calls
//     (tool names: the item's name for function and custom calls, else local_shell,
//     shell, apply_patch, computer; inputs as tools.go lists them, so that a tools rule sees
//     a shell command line or a freeform patch); their *_output items are tool results like
//     function_call_output (a shell_call_output's stdout and stderr as one text, a
//     computer_call_output's screenshot as an image attachment). Below, "call" and
//     "output" mean any of these.
//   - Model items form assistant messages. Consecutive reasoning, assistant message and
//     call items join one assistant message (reasoning parts, text parts, tool_call
//     parts, in native order), as the model produced them in one response. A call
//     also joins the open assistant message across output items: clients
//     commonly append each call followed by its output ([call1, out1, call2, out2]), and
//     the results of one response must all come after its assistant message, where the
//     proxy looks for tool results the model has not seen (tool.after). A reasoning or
//     message item after an output starts a new assistant message. The cost: two bare
//     calls from consecutive responses of a model that emits neither reasoning nor text
//     join one message, so the earlier result is offered to tool.after again — a
//     duplicate with the same event id, never a missed result. EncodeRequest keeps the
//     native interleaving.
//   - Ids. Message ids are the native item's id when it has one (msg_..., fc_..., rs_...);
//     an assistant message takes the id of its first item. Items without an id get
//     "m" + 16 hex digits of sha256(position, role or type, whitespace-free JSON), marked
//     synthesized; instructions use position -1. Part ids are "<message id>.p<n>". A
//     response's message takes the response id.
//   - Reasoning: summary and content texts are reasoning parts; encrypted_content is a
//     metadata reasoning part (no text is invented for it). It can be removed — the
//     item is then sent without encrypted_content — but not edited. New reasoning text
//     cannot be rendered: the provider accepts only reasoning items it produced.
//   - An mcp_call input item (a remote MCP call the provider ran, sent back with its
//     output) is a tool result: a tool message under the item's id holding its output and
//     its error text, settled at tool.after; an edit rewrites output and error only.
//   - Other item types (the hosted tools web_search_call, file_search_call,
//     code_interpreter_call and image_generation_call, item_reference, MCP list and
//     approval items, ...) are kept in place byte for byte and named in an event gap; in a
//     response they pass through without an event, as do output items and a shell_call run
//     in a provider container (it has run when the client sees it). Unknown content
//     entry types become opaque attachments with a gap, as in chat.
//   - previous_response_id and conversation add the gap {path:"items", reason:"earlier
//     context held by provider"}, a stored prompt {path:"items", reason:"prompt template
//     held by provider"}; with Request.Gaps non-empty the proxy advertises no whole-list
//     replace for modify(request).
//   - Attachments: input_image/input_file/input_audio data URLs are metadata attachment
//     parts with size and sha256; a file whose data is text is a text part (the protocol
//     forbids text attachments); URLs and file_ids are body gaps. Attachments are
//     immutable: only an original one, under its id, can be rendered back.
//   - Responses: the whole output is one assistant message. FinishReason is the status
//     ("completed"), the incomplete_details reason for an incomplete response, or the
//     status itself otherwise; tool calls do not change it (the proxy reads the tool_call
//     parts). Writing a finish reason back sets status (and incomplete_details).
package responses
