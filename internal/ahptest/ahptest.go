package ahptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// EnvSharedDir overrides the search for the shared folder (the directory that holds ahp/).
const EnvSharedDir = "HOOKPROXY_SHARED_DIR"

// schemaBase is the $id prefix of every draft schema; the schemas $ref each other relative to it.
const schemaBase = "https://agenthooksprotocol.org/schemas/draft/"

// EnvRequireShared makes a missing shared folder fail the tests instead of skipping the
// protocol checks; .ci/run sets it whenever the folder is beside the checkout. A CI
// environment (CI set, as CI services set it) requires the folder too.
const EnvRequireShared = "HOOKPROXY_REQUIRE_SHARED"

// sharedRequired reports whether a missing shared folder is a failure.
func sharedRequired() bool {
	if os.Getenv(EnvRequireShared) == "1" {
		return true
	}
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// SharedDir returns the absolute path of the shared folder (the one holding ahp/schema/draft).
// It walks up from the working directory until <dir>/../shared/ahp/schema/draft exists, so it
// works from any package directory of the repository. When none is found the test is
// skipped, saying so — a clone on its own still passes its test command — unless
// HOOKPROXY_REQUIRE_SHARED=1 or CI is set, which fails it: where the folder should be, a missing one
// must never turn into silently skipped protocol checks.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, err := FindSharedDir()
	if err != nil {
		if sharedRequired() {
			t.Fatalf("ahptest: %v", err)
		}
		t.Skipf("ahptest: protocol checks skipped: %v (place the protocol folder at ../shared, or set %s)", err, EnvSharedDir)
	}
	return dir
}

// FindSharedDir is SharedDir without a testing.TB, for helpers that report errors themselves.
func FindSharedDir() (string, error) {
	if env := os.Getenv(EnvSharedDir); env != "" {
		abs, err := filepath.Abs(env)
		if err != nil {
			return "", fmt.Errorf("%s: %w", EnvSharedDir, err)
		}
		if !isDir(filepath.Join(abs, "ahp", "schema", "draft")) {
			return "", fmt.Errorf("%s=%s has no ahp/schema/draft", EnvSharedDir, env)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		cand := filepath.Join(dir, "..", "shared")
		if isDir(filepath.Join(cand, "ahp", "schema", "draft")) {
			return filepath.Clean(cand), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no ../shared/ahp/schema/draft above %s (set %s)", ErrNotFound, wd, EnvSharedDir)
		}
		dir = parent
	}
}

// AHPDir returns <shared>/ahp.
func AHPDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(SharedDir(t), "ahp")
}

// SchemaDir returns <shared>/ahp/schema/draft.
func SchemaDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(AHPDir(t), "schema", "draft")
}

// FixturesDir returns <shared>/ahp/fixtures/draft.
func FixturesDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(AHPDir(t), "fixtures", "draft")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// compiled is the process-wide schema cache. One compiler holds every schema document; it
// is not safe for concurrent use, so compilation is serialized. A compiled *Schema is
// read-only and may be used by parallel tests.
var compiled struct {
	sync.Mutex
	dir      string
	compiler *jsonschema.Compiler
	loadErr  error
	schemas  map[string]*jsonschema.Schema
}

// Schema returns the compiled schema of one file of the schema directory (for example
// "intercept-request.schema.json"), compiling and caching it on first use.
func Schema(t testing.TB, schemaFile string) *jsonschema.Schema {
	t.Helper()
	sch, err := compile(SchemaDir(t), schemaFile)
	if err != nil {
		t.Fatalf("ahptest: %v", err)
	}
	return sch
}

func compile(dir, schemaFile string) (*jsonschema.Schema, error) {
	compiled.Lock()
	defer compiled.Unlock()
	if compiled.compiler == nil || compiled.dir != dir {
		compiled.dir = dir
		compiled.schemas = map[string]*jsonschema.Schema{}
		compiled.compiler, compiled.loadErr = newCompiler(dir)
	}
	if compiled.loadErr != nil {
		return nil, compiled.loadErr
	}
	name := strings.TrimPrefix(filepath.ToSlash(schemaFile), "schema/draft/")
	if sch, ok := compiled.schemas[name]; ok {
		return sch, nil
	}
	sch, err := compiled.compiler.Compile(schemaBase + name)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	compiled.schemas[name] = sch
	return sch, nil
}

