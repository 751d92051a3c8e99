package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLinkTimeVersion: the variable that -ldflags "-X main.version=..." sets (Dockerfile,
// docs/user-guide.md) is the version `hookproxy version` prints.
func TestLinkTimeVersion(t *testing.T) {
	version = "v1.2.3-link-test"
	t.Cleanup(func() { version = "" })
	var out, errOut bytes.Buffer
	if code := hookproxy([]string{"version"}, strings.NewReader(""), &out, &errOut); code != 0 || out.String() != "hookproxy v1.2.3-link-test\n" {
		t.Fatalf("hookproxy version: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
