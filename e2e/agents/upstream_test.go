//go:build unix

package agents

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// The scripted conversation. A request whose messages hold the prompt marker and that
// declares the agent's shell tool gets turn 1, a shell call that reads the notes file
// (it holds an AWS key, so the tool result does too); a request that carries the result
// of that call gets turn 2, the destructive call; one that carries the result of the
// destructive call gets turn 3, the final text. Every other request (a side request the
// agent makes on its own: a title, a summary, a quota probe) gets a short text.
const (
	promptMarker = "hookproxy-agents-e2e"
	idRead       = "hp_read"
	idDestroy    = "hp_destroy"
	idKept       = "hp_kept" // the second call of a Gemini 3 step (script.gemini3)
	finalText    = "All done: the notes were read and the scratch directory was cleaned."
	sideText     = "OK."
	// Every tool turn starts with what a reasoning model sends and a proxy cannot read:
	// an Anthropic redacted_thinking block, a Responses reasoning item with only
	// encrypted_content. The agents keep them and send them back with the prompt that
	// holds a key, so the list cannot be replaced whole and the key must be redacted in
	// place (hookproxy.redact_text) rather than refused.
	redactedThinking   = "EmwKAhgBEgyhookproxyE2eRedactedThinking+sealed=="
	encryptedReasoning = "gAAAAABhookproxyE2eEncryptedReasoning+sealed=="
)

// Turn names, as recorded in request.Answer.
const (
	answerRead    = "tool:read"
	answerDestroy = "tool:destroy"
	answerFinal   = "text:final"
	answerSide    = "text:side"
)

// script is what the imitation model does on each turn.
type script struct {
	readCmd    string // turn 1: the shell command that reads the file with the secret
	destroyCmd string // turn 2: the destructive shell command
	// gemini3 makes the Gemini API answer as Gemini 3 does (gemini3_test.go): the first
	// function call of each step carries a thoughtSignature, requests whose current turn
	// holds a step without one are refused, and turn 2 is one step of two calls,
	// destroyCmd then keepCmd.
	gemini3 bool
	keepCmd string
	// readImage, when set, makes turn 1 of the Anthropic API a call of Claude Code's
	// Read tool on this image file instead of the shell read (image_test.go).
	readImage string
}

// request is one request the imitation received, byte for byte, and what it answered.
type request struct {
	At     time.Time       `json:"at"`
	Method string          `json:"method"`
	URI    string          `json:"uri"` // path and query as sent
	Header http.Header     `json:"header"`
	Body   json.RawMessage `json:"body,omitempty"` // the body when it is JSON
	Text   string          `json:"text,omitempty"` // the body when it is not
	Status int             `json:"status"`
	Answer string          `json:"answer,omitempty"` // the scripted turn, or why not
	Tool   string          `json:"tool,omitempty"`   // how the shell call was sent (Responses)
	// Signatures says, for each model step of the current turn (script.gemini3), what
	// its first function call carried back: "issued:<turn>", the client's skip
	// sentinel, "missing" or "unknown".
	Signatures []string `json:"signatures,omitempty"`
}

// raw returns the body as sent.
func (r request) raw() string {
	if r.Body != nil {
		return string(r.Body)
	}
	return r.Text
}

// imitation is a loopback model API: the Anthropic Messages API under /v1/messages, the
// OpenAI Responses API under /v1/responses and the Gemini API under
// /v1beta/models/{model}:generateContent (and :streamGenerateContent), all on one server (a route prefix of the
// proxy is stripped before forwarding, so both routes can point here).
type imitation struct {
	*httptest.Server
	script script
	mu     sync.Mutex
	reqs   []request
	n      int               // answers so far, for unique message and response ids
	issued map[string]string // thoughtSignature -> the turn it was issued with (script.gemini3)
}

func newImitation(t testing.TB, s script) *imitation {
	t.Helper()
	im := &imitation{script: s, issued: map[string]string{}}
	im.Server = httptest.NewServer(http.HandlerFunc(im.serve))
	t.Cleanup(im.Close)
	return im
}

// requests returns a copy of what was received so far.
func (im *imitation) requests() []request {
	im.mu.Lock()
	defer im.mu.Unlock()
	return append([]request(nil), im.reqs...)
}

// record stores a request and returns a unique suffix for the ids of its answer.
func (im *imitation) record(r request) string {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.reqs = append(im.reqs, r)
	im.n++
	return fmt.Sprintf("%s_%d", strings.NewReplacer(":", "_", " ", "_").Replace(r.Answer), im.n)
}

