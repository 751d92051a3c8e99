// Package policies holds hookproxy's built-in policies: in-process AHP interceptors that
// sit in the same ordered chain as remote backends and obey the same subscription rules
// (events, mode, timeoutMs, failurePolicy, content). A registration document names one as
//
//	{"id": "no-secrets",
//	 "transport": {"type": "in_process", "policy": "secrets", "config": {"action": "redact"}},
//	 "subscriptions": [{"events": ["model.request.before", "tool.before", "tool.after"],
//	   "mode": "intercept", "timeoutMs": 200, "failurePolicy": "fail-closed",
//	   "content": {"default": "body"}}]}
//
// Factories returns the factory of every policy by name (secrets, pii, tools, models,
// injection), Names lists them and CheckConfig validates a config without building the
// policy. Configs are decoded strictly: an unknown or wrongly-cased key, a value of the
// wrong type or an invalid expression is a *ConfigError naming its JSON path.
//
// # What every policy does the same way
//
// A policy reads only what the event carries: with a projected event, text withheld by
// metadata or omit selection is simply not there. It returns only effects the request's
// capabilities advertise (AHP spec, capability-auth.md "Discovery and honest capabilities"),
// since one unadvertised effect makes the chain reject the whole reply. Modify targets by
// event: model.request.before → request, turn.start → prompt, tool.after → output,
// model.response.after and turn.finish.before → response, tool.before → input. A message-list
// modify is always a replace of the whole list that keeps every message and part (ids, order,
// roles, categories, attachments) and changes only the detected substrings; it is used only
// when replace is advertised for that target and every text part of the list is visible. A
// tool.before modify replaces the input object with the strings rewritten recursively, or
// merges only the changed top-level members when just merge is advertised. Regular expressions
// are compiled once, at construction; the request path uses no reflection and allocates nothing
// when there is nothing to report. The scanning policies (secrets, pii, injection) remember what
// they found in each text and params object by its SHA-256, per policy instance, in a bounded
// cache (scan_cache.go): a conversation's history is scanned once, not on every request.
//
// # secrets
//
//	{"action": "redact", "kinds": [...], "allow": ["^AKIAIOSFODNN7EXAMPLE$"],
//	 "minEntropy": 3.0, "minLength": 10}
//
// Keys:
//
//   - action: "redact" (default) replaces each credential with
//     [REDACTED:<kind>:<first 8 hex of sha256(credential)>]; "deny" refuses.
//   - kinds: detect only these (default all): openai_api_key, anthropic_api_key,
//     aws_access_key_id, aws_secret_access_key, github_token, slack_token, slack_webhook,
//     google_api_key, stripe_key, private_key, jwt, bearer_token, basic_auth (an HTTP
//     Basic value decoding to user-id:password), url_password (the password of a URL's
//     userinfo: postgres://user:pw@host and other connection strings; only the password is
//     redacted), gitlab_token (glpat-, gldt-, glrt-, ...), huggingface_token (hf_,
//     api_org_), generic_secret.
//   - allow: RE2 patterns of known-safe values (unanchored; ^…$ for exact values).
//   - minEntropy (bits/char, default 3.0), minLength (default 10): the bar for
//     generic_secret.
//
// Effects: redact → modify (see above); if impossible, deny if advertised; else none.
// deny → deny; where the boundary has no deny (tool.after, model.response.after,
// turn.finish.before) flow stop if advertised; else redact if possible; else none.
// Reasons name the kinds, never the values; codes are hookproxy.secrets.<kind>. At
// model.response.after and turn.finish.before tool_call parts are left alone (tool
// arguments are governed at tool.before).
//
// # pii
//
//	{"request": "redact", "response": "off", "kinds": [...], "allow": [...]}
//
// Keys:
//
//   - request: action for model.request.before, turn.start, tool.before — "redact"
//     (default), "deny" or "off".
//   - response: action for model.response.after, turn.finish.before, tool.after — "off"
//     (default), "redact" or "deny". (With the default, tool results reach the agent
//     intact and are redacted from the history on the next model.request.before.)
//   - kinds: email, phone, payment_card, iban, us_ssn (default all); allow as above.
//
// Placeholder [REDACTED:<kind>:<8 hex>]; codes hookproxy.pii.<kind>; effects as secrets.
//
// # tools
//
//	{"deny": [{"tool": "Bash", "inputPattern": "rm -rf", "reason": "..."},
//	          {"name": "recursive-delete", "effect": "recursive-delete"}],
//	 "allow": ["Read", "Bash", "mcp__files__*"], "destructive": true, "unanalysable": "auto"}
//
// Keys:
//
//   - deny: rules tried in order; the first match denies. Each rule: tool (path.Match glob
//     over the tool name, any letter case unless caseSensitive; omitted = any tool),
//     inputPattern (RE2 over the input as compact JSON with canonical string escapes;
//     omitted = any input), argument and pattern (RE2 over one top-level argument; "*" =
//     every string in the input and argv-style string arrays joined by spaces, except prose
//     keys such as description), command and flags (a program glob and required flags,
//     matched on the evaluated commands), effect (recursive-delete, block-device-write,
//     mkfs, permissions-root, fork-bomb, pipe-to-shell, shutdown) with targets ("any", or
//     "protected": /, ~, system directories, the working directory and its parents), name
//     (label), reason (default names tool, evaluated command and rule), code (reverse-DNS,
//     default hookproxy.tools.denied). All conditions of a rule must hold.
//   - allow: when set, tools matching none of these globs are denied
//     (hookproxy.tools.not_allowed).
//   - allowCommands: when set, every command a call runs must match an entry {command,
//     subcommands, tool}; others are denied (hookproxy.tools.not_allowed), or asked with
//     unlisted: "ask" (denied until approvals exist).
//   - unanalysable: "auto" (default: deny when the unevaluable part names a rule's
//     program, else allow; with allowCommands, deny), "deny", "ask" (denies, saying
//     approval is required, until approvals exist), "allow" (hookproxy.tools.unanalysable).
//   - destructive: append DefaultDestructive() (code hookproxy.tools.destructive).
//
// Commands are read from the input's command keys (command, cmd, cmdline, script,
// commands, argv, raw_arguments; input for tools whose name says they run commands, and
// Codex's code-mode exec) and evaluated by the command model of tools_shell.go.
//
// Acts at tool.before (and tool.permission.request): deny if advertised, else flow stop if
// advertised, else no effect.
//
// # models
//
//	{"allow": ["gpt-4.1*", "claude-sonnet-*"], "maxOutputTokens": 8192, "requireMaxTokens": false}
//
// Acts at model.request.before: a model id matching no allow glob is denied
// (hookproxy.models.not_allowed) — model.id, which on an Azure deployment path is the
// deployment the path names, and the body's own model (params.model) when it names
// another; the largest of params max_tokens,
// max_completion_tokens, max_output_tokens above maxOutputTokens is denied
// (hookproxy.models.max_tokens); requireMaxTokens also denies requests that set none.
// Deny, else flow stop, else no effect.
//
// # injection
//
//	{"action": "warn", "requests": false, "kinds": [...], "patterns": [...], "allow": [...]}
//
// Keys:
//
//   - action: "warn" (default) → inject (deliverAt now) of a system message telling the
//     model the content holds suspected injection; "redact" → modify removing invisible
//     characters and replacing phrases/markers with [REDACTED:<kind>:<8 hex>], falling
//     back to warn; "deny" → deny where advertised, at tool.after (no deny) flow stop,
//     else redact, else warn.
//   - requests: also examine model.request.before and turn.start (user, assistant and
//     tool messages; system/developer messages are the operator's and are skipped).
//     Default false: only tool.after.
//   - kinds: prompt_injection, role_marker, unicode_tag, zero_width, bidi_control.
//   - patterns: extra RE2 patterns reported as prompt_injection (each costs a full pass).
//   - allow: RE2 patterns of detected text to leave alone.
//
// Codes hookproxy.injection.<kind>.
package policies
