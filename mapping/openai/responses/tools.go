package responses

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// Tool items the client runs. Besides function_call, the Responses API has
// item types for tools whose calls the agent executes itself: custom (freeform) tools —
// Codex declares apply_patch as one —, the local shell and shell tools, apply_patch and
// computer use. Each call is one tool_call part, so that tool.before judges it
// (AHP-TB-001: a tool call is described before it runs; AHP-DEC-002: a denied one is not
// run — here, removed from the response), and each output is a role-tool message, so that
// tool.after and model.request.before see the result (AHP-CONTENT-001: structured data
// serialized into text). The canonical tool name and input of each type:
//
//	function_call     name: its name          input: the parsed arguments object
//	custom_tool_call  name: its name          input: {"input": <the freeform input string>}
//	local_shell_call  name: "local_shell"     input: {"command": <argv as one shell-quoted line>,
//	                                                   "argv": action.command, ...the other members
//	                                                   of action but "type" (env, working_directory,
//	                                                   timeout_ms, user)}
//	shell_call        name: "shell"           input: {"command": <action.commands joined by "\n">,
//	                                                   "commands": action.commands, ...the other
//	                                                   members of action (max_output_length,
//	                                                   timeout_ms)}
//	apply_patch_call  name: "apply_patch"     input: the operation object as it is ({"type":
//	                                                   "create_file"|"update_file"|"delete_file",
//	                                                   "path", "diff"})
//	computer_call     name: "computer"        input: {"action": ..., "actions": ...} (those present)
//
// The "command" string is what makes a tools rule over the input JSON text (inputPattern,
// or the destructive list's patterns over every string) see a command line: argv
// ["rm", "-rf", "/"] reads "rm -rf /", and ["bash", "-lc", "rm -rf /"] reads
// "bash -lc 'rm -rf /'".
//
// modify(input) is written back onto the native item, every other member kept byte for
// byte: custom — input (and name); local_shell — argv when it changed, else the command
// line split into words as a POSIX shell would (quotes and backslashes; nothing expanded);
// shell — commands when they changed, else the command text as one command; the other
// action members set or removed as the input has them; apply_patch — operation;
// computer — action and actions. The tools without a name of their own keep their
// canonical name: renaming them cannot be written.
//
// shell_call items that run in a provider container (environment type
// "container_reference") are hosted tools in a response: the provider has run them by the
// time the client sees them, so like web_search_call they pass through there; in a
// request's history they are calls and results like the others.

// callTools maps each call item type to its canonical tool name; "" takes the item's own
// name.
var callTools = map[string]string{
	"function_call":    "",
	"custom_tool_call": "",
	"local_shell_call": "local_shell",
	"shell_call":       "shell",
	"apply_patch_call": "apply_patch",
	"computer_call":    "computer",
}

// outputCalls maps each output item type to the call item type it answers.
var outputCalls = map[string]string{
	"function_call_output":    "function_call",
	"custom_tool_call_output": "custom_tool_call",
	"local_shell_call_output": "local_shell_call",
	"shell_call_output":       "shell_call",
	"apply_patch_call_output": "apply_patch_call",
	"computer_call_output":    "computer_call",
}

// isCallType reports whether typ is a call item type.
func isCallType(typ string) bool { _, ok := callTools[typ]; return ok }

// isOutputType reports whether typ is the output item type of a call.
func isOutputType(typ string) bool { _, ok := outputCalls[typ]; return ok }

// clientCall reports whether an output item of a response is a call the client will run:
// a call item type, except a shell call in a provider container, which has already run.
func clientCall(it gjson.Result) bool {
	typ := it.Get("type").String()
	if !isCallType(typ) {
		return false
	}
	return typ != "shell_call" || it.Get("environment.type").String() != "container_reference"
}