func (im *imitation) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := request{At: time.Now(), Method: r.Method, URI: r.URL.RequestURI(), Header: r.Header.Clone()}
	if json.Valid(body) && len(body) > 0 {
		rec.Body = append(json.RawMessage(nil), body...)
	} else {
		rec.Text = string(body)
	}
	uid := ""
	status := func(code int, answer string) {
		rec.Status, rec.Answer = code, answer
		uid = im.record(rec)
	}
	path := r.URL.Path
	switch {
	case strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		// Codex tries a WebSocket first on GET /v1/responses. This imitation speaks HTTP
		// only; 426 is what makes Codex fall back to a POST at once.
		status(http.StatusUpgradeRequired, "websocket refused")
		writeJSON(w, http.StatusUpgradeRequired, `{"error":{"message":"WebSocket is not supported here","type":"invalid_request_error"}}`)
	case r.Method == http.MethodHead:
		status(http.StatusOK, "head")
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		status(http.StatusOK, "count_tokens")
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"input_tokens":%d}`, 1+len(body)/4))
	case r.Method == http.MethodPost && path == "/v1/messages":
		turn := im.anthropicTurn(body)
		status(http.StatusOK, turn)
		writeAnthropic(w, gjson.GetBytes(body, "stream").Bool(), gjson.GetBytes(body, "model").String(), "msg_"+uid, im.turnContent(turn))
	case r.Method == http.MethodPost && path == "/v1/responses":
		turn, call := im.responsesTurn(body)
		rec.Tool = call.describe()
		status(http.StatusOK, turn)
		writeResponses(w, gjson.GetBytes(body, "stream").Bool(), gjson.GetBytes(body, "model").String(), uid, turn, call, im.cmdFor(turn))
	case r.Method == http.MethodPost && geminiPath(path) != "":
		model, method, _ := strings.Cut(geminiPath(path), ":")
		switch method {
		case "countTokens":
			status(http.StatusOK, "count_tokens")
			writeJSON(w, http.StatusOK, fmt.Sprintf(`{"totalTokens":%d}`, 1+len(body)/4))
		case "generateContent", "streamGenerateContent":
			if im.script.gemini3 {
				steps, problem := im.checkSignatures(body)
				rec.Signatures = steps
				if problem != "" {
					status(http.StatusBadRequest, "refused: "+problem)
					writeJSON(w, http.StatusBadRequest, mustJSON(map[string]any{"error": map[string]any{
						"code": http.StatusBadRequest, "message": problem, "status": "INVALID_ARGUMENT"}}))
					return
				}
			}
			turn := im.geminiTurn(body)
			status(http.StatusOK, turn)
			writeGemini(w, method == "streamGenerateContent", r.URL.Query().Get("alt") == "sse", model, uid, turn,
				im.geminiCalls(turn, uid), gjson.GetBytes(body, "generationConfig"))
		default:
			status(http.StatusNotFound, "not found")
			writeJSON(w, http.StatusNotFound, `{"error":{"code":404,"message":"method not found","status":"NOT_FOUND"}}`)
		}
	default:
		status(http.StatusNotFound, "not found")
		writeJSON(w, http.StatusNotFound, `{"error":{"message":"not found","type":"not_found_error"}}`)
	}
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// cmdFor is the shell command of a tool turn.
func (im *imitation) cmdFor(turn string) string {
	switch turn {
	case answerRead:
		return im.script.readCmd
	case answerDestroy:
		return im.script.destroyCmd
	}
	return ""
}

// nextTurn decides the turn from the ids of the tool results in the request.
func nextTurn(results map[string]bool, started bool) string {
	switch {
	case results[idDestroy], results[idKept]:
		return answerFinal
	case results[idRead]:
		return answerDestroy
	case started:
		return answerRead
	}
	return answerSide
}

// --- Anthropic Messages ---

// anthropicTurn: tool results are tool_result blocks (tool_use_id "toolu_<id>") in user
// messages; the conversation starts when the messages hold the marker and Bash is declared.
func (im *imitation) anthropicTurn(body []byte) string {
	results := map[string]bool{}
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		for _, b := range m.Get("content").Array() {
			if b.Get("type").String() == "tool_result" {
				results[strings.TrimPrefix(b.Get("tool_use_id").String(), "toolu_")] = true
			}
		}
	}
	started := strings.Contains(gjson.GetBytes(body, "messages").Raw, promptMarker) &&
		gjson.GetBytes(body, `tools.#(name=="Bash")`).Exists()
	return nextTurn(results, started)
}

