package pinning

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

type corpusTool struct {
	Source      string          `json:"source"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Want        []string        `json:"want"`
}

func readCorpus(t *testing.T, path string) []corpusTool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusTool
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return out
}

// Every poisoned description of the corpus is caught with the kinds it was written to
// show; every clean real-world description — Claude Code's and Codex's own tools as they
// sent them to the imitation upstream of e2e/agents, the MCP reference servers' tools —
// and every hand-written near miss passes without a finding.
func TestPoisonCorpus(t *testing.T) {
	for _, c := range readCorpus(t, "testdata/poisoned.json") {
		got := Scan(Tool{Name: c.Name, Description: c.Description, Schema: c.InputSchema})
		if !slices.Equal(got, c.Want) {
			t.Errorf("poisoned %s: found %v, want %v", c.Name, got, c.Want)
		}
	}
	clean := append(readCorpus(t, "testdata/clean_agents.json"), readCorpus(t, "testdata/clean_reference.json")...)
	sources := map[string]int{}
	for _, c := range clean {
		sources[c.Source]++
		if got := Scan(Tool{Name: c.Name, Description: c.Description, Schema: c.InputSchema}); got != nil {
			t.Errorf("false positive on %s %s: %v", c.Source, c.Name, got)
		}
	}
	if len(sources) < 4 {
		t.Fatalf("the clean corpus covers %v only", sources)
	}
}