// callInput reads the canonical tool name and input (normalized JSON) of a call item. gap,
// when not "", says what of the call the input cannot carry.
func callInput(it gjson.Result, typ, callID string) (name, input, gap string, err error) {
	mapping.NoteCallDecode()
	name = callTools[typ]
	switch typ {
	case "function_call":
		name = it.Get("name").String()
		var ok bool
		if input, ok, err = oaiwire.ParseArguments(it.Get("arguments")); err != nil {
			return "", "", "", fmt.Errorf("function_call %s: %w", callID, err)
		} else if !ok {
			gap = "tool call " + callID + " arguments not a JSON object"
		}
	case "custom_tool_call":
		name = it.Get("name").String()
		in := it.Get("input")
		if in.Exists() && in.Type != gjson.String && in.Type != gjson.Null {
			return "", "", "", fmt.Errorf("custom_tool_call %s: input is not a string", callID)
		}
		input = `{"input":` + mapping.Quote(in.Str) + `}`
	case "local_shell_call", "shell_call":
		action := it.Get("action")
		if !action.IsObject() {
			return name, "{}", "tool call " + callID + " action not a JSON object", nil
		}
		input = shellInput(action, typ == "shell_call")
	case "apply_patch_call":
		op := it.Get("operation")
		if !op.IsObject() {
			return name, "{}", "tool call " + callID + " operation not a JSON object", nil
		}
		input = op.Raw
	case "computer_call":
		b := []byte{'{'}
		for _, f := range computerMembers {
			if v := it.Get(f); v.Exists() {
				if len(b) > 1 {
					b = append(b, ',')
				}
				b = append(mapping.AppendQuote(b, f), ':')
				b = append(b, v.Raw...)
			}
		}
		input = string(append(b, '}'))
	}
	if name == "" {
		return "", "", "", fmt.Errorf("%s %s without a name", typ, callID)
	}
	return name, oaiwire.NormalizeJSON(input), gap, nil
}

// computerMembers are the members of a computer_call that its canonical input carries.
var computerMembers = [...]string{"action", "actions"}

// shellInput builds the canonical input of a local_shell_call (argv in action.command) or
// a shell_call (action.commands): the command text first, then the native list, then
// every other member of the action except its constant type.
func shellInput(action gjson.Result, multi bool) string {
	listKey, canonKey := "command", "argv"
	if multi {
		listKey, canonKey = "commands", "commands"
	}
	list := action.Get(listKey)
	b := []byte(`{"command":`)
	switch {
	case list.Type == gjson.String: // not the documented shape; taken as the command line
		b = append(b, list.Raw...)
	case multi:
		b = mapping.AppendQuote(b, joinCommands(list))
	default:
		b = mapping.AppendQuote(b, quoteArgv(list))
	}
	if list.IsArray() {
		b = append(b, `,"`+canonKey+`":`...)
		b = append(b, list.Raw...)
	}
	action.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "type" && k.Str != listKey && k.Str != "command" && k.Str != canonKey {
			b = append(b, ',')
			b = append(b, k.Raw...)
			b = append(b, ':')
			b = append(b, v.Raw...)
		}
		return true
	})
	return string(append(b, '}'))
}

// joinCommands joins shell_call commands, one per line.
func joinCommands(list gjson.Result) string {
	var b strings.Builder
	for i, c := range arrayOf(list) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(stringOrRaw(c))
	}
	return b.String()
}

// quoteArgv writes an argv as one POSIX shell command line: each word as it is when it
// holds only characters a shell leaves alone, otherwise in single quotes.
func quoteArgv(list gjson.Result) string {
	var b strings.Builder
	for i, w := range arrayOf(list) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(stringOrRaw(w)))
	}
	return b.String()
}

func stringOrRaw(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}

// shellQuote quotes one word for a POSIX shell.
func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return w
}