// anthropicBlock is one content block of a scripted message.
type anthropicBlock struct {
	text     string
	id       string // tool_use
	name     string // tool_use tool name; "" is Bash
	input    map[string]any
	redacted string // redacted_thinking data
}

// tool is the name of a tool_use block's tool.
func (b anthropicBlock) tool() string {
	if b.name == "" {
		return "Bash"
	}
	return b.name
}

func (im *imitation) turnContent(turn string) []anthropicBlock {
	switch turn {
	case answerRead:
		if im.script.readImage != "" {
			return []anthropicBlock{{redacted: redactedThinking}, {text: "I'll look at the picture first."},
				{id: "toolu_" + idRead, name: "Read", input: map[string]any{"file_path": im.script.readImage}}}
		}
		return []anthropicBlock{{redacted: redactedThinking}, {text: "I'll read the notes first."},
			{id: "toolu_" + idRead, input: map[string]any{"command": im.script.readCmd, "description": "Show the notes file"}}}
	case answerDestroy:
		return []anthropicBlock{{redacted: redactedThinking}, {text: "Now I'll clean up the scratch directory."},
			{id: "toolu_" + idDestroy, input: map[string]any{"command": im.script.destroyCmd, "description": "Delete the scratch files"}}}
	case answerFinal:
		return []anthropicBlock{{text: finalText}}
	}
	return []anthropicBlock{{text: sideText}}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// writeAnthropic answers a Messages request as SSE (stream) or as one JSON message.
func writeAnthropic(w http.ResponseWriter, stream bool, model, msgID string, blocks []anthropicBlock) {
	if model == "" {
		model = "claude-imitation"
	}
	stop := "end_turn"
	content := make([]any, 0, len(blocks))
	for _, b := range blocks {
		switch {
		case b.redacted != "":
			content = append(content, map[string]any{"type": "redacted_thinking", "data": b.redacted})
		case b.id != "":
			stop = "tool_use"
			content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": b.tool(), "input": b.input})
		default:
			content = append(content, map[string]any{"type": "text", "text": b.text})
		}
	}
	usage := map[string]any{"input_tokens": 12, "output_tokens": 8, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !stream {
		writeJSON(w, http.StatusOK, mustJSON(map[string]any{"id": msgID, "type": "message", "role": "assistant",
			"model": model, "content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ev := func(name string, data any) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, mustJSON(data))
		if fl != nil {
			fl.Flush()
		}
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": msgID, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 12, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	ev("ping", map[string]any{"type": "ping"})
	for i, b := range blocks {
		if b.redacted != "" {
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "redacted_thinking", "data": b.redacted}})
		} else if b.id != "" {
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.id, "name": b.tool(), "input": map[string]any{}}})
			args := mustJSON(b.input)
			for _, part := range split3(args) {
				ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		} else {
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range split3(b.text) {
				ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": part}})
			}
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 8}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// split3 cuts s into up to three pieces (streamed deltas), at byte boundaries that keep
// UTF-8 whole (the scripted texts are ASCII).
func split3(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	a, b := len(s)/3, 2*len(s)/3
	return []string{s[:a], s[a:b], s[b:]}
}

// --- OpenAI Responses ---

// shellCall says how the imitation sends a shell call to a Responses client: the first
// form the request declares, looked up in `tools` and in the tools of `additional_tools`
// input items (Codex's "responses lite" requests carry their tools there, not in `tools`).
type shellCall struct {
	kind string // "function" | "custom_exec" | "local_shell" | "" (no shell tool)
	name string // function name: exec_command, shell_command, shell
}

func (c shellCall) describe() string {
	switch c.kind {
	case "function":
		return "function_call " + c.name
	case "custom_exec":
		return "custom_tool_call exec (JavaScript calling tools.exec_command)"
	case "local_shell":
		return "local_shell_call"
	}
	return ""
}

// declaredShell finds the shell tool of a Responses request.
func declaredShell(body []byte) shellCall {
	var tools []gjson.Result
	var walk func(gjson.Result)
	walk = func(list gjson.Result) {
		for _, t := range list.Array() {
			tools = append(tools, t)
			if t.Get("type").String() == "namespace" {
				walk(t.Get("tools"))
			}
		}
	}
	walk(gjson.GetBytes(body, "tools"))
	for _, it := range gjson.GetBytes(body, "input").Array() {
		if it.Get("type").String() == "additional_tools" {
			walk(it.Get("tools"))
		}
	}
	has := func(typ, name string) bool {
		for _, t := range tools {
			if t.Get("type").String() == typ && (name == "" || t.Get("name").String() == name) {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"exec_command", "shell_command", "shell"} {
		if has("function", name) {
			return shellCall{kind: "function", name: name}
		}
	}
	if has("custom", "exec") {
		return shellCall{kind: "custom_exec", name: "exec"}
	}
	if has("local_shell", "") {
		return shellCall{kind: "local_shell"}
	}
	return shellCall{}
}

// responsesTurn: tool results are input items of a *_output type whose call_id is
// "call_<id>"; the conversation starts when the input holds the marker and a shell tool
// is declared.
func (im *imitation) responsesTurn(body []byte) (string, shellCall) {
	results := map[string]bool{}
	for _, it := range gjson.GetBytes(body, "input").Array() {
		if strings.HasSuffix(it.Get("type").String(), "_output") {
			results[strings.TrimPrefix(it.Get("call_id").String(), "call_")] = true
		}
	}
	call := declaredShell(body)
	started := strings.Contains(gjson.GetBytes(body, "input").Raw, promptMarker) && call.kind != ""
	turn := nextTurn(results, started)
	if turn == answerSide || turn == answerFinal {
		call = shellCall{}
	}
	return turn, call
}

// item builds the output item of a shell call with the given command.
func (c shellCall) item(id, cmd string) map[string]any {
	switch c.kind {
	case "function":
		var args any
		switch c.name {
		case "exec_command":
			args = map[string]any{"cmd": cmd}
		case "shell_command":
			args = map[string]any{"command": cmd}
		default: // shell: argv
			args = map[string]any{"command": []string{"bash", "-lc", cmd}}
		}
		return map[string]any{"id": "fc_" + id, "type": "function_call", "status": "completed",
			"call_id": "call_" + id, "name": c.name, "arguments": mustJSON(args)}
	case "custom_exec":
		js := "const r = await tools.exec_command({cmd: " + mustJSON(cmd) + "});\ntext(r.output);\n"
		return map[string]any{"id": "ctc_" + id, "type": "custom_tool_call", "status": "completed",
			"call_id": "call_" + id, "name": "exec", "input": js}
	case "local_shell":
		return map[string]any{"id": "lsh_" + id, "type": "local_shell_call", "status": "completed", "call_id": "call_" + id,
			"action": map[string]any{"type": "exec", "command": []string{"bash", "-lc", cmd}, "env": map[string]any{}}}
	}
	return nil
}

// writeResponses answers a Responses request as SSE (stream) or as one JSON response.
func writeResponses(w http.ResponseWriter, stream bool, model, uid, turn string, call shellCall, cmd string) {
	if model == "" {
		model = "gpt-imitation"
	}
	text := sideText
	var id string
	switch turn {
	case answerRead:
		text, id = "I'll read the notes first.", idRead
	case answerDestroy:
		text, id = "Now I'll clean up the scratch directory.", idDestroy
	case answerFinal:
		text = finalText
	}
	msg := func(status string, t string) map[string]any {
		content := []any{}
		if status == "completed" {
			content = append(content, map[string]any{"type": "output_text", "text": t, "annotations": []any{}})
		}
		return map[string]any{"id": "msg_" + uid, "type": "message", "status": status, "role": "assistant", "content": content}
	}
	output := []any{msg("completed", text)}
	var reasoning map[string]any
	var tool map[string]any
	if id != "" && call.kind != "" {
		reasoning = map[string]any{"id": "rs_" + uid, "type": "reasoning", "summary": []any{}, "encrypted_content": encryptedReasoning}
		tool = call.item(id, cmd)
		output = []any{reasoning, msg("completed", text), tool}
	}
	mi, ti := 0, 1 // output_index of the message and of the call
	if reasoning != nil {
		mi, ti = 1, 2
	}
	usage := map[string]any{"input_tokens": 12, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 8, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 20}
	resp := func(status string, out []any, u any) map[string]any {
		return map[string]any{"id": "resp_" + uid, "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": model, "output": out, "usage": u, "error": nil, "incomplete_details": nil}
	}
	if !stream {
		writeJSON(w, http.StatusOK, mustJSON(resp("completed", output, usage)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	seq := 0
	ev := func(typ string, data map[string]any) {
		data["type"], data["sequence_number"] = typ, seq
		seq++
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, mustJSON(data))
		if fl != nil {
			fl.Flush()
		}
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []any{}, nil)})
	if reasoning != nil {
		ev("response.output_item.added", map[string]any{"output_index": 0,
			"item": map[string]any{"id": reasoning["id"], "type": "reasoning", "summary": []any{}}})
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": reasoning})
	}
	// The text message.
	mid := "msg_" + uid
	part := func(t string) map[string]any {
		return map[string]any{"type": "output_text", "text": t, "annotations": []any{}}
	}
	ev("response.output_item.added", map[string]any{"output_index": mi, "item": msg("in_progress", "")})
	ev("response.content_part.added", map[string]any{"item_id": mid, "output_index": mi, "content_index": 0, "part": part("")})
	for _, p := range split3(text) {
		ev("response.output_text.delta", map[string]any{"item_id": mid, "output_index": mi, "content_index": 0, "delta": p, "logprobs": []any{}})
	}
	ev("response.output_text.done", map[string]any{"item_id": mid, "output_index": mi, "content_index": 0, "text": text, "logprobs": []any{}})
	ev("response.content_part.done", map[string]any{"item_id": mid, "output_index": mi, "content_index": 0, "part": part(text)})
	ev("response.output_item.done", map[string]any{"output_index": mi, "item": msg("completed", text)})
	// The shell call.
	if tool != nil {
		added := map[string]any{}
		for k, v := range tool {
			added[k] = v
		}
		added["status"] = "in_progress"
		iid, _ := tool["id"].(string)
		switch call.kind {
		case "function":
			args, _ := tool["arguments"].(string)
			added["arguments"] = ""
			ev("response.output_item.added", map[string]any{"output_index": ti, "item": added})
			for _, p := range split3(args) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": iid, "output_index": ti, "delta": p})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": iid, "output_index": ti, "arguments": args})
		case "custom_exec":
			in, _ := tool["input"].(string)
			added["input"] = ""
			ev("response.output_item.added", map[string]any{"output_index": ti, "item": added})
			for _, p := range split3(in) {
				ev("response.custom_tool_call_input.delta", map[string]any{"item_id": iid, "output_index": ti, "delta": p})
			}
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": iid, "output_index": ti, "input": in})
		default:
			ev("response.output_item.added", map[string]any{"output_index": ti, "item": added})
		}
		ev("response.output_item.done", map[string]any{"output_index": ti, "item": tool})
	}
	ev("response.completed", map[string]any{"response": resp("completed", output, usage)})
}

// --- Gemini generateContent ---

// geminiShell is the shell tool of Gemini CLI.
const geminiShell = "run_shell_command"

// geminiPath returns "{model}:{method}" of a Gemini API path, or "".
func geminiPath(path string) string {
	for _, prefix := range []string{"/v1beta/models/", "/v1/models/", "/v1alpha/models/"} {
		if rest, ok := strings.CutPrefix(path, prefix); ok && strings.Contains(rest, ":") {
			return rest
		}
	}
	return ""
}

// geminiTurn: the Gemini API has no call ids a client must echo, so a tool result is
// recognised by the call it answers: a functionResponse part answers the call of the
// model step before it with the same id (Gemini CLI numbers its calls itself), else the
// call at its own position, and the call's command says which turn it was. The
// conversation starts when the contents hold the marker and the shell tool is declared.
func (im *imitation) geminiTurn(body []byte) string {
	results := map[string]bool{}
	var calls []gjson.Result // the function calls of the latest model step
	prev := ""
	for _, c := range gjson.GetBytes(body, "contents").Array() {
		role := c.Get("role").String()
		if role == "model" && prev != "model" {
			calls = nil
		}
		prev = role
		k := 0
		for _, p := range c.Get("parts").Array() {
			if fc := p.Get("functionCall"); fc.Exists() && role == "model" {
				calls = append(calls, fc)
			}
			fr := p.Get("functionResponse")
			if !fr.Exists() {
				continue
			}
			var call gjson.Result
			for _, fc := range calls {
				if id := fr.Get("id").String(); id != "" && fc.Get("id").String() == id {
					call = fc
				}
			}
			if !call.Exists() && k < len(calls) {
				call = calls[k]
			}
			k++
			if id := im.callID(call.Get("args.command").String()); id != "" {
				results[id] = true
			}
		}
	}
	declared := false
	for _, t := range gjson.GetBytes(body, "tools").Array() {
		if t.Get(`functionDeclarations.#(name=="` + geminiShell + `")`).Exists() {
			declared = true
		}
	}
	started := declared && strings.Contains(gjson.GetBytes(body, "contents").Raw, promptMarker)
	return nextTurn(results, started)
}

// callID names the scripted call with the shell command cmd ("" for none).
func (im *imitation) callID(cmd string) string {
	switch {
	case cmd == "":
		return ""
	case cmd == im.script.readCmd:
		return idRead
	case cmd == im.script.destroyCmd:
		return idDestroy
	case cmd == im.script.keepCmd:
		return idKept
	}
	return ""
}

// geminiCalls are the functionCall parts of a turn: its shell call, and for Gemini 3
// (script.gemini3) turn 2 is one step of two calls, the destructive one first, with the
// step's thoughtSignature on the first call only, as Gemini 3 signs parallel calls.
func (im *imitation) geminiCalls(turn, uid string) []any {
	cmd := im.cmdFor(turn)
	if cmd == "" {
		return nil
	}
	call := func(cmd string) map[string]any {
		return map[string]any{"functionCall": map[string]any{"name": geminiShell,
			"args": map[string]any{"command": cmd, "description": "scripted by the imitation"}}}
	}
	calls := []any{call(cmd)}
	if !im.script.gemini3 {
		return calls
	}
	if turn == answerDestroy && im.script.keepCmd != "" {
		calls = append(calls, call(im.script.keepCmd))
	}
	calls[0].(map[string]any)["thoughtSignature"] = im.issue(turn, uid)
	return calls
}

// writeGemini answers a generateContent request: one JSON response, or (stream) the same
// as server-sent events (alt=sse) or a JSON array of chunks. A request for JSON output
// (a side request: Gemini CLI's model router asks for a complexity score) gets the
// smallest instance of its schema as its text.
func writeGemini(w http.ResponseWriter, stream, sse bool, model, uid, turn string, calls []any, genConfig gjson.Result) {
	text := sideText
	if genConfig.Get("responseMimeType").String() == "application/json" {
		schema := genConfig.Get("responseJsonSchema")
		if !schema.Exists() {
			schema = genConfig.Get("responseSchema")
		}
		text = mustJSON(schemaInstance(schema))
	}
	switch turn {
	case answerRead:
		text = "I'll read the notes first."
	case answerDestroy:
		text = "Now I'll clean up the scratch directory."
	case answerFinal:
		text = finalText
	}
	chunk := func(parts []any, finish bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{"candidates": []any{cand},
			"usageMetadata": map[string]any{"promptTokenCount": 12, "candidatesTokenCount": 8, "totalTokenCount": 20},
			"modelVersion":  model, "responseId": "resp_" + uid}
	}
	if !stream {
		parts := append([]any{map[string]any{"text": text}}, calls...)
		writeJSON(w, http.StatusOK, mustJSON(chunk(parts, true)))
		return
	}
	var chunks []map[string]any
	for _, p := range split3(text) {
		chunks = append(chunks, chunk([]any{map[string]any{"text": p}}, false))
	}
	if len(calls) > 0 {
		// Each call in a chunk of its own, the last one with the finish reason.
		for i, c := range calls {
			chunks = append(chunks, chunk([]any{c}, i == len(calls)-1))
		}
	} else {
		chunks[len(chunks)-1] = chunk([]any{map[string]any{"text": split3(text)[len(split3(text))-1]}}, true)
	}
	if !sse {
		writeJSON(w, http.StatusOK, mustJSON(chunks))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\r\n\r\n", mustJSON(c))
		if fl != nil {
			fl.Flush()
		}
	}
}

// schemaInstance is the smallest value a JSON schema (or the Gemini API's OpenAPI subset,
// upper-case types) accepts: every property of an object, the first value of an enum,
// the low bound of a number.
func schemaInstance(schema gjson.Result) any {
	if e := schema.Get("enum"); e.IsArray() && len(e.Array()) > 0 {
		return e.Array()[0].Value()
	}
	switch strings.ToLower(schema.Get("type").String()) {
	case "object", "":
		out := map[string]any{}
		schema.Get("properties").ForEach(func(k, v gjson.Result) bool {
			out[k.String()] = schemaInstance(v)
			return true
		})
		return out
	case "array":
		return []any{}
	case "string":
		return "scripted"
	case "number", "integer":
		if m := schema.Get("minimum"); m.Exists() {
			return m.Num
		}
		return 1
	case "boolean":
		return false
	}
	return nil
}
