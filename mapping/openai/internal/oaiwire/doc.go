// Package oaiwire holds the pieces of the OpenAI wire format that the Chat Completions
// translator (mapping/openai/chat) and the Responses translator (mapping/openai/responses) share:
// content parts (data URLs, media types, attachment parts), the strict checks on a client's
// JSON, JSON rendering helpers, server-sent-event framing, and the comparisons and copies of
// canonical messages. Each translator keeps its own request and response shapes; only the
// logic that is the same for both APIs lives here.
package oaiwire
