package registration

import (
	"fmt"
	"strings"
)

// Problem is one finding about a registration document. Path is a JSON path into the
// document such as hooks[1].subscriptions[0].content ("$" is the document itself).
// Warnings describe the environment (a command missing from PATH, an unset variable, an
// event hookproxy never emits): they are reported at load and never make a document invalid.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Warning bool   `json:"warning,omitempty"`
}

func (p Problem) String() string {
	if p.Warning {
		return "warning: " + p.Path + ": " + p.Message
	}
	return p.Path + ": " + p.Message
}

// Error is returned when a document is invalid. It lists every error-level problem, so an
// operator fixes the whole document in one pass instead of one mistake per run.
type Error struct {
	// File is the document's path ("" when parsed from bytes).
	File string
	// Problems are the error-level problems, in document order.
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	name := "registration"
	if e.File != "" {
		name = "registration " + e.File
	}
	if len(e.Problems) == 1 {
		fmt.Fprintf(&b, "%s: %s", name, e.Problems[0])
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %d problems:", name, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// HasErrors reports whether problems holds at least one error-level problem.
func HasErrors(problems []Problem) bool {
	for _, p := range problems {
		if !p.Warning {
			return true
		}
	}
	return false
}

// PolicyConfigError may be returned by Options.CheckPolicyConfig to place a problem at a
// JSON path inside the policy's config object: Path "$.deny[0].pattern" is reported at
// hooks[i].transport.config.deny[0].pattern.
type PolicyConfigError struct {
	Path   string
	Reason string
}

func (e *PolicyConfigError) Error() string { return e.Path + ": " + e.Reason }
