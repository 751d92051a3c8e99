package registration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsonpath"
)

// Options configure the hookproxy-specific and environment-dependent rules of validation.
// The zero value validates a portable document for hookproxy with no built-in policy known.
type Options struct {
	// Policies is the set of built-in policy names an in_process transport may name.
	Policies map[string]bool
	// CheckPolicyConfig, when set, validates the config of an in_process backend; its error
	// is reported at hooks[i].transport.config.
	CheckPolicyConfig func(name string, cfg json.RawMessage) error
	// Emitted is the set of events the harness emits (intercept or observe). A subscription
	// that selects none of them is reported as a warning. nil means Emitted.
	Emitted map[string]bool
	// NoEnvironmentChecks turns off the checks that depend on the local machine (stdio
	// command on PATH, tokenEnv variable set, secret files) and on what this hookproxy can
	// honour beyond the portable format (secret-reference schemes, oauth flows, managed
	// policy), e.g. when validating a portable document or for another host.
	NoEnvironmentChecks bool
	// LookPath and LookupEnv replace exec.LookPath and os.LookupEnv (tests).
	LookPath  func(file string) (string, error)
	LookupEnv func(key string) (string, bool)
}

// Emitted is the set of events hookproxy itself produces: the six boundaries it can
// intercept and the three it only observes. A registration may still name
// other events — they are valid AHP — but a subscription to them is never called.
var Emitted = map[string]bool{
	ahp.EventTurnStart:          true,
	ahp.EventModelRequestBefore: true,
	ahp.EventModelResponseAfter: true,
	ahp.EventToolBefore:         true,
	ahp.EventToolAfter:          true,
	ahp.EventTurnFinishBefore:   true,
	ahp.EventTurnEnd:            true,
	ahp.EventModelError:         true,
	ahp.EventHookFailure:        true,
}

// Load reads and parses the registration document at path. The returned error is an
// *Error naming the file when the document is invalid.
func Load(path string, opts Options) (*Document, []Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("registration: %w", err)
	}
	doc, problems, err := Parse(data, opts)
	var perr *Error
	if errors.As(err, &perr) {
		perr.File = path
	}
	return doc, problems, err
}

// Parse validates a registration document against every rule of the draft (AHP-REG-001,
// AHP-REG-002; AHP spec, capability-auth.md "Registration") plus hookproxy's in_process
// transport, and decodes it. problems holds every finding, warnings included, in document
// order. err is an *Error when at least one problem is an error; the document is then nil,
// because an invalid interceptor configuration must be rejected as a whole rather than partly
// used (AHP-REG-001).
//
// Validation runs on a generic decoding first, so that a missing member, a zero value and
// a foreign key stay distinguishable; only a valid document is decoded into Document.
func Parse(data []byte, opts Options) (*Document, []Problem, error) {
	c := &checker{opts: opts}
	if c.opts.Emitted == nil {
		c.opts.Emitted = Emitted
	}
	if c.opts.LookPath == nil {
		c.opts.LookPath = exec.LookPath
	}
	if c.opts.LookupEnv == nil {
		c.opts.LookupEnv = os.LookupEnv
	}

	root, err := decodeGeneric(data)
	if err != nil {
		c.errf("$", "%v", err)
		return nil, c.problems, &Error{Problems: c.errors()}
	}
	c.duplicateKeys(data)
	c.document(root)
	if errs := c.errors(); len(errs) > 0 {
		return nil, c.problems, &Error{Problems: errs}
	}

	// The generic tree is valid; re-encode it with integral numbers normalized (1.0 is an
	// integer in JSON Schema 2020-12 but not to encoding/json) and decode the typed form.
	norm, err := json.Marshal(normalizeNumbers(root))
	if err != nil {
		return nil, c.problems, fmt.Errorf("registration: %w", err)
	}
	var doc Document
	if err := json.Unmarshal(norm, &doc); err != nil {
		// Unreachable for a document that passed validation; reported, never panicked.
		c.errf("$", "cannot decode: %v", err)
		return nil, c.problems, &Error{Problems: c.errors()}
	}
	return &doc, c.problems, nil
}

// decodeGeneric decodes exactly one JSON value with numbers kept as json.Number.
func decodeGeneric(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonSyntaxError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: unexpected data after the document")
	}
	return v, nil
}

// jsonSyntaxError adds a line and column to a decoding error, which is what an operator
// editing the file needs.
func jsonSyntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, se.Offset)
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col = 1, 1
	for _, b := range data[:off] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// normalizeNumbers rewrites integral json.Numbers ("1.0", "1e3") into plain integers.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case json.Number:
		if n, ok := jsonpath.Int64(x); ok {
			return json.Number(fmt.Sprint(n))
		}
	}
	return v
}

// commandPath resolves the path a stdio command is launched from, for the existence check.
func commandPath(command, cwd string) string {
	if !filepath.IsAbs(command) && cwd != "" {
		return filepath.Join(cwd, command)
	}
	return command
}
