package ahp_test

import (
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/ahptest"
)

// replySchemas are validated by the engine's chain.ValidateReply against the pending
// boundary; ValidateMessage covers every other wire message of the manifest.
var replySchemas = map[string]bool{
	"intercept-response.schema.json":           true,
	"intercept-no-effect-response.schema.json": true,
	"intercept-deny-response.schema.json":      true,
	"registration.schema.json":                 true,
}

// validateFixture applies the binding: .jsonl fixtures are stdio frames.
func validateFixture(c *ahptest.Case, data []byte) error {
	if strings.HasSuffix(c.Path, ".jsonl") {
		return ahp.ValidateStdioFrame(data)
	}
	return ahp.ValidateMessage(data)
}

func TestMessageFixtures(t *testing.T) {
	m := ahptest.LoadManifest(t)
	checked, asExpected := 0, 0
	for i := range m.Cases {
		c := &m.Cases[i]
		if replySchemas[c.SchemaFile()] {
			continue
		}
		checked++
		err := validateFixture(c, ahptest.ReadCase(t, c))
		want := c.WireExpected()
		if (err == nil) == want {
			asExpected++
			continue
		}
		if want {
			t.Errorf("%s: valid fixture refused: %v", c.ID, err)
		} else {
			t.Errorf("%s: invalid fixture accepted", c.ID)
		}
	}
	t.Logf("message fixtures: %d checked, %d as expected", checked, asExpected)
	if checked != 108 {
		t.Errorf("checked %d message fixtures, want 108", checked)
	}
}
