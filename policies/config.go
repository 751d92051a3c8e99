package policies

// Strict configuration decoding. A policy config is part of the registration document, so
// a typo must fail `hookproxy validate` instead of silently falling back to a default:
// unknown keys are errors that name the key and its JSON path. encoding/json alone matches
// keys case-insensitively ("Action" would set Action), so the key spelling is checked
// first against the json tags of the target type. This runs once, at construction.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// ConfigError is an invalid policy configuration. Path is a JSON path inside the policy's
// config object ("$.deny[0].inputPattern"); Reason says what is wrong.
type ConfigError struct {
	Policy string
	Path   string
	Reason string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("policy")
	if e.Policy != "" {
		b.WriteString(" ")
		b.WriteString(e.Policy)
	}
	b.WriteString(": config")
	if e.Path != "" && e.Path != "$" {
		b.WriteString(" ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// configErrorf builds a ConfigError whose message starts with a JSON path relative to the
// config root: configErrorf("kinds[2]: unknown kind %q", k).
func configErrorf(format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	path, reason, ok := strings.Cut(msg, ": ")
	if !ok {
		return &ConfigError{Path: "$", Reason: msg}
	}
	return &ConfigError{Path: "$." + path, Reason: reason}
}

// withPolicy stamps the policy name on a ConfigError (or wraps another error).
func withPolicy(name string, err error) error {
	if err == nil {
		return nil
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		c := *ce
		c.Policy = name
		return &c
	}
	return &ConfigError{Policy: name, Path: "$", Reason: err.Error()}
}

// decodeConfig decodes raw into dst (a pointer to a config struct). An absent, empty or
// null config leaves dst unchanged (all defaults). Unknown or wrongly-cased keys, wrong
// value types and trailing data are errors.
func decodeConfig(raw json.RawMessage, dst any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return &ConfigError{Path: "$", Reason: "not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return &ConfigError{Path: "$", Reason: "trailing data after the config object"}
	}
	if err := checkKeys(generic, reflect.TypeOf(dst).Elem(), "$"); err != nil {
		return err
	}
	dec = json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			p := "$"
			if te.Field != "" {
				p += "." + te.Field
			}
			return &ConfigError{Path: p, Reason: fmt.Sprintf("expected %s, got a JSON %s", describeKind(te.Type), te.Value)}
		}
		return &ConfigError{Path: "$", Reason: err.Error()}
	}
	return nil
}

// checkKeys walks a decoded JSON value alongside the Go type it will be decoded into and
// reports the first object key that is not exactly a json tag of that type, or the first
// value of the wrong JSON type, with its exact path ($.deny[1].reason).
func checkKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for _, k := range sortedKeys(val) {
				sub := val[k]
				ft, ok := fields[k]
				if !ok {
					return &ConfigError{Path: path, Reason: fmt.Sprintf("unknown key %q (known: %s)", k, strings.Join(sortedKeys(fields), ", "))}
				}
				if err := checkKeys(sub, ft, path+"."+k); err != nil {
					return err
				}
			}
		case reflect.Map:
			for _, k := range sortedKeys(val) {
				if err := checkKeys(val[k], t.Elem(), path+"."+k); err != nil {
					return err
				}
			}
		case reflect.Interface:
			// any: accept as is
		default:
			return &ConfigError{Path: path, Reason: fmt.Sprintf("expected %s, got an object", describeKind(t))}
		}
	case []any:
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			for i, sub := range val {
				if err := checkKeys(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		case reflect.Interface:
		default:
			return &ConfigError{Path: path, Reason: fmt.Sprintf("expected %s, got an array", describeKind(t))}
		}
	case string:
		if t.Kind() != reflect.String && t.Kind() != reflect.Interface {
			return &ConfigError{Path: path, Reason: fmt.Sprintf("expected %s, got a string", describeKind(t))}
		}
	case bool:
		if t.Kind() != reflect.Bool && t.Kind() != reflect.Interface {
			return &ConfigError{Path: path, Reason: fmt.Sprintf("expected %s, got a boolean", describeKind(t))}
		}
	case json.Number:
		switch t.Kind() {
		case reflect.Float32, reflect.Float64, reflect.Interface:
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if _, err := val.Int64(); err != nil {
				return &ConfigError{Path: path, Reason: fmt.Sprintf("expected an integer, got %s", val)}
			}
		default:
			return &ConfigError{Path: path, Reason: fmt.Sprintf("expected %s, got a number", describeKind(t))}
		}
	}
	return nil
}

func describeKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// checkCode validates a deny code against the protocol's reverse-DNS pattern.
func checkCode(code, path string) error {
	if code == "" {
		return nil
	}
	if !reverseDNS.MatchString(code) {
		return configErrorf("%s: code %q is not a reverse-DNS name such as com.example.policy", path, code)
	}
	return nil
}
