package policies

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

func kindsOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	slices.Sort(out)
	return out
}

// TestStandInsAreDetectedAsTheirKind: for every true positive of the secrets corpus, the
// capture's redacted copy holds none of the credential, and the replay's stand-in copy is
// detected again with exactly the original kinds, in a text part and in a tool input
// string. Control: the redacted copy itself is detected as nothing, so without stand-ins a
// replay would see no secret where the live chain saw one.
func TestStandInsAreDetectedAsTheirKind(t *testing.T) {
	d := defaultSecretScanner()
	for _, c := range readCorpus(t, "secrets", "positive.txt", true) {
		want := kindsOf(d.scanText(nil, c.text))
		text := c.text
		input, _ := json.Marshal(map[string]string{"command": text})
		ev := &ahp.Event{ID: "e1", Type: ahp.EventToolBefore, Tool: &ahp.Tool{Name: "Bash", Input: input},
			Items: []ahp.Message{{ID: "m1", Role: ahp.RoleUser, Parts: []ahp.Part{{ID: "p1", Kind: ahp.KindText, Text: &text}}}}}
		red := RedactedCopy(ev)
		redText := *red.Items[0].Parts[0].Text
		// The markers name the kind ("url_password" holds "pass"): look past them.
		bare := captureMarkerPattern.ReplaceAllString(redText+"\x00"+string(red.Tool.Input), "")
		for _, sp := range c.spans {
			if v := c.text[sp[0]:sp[1]]; strings.Contains(bare, v) {
				t.Errorf("%s: the redacted copy still holds %q", c, v)
			}
		}
		if got := kindsOf(d.scanText(nil, redText)); len(got) != 0 {
			t.Errorf("%s: control: the redacted copy is still detected as %v", c, got)
		}
		back := StandInCopy(red)
		if got := kindsOf(d.scanText(nil, *back.Items[0].Parts[0].Text)); !slices.Equal(got, want) {
			t.Errorf("%s: stand-in text detected as %v, want %v\n\t%q", c, got, want, *back.Items[0].Parts[0].Text)
		}
		var in map[string]string
		if err := json.Unmarshal(back.Tool.Input, &in); err != nil {
			t.Fatalf("%s: stand-in tool input is not JSON: %v", c, err)
		}
		if got := kindsOf(d.scanField(nil, "command", in["command"])); !slices.Equal(got, kindsOf(d.scanField(nil, "command", text))) {
			t.Errorf("%s: stand-in tool input detected as %v", c, got)
		}
		if *ev.Items[0].Parts[0].Text != c.text {
			t.Fatalf("%s: RedactedCopy modified its input", c)
		}
	}
}
