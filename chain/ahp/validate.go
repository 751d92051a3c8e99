package ahp

// Validation of AHP messages as a harness or backend receives them. The rules are those of
// the draft JSON Schemas of the AHP spec (schema/draft) and the cross-field rules of its
// event, capability and content documents, restated in Go: the schemas themselves are never
// copied into the repository. Every check works on a generic decoding (json.Number, maps) so
// that a missing member, a null and a zero value stay distinguishable, and never panics on
// input.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/internal/jsonpath"
	"github.com/hookproxy/hookproxy/internal/jsontext"
)

// Violation is one broken rule, at a JSON path into the validated document such as
// params.event.items[0].parts[1].text ("$" is the document itself).
type Violation struct {
	Path    string
	Message string
}

func (v Violation) String() string { return v.Path + ": " + v.Message }

// ValidationError lists the violations found in one document (at most maxViolations).
type ValidationError struct {
	Violations []Violation
	subject    string // what the document is, for Error; "" is an AHP message
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	subject := e.subject
	if subject == "" {
		subject = "AHP message"
	}
	return "invalid " + subject + ": " + strings.Join(parts, "; ")
}

// maxViolations bounds the report: the first few problems explain a bad frame, and an
// attacker-sized frame must not produce an attacker-sized error.
const maxViolations = 20

var (
	reSHA256   = regexp.MustCompile(`^[a-f0-9]{64}$`)
	reCurrency = regexp.MustCompile(`^[A-Z]{3}$`)
	// reTextOrJSONMediaType matches the media types an attachment may not have: text/*,
	// application/json and any +json type (AHP-CONTENT-002: that content is inline text).
	reTextOrJSONMediaType = regexp.MustCompile(`^(?:[Tt][Ee][Xx][Tt]/|[^/]+/(?:[^;]+\+)?[Jj][Ss][Oo][Nn](?:;|$))`)
)

