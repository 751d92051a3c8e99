package chain_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// editContext is the pending boundary of a contextual-* case (manifest editContext).
type editContext struct {
	Event   string                     `json:"event"`
	Current map[string]json.RawMessage `json:"current"`
	Mode    string                     `json:"mode"`
	Action  string                     `json:"action"`
}

// TestConformanceFixtures runs every case of the AHP draft golden-fixture manifest through
// the code that handles it in hookproxy and compares the verdict with the manifest:
// registration documents through registration.Parse, intercept responses through
// chain.ValidateReply (with the case's edit context when it has one, else wire-level
// checks), and every other message through ahp.ValidateMessage. stdio fixtures must also be
// exactly one line (AHP-STDIO-001).
func TestConformanceFixtures(t *testing.T) {
	m := ahptest.LoadManifest(t)
	var unexpected []string
	checked, asExpected := 0, 0
	for i := range m.Cases {
		c := &m.Cases[i]
		data := ahptest.ReadCase(t, c)
		err := checkCase(c, data)
		checked++
		want := c.Expected()
		if (err == nil) == want {
			asExpected++
			continue
		}
		if want {
			unexpected = append(unexpected, fmt.Sprintf("%s: expected valid, refused: %v", c.ID, err))
		} else {
			unexpected = append(unexpected, fmt.Sprintf("%s: expected invalid, accepted", c.ID))
		}
	}
	fmt.Printf("AHP fixtures: %d checked, %d as expected\n", checked, asExpected)
	if checked != 150 {
		t.Errorf("checked %d cases, the draft manifest has 150", checked)
	}
	for _, u := range unexpected {
		t.Error(u)
	}
}

// checkCase returns nil when hookproxy accepts the fixture.
func checkCase(c *ahptest.Case, data []byte) error {
	if strings.HasSuffix(c.Path, ".jsonl") {
		// stdio binding: one JSON-RPC object on exactly one line (AHP-STDIO-001).
		if !isReply(c) {
			return ahp.ValidateStdioFrame(data)
		}
		body := bytes.TrimSuffix(data, []byte("\n"))
		if len(body) == 0 || bytes.ContainsAny(body, "\r\n") {
			return fmt.Errorf("stdio frame is not exactly one line")
		}
		data = body
	}
	switch {
	case c.SchemaFile() == "registration.schema.json":
		// Hermetic: the fixtures name commands and variables of another machine.
		_, _, err := registration.Parse(data, registration.Options{NoEnvironmentChecks: true})
		return err
	case isReply(c):
		rc := chain.ReplyContext{}
		if len(c.EditContext) > 0 {
			var ec editContext
			if err := json.Unmarshal(c.EditContext, &ec); err != nil {
				return fmt.Errorf("editContext: %v", err)
			}
			rc.EventType = ec.Event
			rc.Current = ec.Current
			rc.ElicitationMode = ec.Mode
			rc.ElicitationAction = ec.Action
		}
		_, err := chain.ValidateReply(data, rc)
		return err
	default:
		return ahp.ValidateMessage(data)
	}
}

// isReply reports whether the case is a hooks/intercept response, judged by the engine.
func isReply(c *ahptest.Case) bool {
	switch c.SchemaFile() {
	case "intercept-response.schema.json", "intercept-no-effect-response.schema.json", "intercept-deny-response.schema.json":
		return true
	}
	return false
}
