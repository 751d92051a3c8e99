// Package agents is hookproxy's compatibility suite with real, unmodified coding agents:
// the Claude Code CLI (@anthropic-ai/claude-code), the Codex CLI (@openai/codex) and the
// Gemini CLI (@google/gemini-cli), installed from npm at the exact versions of
// npm/package-lock.json and run non-interactively (`claude -p`, `codex exec`,
// `gemini -p --approval-mode yolo`) against the real hookproxy binary, built
// from this checkout and started as a child process. Its chain is the embedded default
// (the built-in tools policy with the destructive-command list, then the secrets policy)
// plus one tools rule of the suite's own that denies a recursive rm of the scratch
// directory. Upstream is a loopback imitation of the Anthropic Messages API, the OpenAI
// Responses API and the Gemini generateContent API (streaming SSE; Gemini CLI reaches it
// through the proxy's /gemini route) that scripts a conversation: turn 1 a shell call
// that reads a file holding an AWS key, turn 2 a destructive shell call, turn 3 a final
// answer. The prompt holds an AWS key too. Each tool turn starts with opaque reasoning —
// an Anthropic redacted_thinking block, a Responses reasoning item carrying only
// encrypted_content — which the agents send back: the history that holds the prompt's
// key then cannot be replaced whole, and the key is redacted in place.
//
// Two variations exercise further real-agent shapes. TestGeminiCLIThoughtSignatures makes
// the Gemini imitation behave as Gemini 3: it signs the first function call of each step
// with a thoughtSignature, refuses a request whose current turn holds a step without one,
// and answers turn 2 with one step of two calls, the destructive one (signed) first; through
// the proxy the destructive call is removed and its signature must come back on the kept
// call. Gemini CLI itself patches a placeholder signature onto an unsigned first call (the
// API accepts it), so the test checks for the issued signature, not just for acceptance.
// TestClaudeCodeImage makes turn 1 a Read of a PNG file, which Claude Code returns as an
// image block in the tool result; the key in the prompt beside it is redacted in place.
//
// Each agent runs twice. Through the proxy: the agent completes (exit 0), the destructive
// command never runs, the upstream never sees either key (it sees redaction markers), the
// agent is told why its command was refused, no WebSocket upgrade reaches the upstream,
// and the agent reaches no host but the model API. As a control, straight to the
// imitation: the command runs and both keys arrive, so every proxied check can fail.
//
// The agents are found in $HOOKPROXY_AGENTS_DIR/node_modules/.bin (.ci/run installs them
// there; default $XDG_CACHE_HOME/hookproxy-agents, else ~/.cache/hookproxy-agents).
// Without them the tests skip, unless HOOKPROXY_AGENTS_DIR is set, which says they must
// be there. Install them by hand with:
//
//	d=${XDG_CACHE_HOME:-$HOME/.cache}/hookproxy-agents; mkdir -p "$d"
//	cp e2e/agents/npm/package.json e2e/agents/npm/package-lock.json "$d"/ && npm ci --prefix "$d"
//
// HOOKPROXY_AGENTS_RECORD=DIR writes every request the imitation received, per run, to
// DIR/<test>.json (what the agents really send: paths, headers, bodies).
// HOOKPROXY_AGENTS_HOOKPROXY=BIN tests that hookproxy binary instead of building one.
//
// The package has no non-test code; this file only documents it.
package agents
