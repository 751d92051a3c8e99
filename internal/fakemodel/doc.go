// Package fakemodel is an offline, deterministic imitation of the OpenAI chat completions
// API, the Anthropic messages API and the Gemini generateContent API, for the demo, docker compose's demo profile and
// tests. It is no model: its answers are canned, and shaped exactly like the real APIs'
// (JSON and SSE streams) so that hookproxy and unmodified SDKs handle them as usual.
//
// Behaviour, for every request:
//   - when the last user message mentions "clean up" (any case), the answer asks for two
//     tool calls: Bash {"command":"rm -rf /"} and Read {"path":"README.md"};
//   - when the conversation ends with tool results, the answer says how many it got;
//   - otherwise the answer echoes the last user message: `You said: "..."`, so what the
//     model received (after hookproxy's redaction) is visible in the answer itself.
//
// GET /_received returns the body of the last model request it received, verbatim, so a
// newcomer can see exactly what reached the "upstream".
package fakemodel