// shellSplit splits a command line into words as a POSIX shell does, without any
// expansion: blanks separate words; single quotes keep everything literally; double quotes
// keep everything but a backslash before $ ` " \ or a newline; an unquoted backslash keeps
// the next character (and removes a newline). It fails on an unterminated quote.
func shellSplit(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
				}
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] != '\n' {
						w.WriteByte(s[i])
					}
					continue
				}
				w.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("unterminated double quote")
			}
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// writeCall writes an edited canonical call (name, normalized input args) back onto the
// native call item base of type typ whose decoded input was orig. Only what changed is set.
func writeCall(base, typ, name, origInput, args string) (string, error) {
	in := gjson.Parse(args)
	if want := callTools[typ]; want != "" && name != want {
		return "", fmt.Errorf("a %s item is the %s tool; it cannot be renamed %q", typ, want, name)
	}
	switch typ {
	case "function_call":
		return patch(base, "name", mapping.Quote(name), "arguments", mapping.Quote(args))
	case "custom_tool_call":
		s := in.Get("input")
		if s.Type != gjson.String {
			return "", fmt.Errorf("a custom tool call needs input {\"input\": string}")
		}
		return patch(base, "name", mapping.Quote(name), "input", s.Raw)
	case "local_shell_call", "shell_call":
		action := gjson.Get(base, "action").Raw
		if !gjson.Get(base, "action").IsObject() {
			// An item without an action decoded to input {} (with a gap): the edit is
			// the whole action.
			action = `{}`
			if typ == "local_shell_call" {
				action = `{"type":"exec"}`
			}
		}
		raw, err := writeShellAction(action, typ == "shell_call", gjson.Parse(origInput), in)
		if err != nil {
			return "", err
		}
		return sjson.SetRaw(base, "action", raw)
	case "apply_patch_call":
		if t := in.Get("type"); t.Type != gjson.String || t.Str == "" {
			return "", fmt.Errorf("an apply_patch operation needs a type")
		}
		return sjson.SetRaw(base, "operation", args)
	case "computer_call":
		raw := base
		var err error
		in.ForEach(func(k, v gjson.Result) bool {
			if k.Str != "action" && k.Str != "actions" {
				err = fmt.Errorf("a computer call input carries action and actions only, not %q", k.Str)
			}
			return err == nil
		})
		for _, f := range computerMembers {
			if err != nil {
				break
			}
			v, was := in.Get(f), gjson.Get(origInput, f)
			switch {
			case v.Exists() && v.Raw != was.Raw:
				raw, err = sjson.SetRaw(raw, f, v.Raw)
			case !v.Exists() && gjson.Get(raw, f).Exists():
				raw, err = sjson.Delete(raw, f)
			}
		}
		return raw, err
	}
	return "", fmt.Errorf("cannot write a call of type %q", typ)
}

// writeShellAction writes an edited shell input onto the native action.
func writeShellAction(action string, multi bool, orig, in gjson.Result) (string, error) {
	listKey, canonKey := "command", "argv"
	if multi {
		listKey, canonKey = "commands", "commands"
	}
	list, cmd := in.Get(canonKey), in.Get("command")
	var value string
	switch {
	case list.Exists() && list.Raw != orig.Get(canonKey).Raw:
		if !allStrings(list) {
			return "", fmt.Errorf("%s must be an array of strings", canonKey)
		}
		value = list.Raw
	case cmd.Exists() && cmd.Raw != orig.Get("command").Raw:
		if cmd.Type != gjson.String {
			return "", fmt.Errorf("command must be a string")
		}
		switch {
		case gjson.Get(action, listKey).Type == gjson.String:
			value = cmd.Raw
		case multi:
			// The edited text runs as one command: the lines of a script run in order, as
			// the commands did.
			value = "[" + cmd.Raw + "]"
		default:
			words, err := shellSplit(cmd.Str)
			if err != nil {
				return "", fmt.Errorf("command: %w", err)
			}
			b := []byte{'['}
			for i, w := range words {
				if i > 0 {
					b = append(b, ',')
				}
				b = mapping.AppendQuote(b, w)
			}
			value = string(append(b, ']'))
		}
	case !list.Exists() && !cmd.Exists():
		return "", fmt.Errorf("a shell call input needs command or %s", canonKey)
	}
	var err error
	if value != "" {
		if action, err = sjson.SetRaw(action, listKey, value); err != nil {
			return "", err
		}
	}
	skip := func(k string) bool { return k == "command" || k == canonKey || k == "type" || k == listKey }
	in.ForEach(func(k, v gjson.Result) bool {
		if !skip(k.Str) && v.Raw != orig.Get(gjsonKey(k.Str)).Raw {
			action, err = sjson.SetRaw(action, gjsonKey(k.Str), v.Raw)
		}
		return err == nil
	})
	if err != nil {
		return "", err
	}
	orig.ForEach(func(k, _ gjson.Result) bool {
		if !skip(k.Str) && !in.Get(gjsonKey(k.Str)).Exists() {
			action, err = sjson.Delete(action, gjsonKey(k.Str))
		}
		return err == nil
	})
	return action, err
}

