package policies

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// deepInput is a tool input with the command beside an array nested depth levels deep
// (the object itself is one more level).
func deepInput(command string, depth int) string {
	return `{"command":` + jsonQuote(command) + `,"pad":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestToolsReadEveryDepthTheCodecsAccept: a tool input nested as deep as encoding/json
// (and so the codecs' json.Valid) accepts is read by the policies, so an array nested
// past any shallower bound beside the command cannot switch the rules off. Control: the
// client's own parser reads the command from the same bytes, and one level deeper is
// not JSON the codecs accept as arguments at all.
func TestToolsReadEveryDepthTheCodecsAccept(t *testing.T) {
	rules := map[string]string{
		"argument": `{"deny": [{"tool": "Bash", "argument": "command", "pattern": "rm -rf", "reason": "no"}]}`,
		"command":  `{"deny": [{"tool": "Bash", "command": "rm", "flags": ["-r|-R|--recursive"], "reason": "no"}]}`,
	}
	deepest := jsontext.MaxNesting - 1 // the enclosing object is one level
	for name, cfg := range rules {
		p := toolsFromJSON(t, cfg)
		for _, depth := range []int{8, 600, deepest} {
			in := deepInput("rm -rf /", depth)
			// Control: what the client parses holds the command.
			var client map[string]any
			if err := json.Unmarshal([]byte(in), &client); err != nil || client["command"] != "rm -rf /" {
				t.Fatalf("control: the client does not read the command at depth %d: %v", depth, err)
			}
			ev := toolBeforeEvent("Bash", in)
			res, _ := run(t, p, ev, proxyCaps(ev.Type))
			if e := onlyEffect(t, res, ahp.EffectDeny); e.Code != "hookproxy.tools.denied" {
				t.Fatalf("%s rule, depth %d: %+v", name, depth, e)
			}
			// Control: the rule is about the command, not the nesting.
			ev = toolBeforeEvent("Bash", deepInput("ls", depth))
			res, _ = run(t, p, ev, proxyCaps(ev.Type))
			noEffects(t, res)
		}
	}
	if json.Valid([]byte(deepInput("rm -rf /", deepest+1))) {
		t.Fatalf("encoding/json accepts more than %d levels: the policies' bound must follow it", jsontext.MaxNesting)
	}
}