// reverseDNS is the form of extension keys and effect types, deny codes and backend ids.
var reverseDNS = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$`)

// IsReverseDNS reports whether s is a reverse-DNS name such as com.example.policy: the form
// of extension keys and extension effect types (AHP-EXT-001), deny codes and backend ids.
func IsReverseDNS(s string) bool { return reverseDNS.MatchString(s) }

// validator accumulates violations while walking a generic JSON tree.
type validator struct {
	violations []Violation
}

func (v *validator) failf(path, format string, args ...any) {
	if len(v.violations) < maxViolations {
		v.violations = append(v.violations, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
	}
}

// validate decodes data strictly (decodeFrame) and checks the document with check. It
// returns the decoded document when it is valid; subject names it in the error.
func validate(data []byte, subject string, check func(v *validator, x any)) (any, error) {
	x, err := decodeFrame(data)
	if err != nil {
		return nil, frameError(err, subject)
	}
	return x, checkDecoded(x, subject, check)
}

func frameError(err error, subject string) error {
	return &ValidationError{Violations: []Violation{{Path: "$", Message: err.Error()}}, subject: subject}
}

func checkDecoded(x any, subject string, check func(v *validator, x any)) error {
	v := &validator{}
	check(v, x)
	if len(v.violations) > 0 {
		return &ValidationError{Violations: v.violations, subject: subject}
	}
	return nil
}

// decodeFrame decodes one JSON document strictly: valid UTF-8 (AHP-RPC-001), exactly one
// value, and no member written twice (parsers disagree about which copy wins, so a duplicate
// could show a backend a different event than the harness validated).
func decodeFrame(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var val any
	if err := dec.Decode(&val); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return val, checkMembers(data)
}

// checkMembers reports a member written twice in data, a well-formed JSON text.
// jsontext.Check finds a duplicate (keys compared unescaped) in one allocation-free pass;
// only a document that has one pays for the token walk that names its path.
func checkMembers(data []byte) error {
	if err := jsontext.Check(data, 0); err != nil {
		if dups := jsonpath.Duplicates(data); len(dups) > 0 {
			return fmt.Errorf("member %s is written more than once", dups[0])
		}
		return fmt.Errorf("not JSON: %v", err)
	}
	return nil
}

// --- primitive checks. Each reports its own violation and returns whether the value passed.

func (v *validator) object(path string, x any) (map[string]any, bool) {
	m, ok := x.(map[string]any)
	if !ok {
		v.failf(path, "must be an object, not %s", jsonpath.TypeName(x))
	}
	return m, ok
}

func (v *validator) array(path string, x any) ([]any, bool) {
	a, ok := x.([]any)
	if !ok {
		v.failf(path, "must be an array, not %s", jsonpath.TypeName(x))
	}
	return a, ok
}

// objects checks a non-empty array ("must hold at least one <what>") and runs each on
// every element that is an object, at the element's path.
func (v *validator) objects(path string, x any, what string, each func(path string, obj map[string]any)) {
	arr, ok := v.array(path, x)
	if !ok {
		return
	}
	if len(arr) == 0 {
		v.failf(path, "must hold at least one %s", what)
	}
	for i, e := range arr {
		ip := jsonpath.Index(path, i)
		if obj, ok := v.object(ip, e); ok {
			each(ip, obj)
		}
	}
}

// str checks a string of at least minLen characters (code points, as JSON Schema counts).
func (v *validator) str(path string, x any, minLen int) (string, bool) {
	s, ok := x.(string)
	if !ok {
		v.failf(path, "must be a string, not %s", jsonpath.TypeName(x))
		return "", false
	}
	if utf8.RuneCountInString(s) < minLen {
		if minLen == 1 {
			v.failf(path, "must not be empty")
		} else {
			v.failf(path, "must be at least %d characters", minLen)
		}
		return "", false
	}
	return s, true
}

func (v *validator) boolean(path string, x any) bool {
	if _, ok := x.(bool); !ok {
		v.failf(path, "must be a boolean, not %s", jsonpath.TypeName(x))
		return false
	}
	return true
}

// integer checks an integer >= min.
func (v *validator) integer(path string, x any, min int64) bool {
	n, ok := x.(json.Number)
	if !ok {
		v.failf(path, "must be an integer, not %s", jsonpath.TypeName(x))
		return false
	}
	i, isInt := jsonpath.Integer(n)
	if !isInt {
		v.failf(path, "must be an integer, not %s", n)
		return false
	}
	if i.Cmp(big.NewInt(min)) < 0 {
		v.failf(path, "must be at least %d", min)
		return false
	}
	return true
}

// number checks a number >= 0.
func (v *validator) nonNegative(path string, x any) bool {
	n, ok := x.(json.Number)
	if !ok {
		v.failf(path, "must be a number, not %s", jsonpath.TypeName(x))
		return false
	}
	f, _, err := big.ParseFloat(string(n), 10, 64, big.ToNearestEven)
	if err != nil || f.Sign() < 0 {
		v.failf(path, "must be a number >= 0")
		return false
	}
	return true
}

// enum checks a string member against its closed set of values.
func (v *validator) enum(path string, x any, values ...string) (string, bool) {
	s, isStr := x.(string)
	if isStr {
		for _, e := range values {
			if s == e {
				return s, true
			}
		}
		v.failf(path, "%q is not one of %s", s, strings.Join(values, ", "))
		return "", false
	}
	v.failf(path, "must be one of %s, not %s", strings.Join(values, ", "), jsonpath.TypeName(x))
	return "", false
}

func (v *validator) constant(path string, x any, want string) bool {
	if s, ok := x.(string); !ok || s != want {
		v.failf(path, "must be %q", want)
		return false
	}
	return true
}

// uri checks an RFC 3986 URI with a scheme (JSON Schema format "uri").
func (v *validator) uri(path string, x any) (string, bool) {
	s, ok := v.str(path, x, 0)
	if !ok {
		return "", false
	}
	if err := checkURI(s); err != nil {
		v.failf(path, "%q is not an absolute URI: %v", s, err)
		return "", false
	}
	return s, true
}

// checkURI validates the RFC 3986 URI grammar at the character level (scheme, allowed
// characters, well-formed percent-encoding) and then with net/url for the authority.
func checkURI(s string) error {
	colon := strings.IndexByte(s, ':')
	if colon < 1 {
		return errors.New("no scheme")
	}
	for i := 0; i < colon; i++ {
		c := s[i]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !alpha || !(alpha || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return errors.New("invalid scheme")
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return errors.New("malformed percent-encoding")
			}
			i += 2
		default:
			return fmt.Errorf("character %q is not allowed", c)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			return ue.Err
		}
		return err
	}
	if !u.IsAbs() {
		return errors.New("relative reference")
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// dateTime checks an RFC 3339 date-time (compact ISO 8601 forms are invalid).
func (v *validator) dateTime(path string, x any) bool {
	s, ok := v.str(path, x, 0)
	if !ok {
		return false
	}
	if err := checkDateTime(s); err != nil {
		v.failf(path, "%q is not an RFC 3339 date-time: %v", s, err)
		return false
	}
	return true
}

func digits(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// checkDateTime implements RFC 3339 §5.6: full-date "T" full-time, with a leap second
// allowed only at 23:59:60 UTC.
func checkDateTime(s string) error {
	if len(s) < 20 {
		return errors.New("too short (want YYYY-MM-DDTHH:MM:SSZ)")
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return errors.New("bad date")
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return errors.New("date out of range")
	}
	if s[10] != 'T' && s[10] != 't' {
		return errors.New("missing T separator")
	}
	hour, ok1 := digits(s[11:13])
	minute, ok2 := digits(s[14:16])
	second, ok3 := digits(s[17:19])
	if !ok1 || !ok2 || !ok3 || s[13] != ':' || s[16] != ':' {
		return errors.New("bad time")
	}
	if hour > 23 || minute > 59 || second > 60 {
		return errors.New("time out of range")
	}
	rest := s[19:]
	if strings.HasPrefix(rest, ".") {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return errors.New("empty fraction")
		}
		rest = rest[n:]
	}
	offset := 0
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(rest[1:3])
		om, ok2 := digits(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return errors.New("bad offset")
		}
		offset = oh*60 + om
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return errors.New("bad or missing offset (want Z or ±HH:MM)")
	}
	if second == 60 {
		utc := ((hour*60+minute-offset)%1440 + 1440) % 1440
		if utc != 23*60+59 {
			return errors.New("leap second not at 23:59:60 UTC")
		}
	}
	return nil
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// closed reports members of a closed protocol object that are not in allowed.
func (v *validator) closed(path string, obj map[string]any, allowed ...string) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(allowed, k) {
			v.failf(jsonpath.Member(path, k), "is not allowed here (closed object)")
		}
	}
}

// required reports each missing member; it returns false when any is missing.
func (v *validator) required(path string, obj map[string]any, keys ...string) bool {
	ok := true
	for _, k := range keys {
		if _, has := obj[k]; !has {
			v.failf(path, "%q is required", k)
			ok = false
		}
	}
	return ok
}

// strMembers checks each of keys that obj holds: a string of at least minLen characters.
func (v *validator) strMembers(path string, obj map[string]any, minLen int, keys ...string) {
	for _, k := range keys {
		if x, has := obj[k]; has {
			v.str(jsonpath.Member(path, k), x, minLen)
		}
	}
}

// countMembers checks each of keys that obj holds: an integer >= 0.
func (v *validator) countMembers(path string, obj map[string]any, keys ...string) {
	for _, k := range keys {
		if n, has := obj[k]; has {
			v.integer(jsonpath.Member(path, k), n, 0)
		}
	}
}

// partMembers checks each of keys that obj holds: one content part (v.part).
func (v *validator) partMembers(path string, obj map[string]any, textOnly bool, keys ...string) {
	for _, k := range keys {
		if p, has := obj[k]; has {
			v.part(jsonpath.Member(path, k), p, textOnly)
		}
	}
}

// stringRecord checks a closed object whose members are all required, non-empty strings
// (model {id, provider}, harness {name, version}).
func (v *validator) stringRecord(path string, x any, keys ...string) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	v.required(path, m, keys...)
	v.closed(path, m, keys...)
	v.strMembers(path, m, 1, keys...)
}

// forbidden reports each member that must not appear.
func (v *validator) forbidden(path string, obj map[string]any, why string, keys ...string) {
	for _, k := range keys {
		if _, has := obj[k]; has {
			v.failf(jsonpath.Member(path, k), "is not allowed %s", why)
		}
	}
}

// uniqueStrings checks an array of unique strings of at least minLen characters with at
// least minItems entries.
func (v *validator) uniqueStrings(path string, x any, minItems, minLen int) []string {
	arr, ok := v.array(path, x)
	if !ok {
		return nil
	}
	if len(arr) < minItems {
		v.failf(path, "must hold at least %d item(s)", minItems)
	}
	seen := map[string]bool{}
	var out []string
	for i, e := range arr {
		s, ok := v.str(jsonpath.Index(path, i), e, minLen)
		if !ok {
			continue
		}
		if seen[s] {
			v.failf(jsonpath.Index(path, i), "duplicate %q", s)
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// extensions checks an extensions object: reverse-DNS keys, any values (AHP-EXT-001).
func (v *validator) extensions(path string, x any) {
	m, ok := v.object(path, x)
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !IsReverseDNS(k) {
			v.failf(jsonpath.Member(path, k), "extension key %q is not reverse-DNS (e.g. org.w3c.trace_context)", k)
		}
	}
}

// optional runs check on obj's member key, at the member's path, when obj has it.
func (v *validator) optional(path string, obj map[string]any, key string, check func(path string, x any)) {
	if x, has := obj[key]; has {
		check(jsonpath.Member(path, key), x)
	}
}
