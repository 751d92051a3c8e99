package testsupport

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// AgentHistory returns an Anthropic Messages request body of about size bytes shaped like a
// coding agent's (Claude Code's): a ~12 KB system prompt, ~35 KB of tool definitions, then
// turns of a short assistant text with a Read call and its ~1.6 KB tool result (file text
// full of \n and \t escapes), ending in the user's prompt. The same size gives the same
// bytes, so a benchmark can send "the same history again" as a new body.
func AgentHistory(size int) []byte {
	rng := rand.New(rand.NewPCG(7, 7))
	words := func(n int) string {
		var sb strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(historyWords[rng.IntN(len(historyWords))])
		}
		return sb.String()
	}
	var b strings.Builder
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":false,"system":[` +
		`{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude."},{"type":"text","text":`)
	b.WriteString(strconv.Quote("You are an interactive CLI tool that helps users with software engineering tasks.\n" + words(2000)))
	b.WriteString(`,"cache_control":{"type":"ephemeral"}}],"tools":[`)
	for i, name := range []string{"Task", "Bash", "Glob", "Grep", "LS", "ExitPlanMode", "Read", "Edit", "MultiEdit",
		"Write", "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell"} {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":%q,"description":%s,"input_schema":{"type":"object","properties":{`+
			`"command":{"type":"string","description":%s},"path":{"type":"string","description":"The absolute path"}},`+
			`"required":["command"],"additionalProperties":false}}`,
			name, strconv.Quote(fmt.Sprintf("Tool %d.\n", i)+words(300)), strconv.Quote(words(20)))
	}
	b.WriteString(`],"messages":[{"role":"user","content":[{"type":"text","text":`)
	b.WriteString(strconv.Quote("Please review the package in /repo/src and fix the failing test. " + words(60)))
	b.WriteString(`}]}`)
	for turn := 1; b.Len() < size-300; turn++ {
		id := fmt.Sprintf("toolu_%04d", turn)
		path := fmt.Sprintf("/repo/src/file_%d.go", turn)
		var out strings.Builder
		for i := 1; out.Len() < 1600; i++ {
			fmt.Fprintf(&out, "%6d\t%s(%s, %d) // %s\n", i, historyWords[rng.IntN(len(historyWords))],
				historyWords[rng.IntN(len(historyWords))], rng.IntN(1000), words(6))
		}
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":%s},`+
			`{"type":"tool_use","id":%q,"name":"Read","input":{"file_path":%q}}]}`,
			strconv.Quote("Let me read "+path+". "+words(20)), id, path)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%s}]}`,
			id, strconv.Quote(out.String()))
	}
	b.WriteString(`,{"role":"user","content":[{"type":"text","text":"go on","cache_control":{"type":"ephemeral"}}]}]}`)
	return []byte(b.String())
}

var historyWords = strings.Fields(`the a function returns error value when nil config request handler
	server client buffer stream read write close open file path line test case check index slice map
	string int byte struct field method interface package import go module build run result output
	input message token session cache policy rule match pattern scan secret key value header body`)
