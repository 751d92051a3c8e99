package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvConfig names the configuration file used when no --config flag is given.
const EnvConfig = "HOOKPROXY_CONFIG"

// Problem is one finding about a configuration file, at a path such as routes[1].prefix.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Error lists every problem of a configuration file, so an operator fixes them in one pass.
type Error struct {
	File     string // "" for the embedded default or bytes
	Problems []Problem
}

func (e *Error) Error() string {
	name := "config"
	if e.File != "" {
		name = "config " + e.File
	}
	if len(e.Problems) == 1 {
		return name + ": " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", name, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// PathFromEnv returns flagValue, or $HOOKPROXY_CONFIG when flagValue is empty.
func PathFromEnv(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(EnvConfig)
}

// Resolve loads the configuration named by flagValue or $HOOKPROXY_CONFIG, and falls back to
// the embedded default only when neither names a file.
func Resolve(flagValue string) (*Config, error) {
	if p := PathFromEnv(flagValue); p != "" {
		return Load(p)
	}
	return Default(), nil
}

// Load reads a YAML (or JSON) configuration file, rejects unknown keys, applies defaults
// and validates it. A relative registration or audit path is resolved against the
// directory of the file. The returned error is an *Error listing every problem, or the
// I/O error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data, filepath.Dir(abs))
	var cerr *Error
	if errors.As(err, &cerr) {
		cerr.File = path
	}
	if err != nil {
		return nil, err
	}
	cfg.Path = abs
	return cfg, nil
}

// Parse decodes configuration bytes; baseDir resolves relative file paths ("" leaves them
// as written).
func Parse(data []byte, baseDir string) (*Config, error) {
	l := &loader{}
	root, err := l.document(data)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Path: "$", Message: err.Error()}}}
	}
	var cfg Config
	if root != nil {
		l.splitAdmin(root, &cfg)
		l.checkKeys(root, reflect.TypeOf(cfg), "$")
		if err := root.Decode(&cfg); err != nil {
			l.decodeError(err)
		}
	}
	if len(l.problems) > 0 {
		return nil, &Error{Problems: l.problems}
	}
	applyDefaults(&cfg)
	applyRegistration(&cfg)
	resolvePaths(&cfg, baseDir)
	if problems := validate(&cfg); len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return &cfg, nil
}

type loader struct {
	problems []Problem
}

func (l *loader) add(path, format string, args ...any) {
	l.problems = append(l.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// document parses exactly one YAML document and returns its root (nil for an empty file).
func (l *loader) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("invalid YAML: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; a configuration file holds one")
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root := doc.Content[0]
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			return nil, nil
		}
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: the configuration must be a mapping of keys", root.Line)
		}
		return root, nil
	}
	return nil, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// checkKeys walks a mapping against the struct type that decodes it and reports every key
// the type does not know, with its path and line. Unknown keys are refused rather than
// ignored: a misspelt limit or route silently taking its default is worse than an error.
func (l *loader) checkKeys(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			return // the decoder reports the type error
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			l.add(path, "%q is not a duration such as 500ms, 10s or 2m (line %d)", n.Value, n.Line)
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				l.checkKeys(v, t, path) // merged mappings extend this one
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				l.add(keyPath(path, k.Value), "unknown key (line %d)%s", k.Line, suggestion(k.Value, fields))
				continue
			}
			l.checkKeys(v, f.Type, keyPath(path, k.Value))
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, e := range n.Content {
			l.checkKeys(e, t.Elem(), path+"["+strconv.Itoa(i)+"]")
		}
	}
}

// yamlFields maps the yaml names of t's fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

// suggestion names the known key that differs only in case, the usual typo.
func suggestion(key string, fields map[string]reflect.StructField) string {
	for k := range fields {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("; did you mean %q?", k)
		}
	}
	return ""
}

func keyPath(path, key string) string {
	if path == "$" {
		return key
	}
	return path + "." + key
}

// decodeError turns the decoder's type errors into problems.
func (l *loader) decodeError(err error) {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, e := range te.Errors {
			l.add("$", "%s", e)
		}
		return
	}
	l.add("$", "%v", err)
}

// applyRegistration gives a configuration without a registration key the built-in default
// chain, and turns `registration: none` into no registration at all (the default cannot
// be lost by copying a configuration that leaves the key out).
func applyRegistration(cfg *Config) {
	switch cfg.Registration {
	case "":
		cfg.RegistrationInline = append([]byte(nil), DefaultRegistration...)
	case RegistrationNone:
		cfg.Registration, cfg.RegistrationInline = "", nil
	}
}

// resolvePaths makes relative file paths relative to the configuration file's directory,
// so that a configuration works from any working directory.
func resolvePaths(cfg *Config, baseDir string) {
	if baseDir == "" {
		return
	}
	if cfg.Registration != "" && !filepath.IsAbs(cfg.Registration) {
		cfg.Registration = filepath.Join(baseDir, cfg.Registration)
	}
	if p := cfg.Shadow.Registration; p != "" && p != RegistrationNone && !filepath.IsAbs(p) {
		cfg.Shadow.Registration = filepath.Join(baseDir, p)
	}
	if p := cfg.Capture.Dir; p != "" && !filepath.IsAbs(p) {
		cfg.Capture.Dir = filepath.Join(baseDir, p)
	}
	if p := cfg.Audit.Path; p != "" && p != "-" && !filepath.IsAbs(p) {
		cfg.Audit.Path = filepath.Join(baseDir, p)
	}
	resolvePinningFile(cfg.Pinning, baseDir)
}
