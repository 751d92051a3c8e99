package chain

// Strict decoding of canonical content received from backends (SPEC-DIGEST §4.1, §4.2).
// Every object here is closed on the wire, so values are decoded through maps: a struct
// decode would match keys case-insensitively and silently drop unknown members, which is
// exactly what AHP-CORE-003 forbids inside effects. This code is our own rendering of the
// content-item rules; the JSON Schemas are used only by tests, never copied here.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

var (
	// reverseDNS is the pattern of extension keys, deny codes and backend ids.
	reverseDNS = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$`)
	// textOrJSONMedia matches media types that must never be attachments: text is always
	// inline and JSON is serialized into text (AHP-CONTENT-002).
	textOrJSONMedia = regexp.MustCompile(`(?i)^(?:text/|[^/]+/(?:[^;]+\+)?json(?:;|$))`)
)

// object is a decoded JSON object with exact (case-sensitive) member names.
type object map[string]json.RawMessage

// firstByte returns the first non-whitespace byte of raw, or 0.
func firstByte(raw []byte) byte {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b
	}
	return 0
}

func isJSONObject(raw []byte) bool { return firstByte(raw) == '{' }
func isJSONArray(raw []byte) bool  { return firstByte(raw) == '[' }
func isJSONNull(raw []byte) bool   { return firstByte(raw) == 'n' }

// decodeObject decodes raw as a JSON object; null, arrays and scalars are errors.
func decodeObject(raw []byte) (object, error) {
	if !isJSONObject(raw) {
		return nil, errors.New("must be an object")
	}
	var m object
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("must be an object")
	}
	return m, nil
}

// decodeArray decodes raw as a JSON array; null is an error.
func decodeArray(raw []byte) ([]json.RawMessage, error) {
	if !isJSONArray(raw) {
		return nil, errors.New("must be an array")
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, errors.New("must be an array")
	}
	return a, nil
}

// closed rejects members outside allowed.
func (o object) closed(allowed ...string) error {
	for k := range o {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("unknown member %q", k)
		}
	}
	return nil
}

// str returns the string member key. present is false when the member is absent.
func (o object) str(key string) (s string, present bool, err error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	if firstByte(raw) != '"' {
		return "", true, fmt.Errorf("%s must be a string", key)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, fmt.Errorf("%s must be a string", key)
	}
	return s, true, nil
}

// reqStr returns a required string member that must be at least minLen bytes long.
func (o object) reqStr(key string, minLen int) (string, error) {
	s, ok, err := o.str(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s is required", key)
	}
	if len(s) < minLen {
		return "", fmt.Errorf("%s must not be empty", key)
	}
	return s, nil
}

// optBool returns an optional boolean member.
func (o object) optBool(key string) (bool, error) {
	raw, ok := o[key]
	if !ok {
		return false, nil
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s must be a boolean", key)
}

// nonNegInt decodes an integer ≥ 0; integer-valued numbers such as 1.0 count as integers
// (JSON Schema 2020-12, SPEC-DIGEST §13).
func nonNegInt(raw []byte) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, n >= 0
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func validRole(r string) bool {
	switch r {
	case ahp.RoleSystem, ahp.RoleDeveloper, ahp.RoleUser, ahp.RoleAssistant, ahp.RoleTool:
		return true
	}
	return false
}

// parseMessages decodes a canonical message list (content-item#messages). role, when not
// empty, is the role every message must carry (user.message.* boundaries).
func parseMessages(raw []byte, role string) ([]ahp.Message, error) {
	items, err := decodeArray(raw)
	if err != nil {
		return nil, errors.New("must be a list of canonical messages")
	}
	out := make([]ahp.Message, len(items))
	for i, it := range items {
		m, err := parseMessage(it)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if role != "" && m.Role != role {
			return nil, fmt.Errorf("[%d]: role must be %q at this boundary", i, role)
		}
		out[i] = m
	}
	return out, nil
}

// parseMessage decodes one closed canonical message {id, role, parts, synthesized?}.
func parseMessage(raw []byte) (ahp.Message, error) {
	var m ahp.Message
	o, err := decodeObject(raw)
	if err != nil {
		return m, errors.New("message must be an object")
	}
	if err := o.closed("id", "role", "parts", "synthesized"); err != nil {
		return m, fmt.Errorf("message: %w", err)
	}
	if m.ID, err = o.reqStr("id", 1); err != nil {
		return m, fmt.Errorf("message: %w", err)
	}
	if m.Role, err = o.reqStr("role", 0); err != nil {
		return m, fmt.Errorf("message: %w", err)
	}
	if !validRole(m.Role) {
		return m, fmt.Errorf("message: unknown role %q", m.Role)
	}
	if m.Synthesized, err = o.optBool("synthesized"); err != nil {
		return m, fmt.Errorf("message: %w", err)
	}
	rawParts, ok := o["parts"]
	if !ok {
		return m, errors.New("message: parts is required")
	}
	parts, err := decodeArray(rawParts)
	if err != nil {
		return m, errors.New("message: parts must be an array")
	}
	m.Parts = make([]ahp.Part, len(parts))
	for i, p := range parts {
		if m.Parts[i], err = parsePart(p, false); err != nil {
			return m, fmt.Errorf("message %q: parts[%d]: %w", m.ID, i, err)
		}
	}
	return m, nil
}

// parseTextParts decodes a text-part list (content-item#textParts): instructions,
// summary, supplied compaction results. Attachments and messages are rejected.
func parseTextParts(raw []byte) ([]ahp.Part, error) {
	items, err := decodeArray(raw)
	if err != nil {
		return nil, errors.New("must be a list of text parts")
	}
	out := make([]ahp.Part, len(items))
	for i, it := range items {
		if out[i], err = parsePart(it, true); err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return out, nil
}

// parsePart decodes one of the eight closed part variants (kind × selection, ± gap).
func parsePart(raw []byte, textOnly bool) (ahp.Part, error) {
	var p ahp.Part
	o, err := decodeObject(raw)
	if err != nil {
		return p, errors.New("part must be an object")
	}
	if p.ID, err = o.reqStr("id", 1); err != nil {
		return p, err
	}
	if p.Kind, err = o.reqStr("kind", 0); err != nil {
		return p, err
	}
	if p.MediaType, err = o.reqStr("mediaType", 0); err != nil {
		return p, err
	}
	if p.Selection, err = o.reqStr("selection", 0); err != nil {
		return p, err
	}
	if c, ok, err := o.str("category"); err != nil {
		return p, err
	} else if ok {
		if c == "" {
			return p, errors.New("category must not be empty")
		}
		p.Category = c
	}
	if p.Synthesized, err = o.optBool("synthesized"); err != nil {
		return p, err
	}

	switch p.Kind {
	case ahp.KindText:
		if p.MediaType != ahp.MediaTypeText {
			return p, errors.New("text parts must have mediaType text/plain")
		}
	case ahp.KindAttachment:
		if textOnly {
			return p, errors.New("attachment parts are not allowed in a text-part list")
		}
		if p.MediaType == "" || textOrJSONMedia.MatchString(p.MediaType) {
			return p, fmt.Errorf("attachment mediaType %q is not allowed (text and JSON are inline text)", p.MediaType)
		}
	default:
		return p, fmt.Errorf("unknown part kind %q", p.Kind)
	}

	_, hasGap := o["gap"]
	var allowed []string
	switch {
	case p.Selection == ahp.SelectionBody && hasGap:
		allowed = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "gap", "size", "sha256"}
	case p.Selection == ahp.SelectionBody && p.Kind == ahp.KindText:
		allowed = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "text"}
	case p.Selection == ahp.SelectionBody:
		allowed = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "body"}
	case p.Selection == ahp.SelectionMetadata || p.Selection == ahp.SelectionOmit:
		allowed = []string{"id", "kind", "mediaType", "selection", "category", "synthesized", "size", "sha256"}
	default:
		return p, fmt.Errorf("unknown selection %q", p.Selection)
	}
	if err := o.closed(allowed...); err != nil {
		// Metadata/omit views never carry text or body; a gap part never carries text.
		return p, fmt.Errorf("%s/%s part: %w", p.Kind, p.Selection, err)
	}

	if hasGap {
		g, err := decodeObject(o["gap"])
		if err != nil {
			return p, errors.New("gap must be an object")
		}
		if err := g.closed("reason", "path"); err != nil {
			return p, fmt.Errorf("gap: %w", err)
		}
		var gap ahp.Gap
		if gap.Reason, err = g.reqStr("reason", 1); err != nil {
			return p, fmt.Errorf("gap: %w", err)
		}
		if s, ok, err := g.str("path"); err != nil {
			return p, fmt.Errorf("gap: %w", err)
		} else if ok {
			if s == "" {
				return p, errors.New("gap: path must not be empty")
			}
			gap.Path = s
		}
		p.Gap = &gap
	}
	if raw, ok := o["size"]; ok {
		n, ok := nonNegInt(raw)
		if !ok {
			return p, errors.New("size must be an integer >= 0")
		}
		p.Size = &n
	}
	if s, ok, err := o.str("sha256"); err != nil {
		return p, err
	} else if ok {
		if !isSHA256Hex(s) {
			return p, errors.New("sha256 must be 64 lowercase hex characters")
		}
		p.SHA256 = s
	}
	if _, ok := o["text"]; ok {
		s, _, err := o.str("text")
		if err != nil {
			return p, err
		}
		p.Text = &s
	} else if p.Kind == ahp.KindText && p.Selection == ahp.SelectionBody && !hasGap {
		return p, errors.New("text is required in a body-selected text part")
	}
	if raw, ok := o["body"]; ok {
		b, err := decodeObject(raw)
		if err != nil {
			return p, errors.New("body must be an object")
		}
		// The reference is closed: it can't carry bytes, text, size or digest.
		if err := b.closed("ref"); err != nil {
			return p, fmt.Errorf("body: %w", err)
		}
		ref, err := b.reqStr("ref", 1)
		if err != nil {
			return p, fmt.Errorf("body: %w", err)
		}
		p.Body = &ahp.Ref{Ref: ref}
	} else if p.Kind == ahp.KindAttachment && p.Selection == ahp.SelectionBody && !hasGap {
		return p, errors.New("body is required in a body-selected attachment part")
	}
	return p, nil
}

// parseExtensions checks an extensions object: reverse-DNS keys, any values.
func parseExtensions(raw []byte) (map[string]json.RawMessage, error) {
	o, err := decodeObject(raw)
	if err != nil {
		return nil, errors.New("extensions must be an object")
	}
	for k := range o {
		if !reverseDNS.MatchString(k) {
			return nil, fmt.Errorf("extension key %q is not reverse-DNS", k)
		}
	}
	return o, nil
}

// flatAnswer checks an MCP elicitation answer object: every value is a string, number,
// boolean or array of strings (pinned MCP ElicitResult.content; no nested objects).
func flatAnswer(o object) error {
	for k, v := range o {
		switch firstByte(v) {
		case '"', 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case '[':
			var a []json.RawMessage
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("answer field %q is malformed", k)
			}
			for _, e := range a {
				if firstByte(e) != '"' {
					return fmt.Errorf("answer field %q must be an array of strings", k)
				}
			}
		default:
			return fmt.Errorf("answer field %q must be a string, number, boolean or array of strings", k)
		}
	}
	return nil
}

// isJSONInteger reports whether raw is a JSON number with an integer value.
func isJSONInteger(raw []byte) bool {
	var n json.Number
	if firstByte(raw) == '"' || json.Unmarshal(raw, &n) != nil {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f)
}

// eachMember calls fn for every member of the JSON object raw, in order, with the member
// name and the raw value (a subslice of raw: fn must not retain it). raw must already be
// known to be valid JSON (json.Valid); this is the allocation-free path used for reply
// envelopes, where every call of the hot path goes.
func eachMember(raw []byte, fn func(key []byte, val []byte) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return errors.New("must be an object")
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for i < len(raw) {
		end := skipString(raw, i)
		key := raw[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(raw[i:end], &k) != nil {
				return errors.New("malformed member name")
			}
			key = []byte(k)
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // ':'
		vend := skipValue(raw, i)
		if err := fn(key, raw[i:vend]); err != nil {
			return err
		}
		i = skipSpace(raw, vend)
		if i < len(raw) && raw[i] == '}' {
			return nil
		}
		i = skipSpace(raw, i+1) // ','
	}
	return errors.New("must be an object")
}

// eachElement calls fn for every element of the JSON array raw (valid JSON required).
func eachElement(raw []byte, fn func(val []byte) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return errors.New("must be an array")
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return nil
	}
	for i < len(raw) {
		vend := skipValue(raw, i)
		if err := fn(raw[i:vend]); err != nil {
			return err
		}
		i = skipSpace(raw, vend)
		if i < len(raw) && raw[i] == ']' {
			return nil
		}
		i = skipSpace(raw, i+1) // ','
	}
	return errors.New("must be an array")
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at raw[i] == '"'.
func skipString(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}

// skipValue returns the index just past the JSON value starting at raw[i].
func skipValue(raw []byte, i int) int {
	if i >= len(raw) {
		return i
	}
	switch raw[i] {
	case '"':
		return skipString(raw, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				j = skipString(raw, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(raw)
	}
	j := i
	for j < len(raw) {
		switch raw[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}
