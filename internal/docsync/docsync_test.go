package docsync

import (
	"strings"
	"testing"
)

func TestReplaceAndSection(t *testing.T) {
	doc := []byte("intro\n<!-- generated:x:begin -->\nold\n<!-- generated:x:end -->\nafter\n")
	out, err := Replace(doc, "x", "new line")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "intro\n<!-- generated:x:begin -->\nnew line\n<!-- generated:x:end -->\nafter\n" {
		t.Fatalf("replaced: %q", out)
	}
	if s, err := Section(out, "x"); err != nil || s != "new line\n" {
		t.Fatalf("section %q %v", s, err)
	}
	for _, bad := range []string{"no markers", "<!-- generated:x:end -->\n<!-- generated:x:begin -->\n"} {
		if _, err := Section([]byte(bad), "x"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}