// newCompiler loads every *.json schema of dir under its own $id so that relative $refs
// between the documents resolve without any network access.
func newCompiler(dir string) (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // "uri" and "date-time" are part of the protocol's rules, not hints
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || e.Name() == "manifest.json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		id := schemaBase + e.Name()
		if m, ok := doc.(map[string]any); ok {
			if s, ok := m["$id"].(string); ok && s != "" {
				id = s
			}
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no schema in %s", dir)
	}
	return c, nil
}

// Validate validates doc (JSON bytes) against the named schema file of the draft schema
// directory. It returns nil when valid, and an error describing the violation (or the JSON
// syntax error) otherwise. Schema loading problems fail the test instead, since they say
// nothing about doc.
func Validate(t testing.TB, schemaFile string, doc []byte) error {
	t.Helper()
	sch := Schema(t, schemaFile)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}

// ValidIfAvailable is Validate for behavioural tests that also check the frames they
// saw: without the shared folder (and without HOOKPROXY_REQUIRE_SHARED) the schema check
// is skipped, with a log line, and the test goes on instead of being skipped whole.
func ValidIfAvailable(t testing.TB, schemaFile string, doc []byte) error {
	t.Helper()
	if _, err := FindSharedDir(); err != nil && !sharedRequired() {
		t.Logf("ahptest: schema validation of %s skipped: %v", schemaFile, err)
		return nil
	}
	return Validate(t, schemaFile, doc)
}

// Manifest is fixtures/draft/manifest.json: the expected outcome of every golden fixture.
type Manifest struct {
	Status          string `json:"status"`
	ProtocolVersion string `json:"protocolVersion"`
	Cases           []Case `json:"cases"`
}

// Case is one fixture of the manifest. Path and Schema are relative to the ahp folder
// (for example "fixtures/draft/http/deny-response.valid.json").
type Case struct {
	ID                      string          `json:"id"`
	Path                    string          `json:"path"`
	Binding                 string          `json:"binding"`
	Schema                  string          `json:"schema"`
	EventSchema             string          `json:"eventSchema,omitempty"`
	ExpectedValid           bool            `json:"expectedValid"`
	AggregateExpectedValid  *bool           `json:"aggregateExpectedValid,omitempty"`
	ContextualExpectedValid *bool           `json:"contextualExpectedValid,omitempty"`
	EditContext             json.RawMessage `json:"editContext,omitempty"`
	Requirements            []string        `json:"requirements"`
	SHA256                  string          `json:"sha256"`
}

// SchemaFile is the case's schema file name without its directory.
func (c *Case) SchemaFile() string { return filepath.Base(c.Schema) }

// Expected is the outcome a complete implementation must reach: the contextual verdict
// when the case has one, else the aggregate (cross-field) verdict, else the schema verdict.
func (c *Case) Expected() bool {
	switch {
	case c.ContextualExpectedValid != nil:
		return *c.ContextualExpectedValid
	case c.AggregateExpectedValid != nil:
		return *c.AggregateExpectedValid
	default:
		return c.ExpectedValid
	}
}

// WireExpected is the outcome without edit context: aggregate, else schema verdict.
func (c *Case) WireExpected() bool {
	if c.AggregateExpectedValid != nil {
		return *c.AggregateExpectedValid
	}
	return c.ExpectedValid
}

// LoadManifest reads and decodes fixtures/draft/manifest.json.
func LoadManifest(t testing.TB) *Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(FixturesDir(t), "manifest.json"))
	if err != nil {
		t.Fatalf("ahptest: %v", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("ahptest: manifest.json: %v", err)
	}
	if len(m.Cases) == 0 {
		t.Fatalf("ahptest: manifest.json has no cases")
	}
	return &m
}

// ReadCase returns the bytes of a manifest case's fixture file.
func ReadCase(t testing.TB, c *Case) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(AHPDir(t), filepath.FromSlash(c.Path)))
	if err != nil {
		t.Fatalf("ahptest: case %s: %v", c.ID, err)
	}
	return data
}

// Fixtures lists the absolute paths of the files of one fixture sub-folder ("http",
// "stdio", "registration"), sorted.
func Fixtures(t testing.TB, sub string) []string {
	t.Helper()
	dir := filepath.Join(FixturesDir(t), sub)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ahptest: %v", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("ahptest: no fixtures in %s", dir)
	}
	return out
}

// ErrNotFound is wrapped by FindSharedDir when no shared folder is found.
var ErrNotFound = errors.New("ahptest: shared folder not found")