// allStrings reports whether v is an array of strings.
func allStrings(v gjson.Result) bool {
	if !v.IsArray() {
		return false
	}
	ok := true
	v.ForEach(func(_, e gjson.Result) bool {
		ok = e.Type == gjson.String
		return ok
	})
	return ok
}

// gjsonKey escapes a member name for use as a gjson/sjson path of one component.
func gjsonKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		switch c := k[i]; c {
		case '\\', '.', '*', '?', '|', '#', '@', '!', '=', '<', '>', '%', '"', ':':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// --- outputs whose shape is not a function_call_output's ---

// shellOutputText is the text of a shell_call_output's output chunks: each non-empty
// stdout and stderr in order, each starting on a new line. A tool result is one text part
// (the proxy's tool.after rewrite keeps one), and plain text rather than the JSON of the
// chunks, so that a scanner sees line starts and word boundaries as the model does.
func shellOutputText(v gjson.Result) string {
	var b strings.Builder
	for _, e := range arrayOf(v) {
		for _, f := range [...]string{"stdout", "stderr"} {
			s := e.Get(f)
			if s.Type != gjson.String || s.Str == "" {
				continue
			}
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
				b.WriteByte('\n')
			}
			b.WriteString(s.Str)
		}
	}
	return b.String()
}

// writeShellOutput writes edited text onto a shell_call_output's output chunks: into the
// one stream that had text when there was one (or the first stdout when none had), else
// into the first that had text with the others emptied — the model then reads the edited
// text as it was scanned. Outcomes and unknown members stay.
func writeShellOutput(raw, text string) (string, error) {
	out := gjson.Get(raw, "output")
	chunks := arrayOf(out)
	if len(chunks) == 0 {
		if text == "" {
			return raw, nil
		}
		return "", fmt.Errorf("a shell_call_output without output chunks cannot take text")
	}
	type field struct {
		chunk int
		name  string
	}
	var had []field
	for k, e := range chunks {
		for _, f := range [...]string{"stdout", "stderr"} {
			if s := e.Get(f); s.Type == gjson.String && s.Str != "" {
				had = append(had, field{k, f})
			}
		}
	}
	if len(had) == 0 {
		had = []field{{0, "stdout"}}
	}
	entries := make([]string, len(chunks))
	for k, e := range chunks {
		entries[k] = e.Raw
		if !e.IsObject() {
			return "", fmt.Errorf("shell_call_output chunk %d is not an object", k)
		}
	}
	var err error
	for i, f := range had {
		v := `""`
		if i == 0 {
			v = mapping.Quote(text)
		}
		if entries[f.chunk], err = sjson.SetRaw(entries[f.chunk], f.name, v); err != nil {
			return "", err
		}
	}
	return sjson.SetRaw(raw, "output", "["+strings.Join(entries, ",")+"]")
}
