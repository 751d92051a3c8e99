package gemini

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/mapping"
)

// maxDepth bounds JSON nesting. gjson recurses, and no legitimate Gemini body comes near
// this depth.
const maxDepth = 512

// strictJSON rejects what gjson would read differently from the upstream: invalid UTF-8,
// deep nesting, duplicate keys and escaped spellings of plain keys (which gjson paths and
// sjson patches would not match), as the other codecs do.
var strictJSON = jsontext.CheckOptions{
	MaxDepth:          maxDepth,
	RejectInvalidUTF8: true,
	EscapedKey: func(name string) error {
		for i := 0; i < len(name); i++ {
			c := name[i]
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return nil // a key that needs escapes may be written with them
			}
		}
		return fmt.Errorf("object key %q is written with escapes", name)
	},
}

// compactJSON is raw without insignificant whitespace ("{}" for nothing).
func compactJSON(raw string) string {
	if raw == "" {
		return "{}"
	}
	if jsontext.IsCompact(raw) {
		return raw
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(raw)) != nil {
		return raw
	}
	return b.String()
}

// partKind is what a native part is in the canonical view.
type partKind uint8

const (
	kindText partKind = iota
	kindThought
	kindCall
	kindResponse
	kindAttachment
	kindInlineText // inlineData of a text media type: text, re-encoded on edit
	kindOther      // carried natively, a text part with a gap
)

// decodedPart is one native part in the canonical view.
type decodedPart struct {
	kind partKind
	part ahp.Part
	raw  string
	key  string           // the data member as the part spells it (functionCall or function_call, ...)
	call mapping.ToolCall // kindCall
	// kindResponse: the name, id and response object of a functionResponse
	respName, respID, respBody string
	respErr                    bool
}

// callIDs numbers the functionCalls of one message that have no native id, so that the
// same call twice in one message gets two ids.
type callIDs map[string]int

// callID is a functionCall's canonical id: its native id, else a hash of its name and
// arguments, numbered when the same call repeats in the message (call ids stable across
// tool.before and tool.after, synthesized when the native side has none; AHP-CORE-004).
func (seen callIDs) callID(fc gjson.Result, name, input string) string {
	if id := fc.Get("id"); id.Type == gjson.String && id.Str != "" {
		return id.Str
	}
	id := derive("gcall_", name, input)
	n := seen[id]
	seen[id] = n + 1
	if n > 0 {
		id += "~" + strconv.Itoa(n)
	}
	return id
}

// callInput is the canonical input of a functionCall: its args object, "{}" without args,
// and the raw text under mapping.RawArgumentsKey when args is not an object.
func callInput(fc gjson.Result) string {
	args := fc.Get("args")
	switch {
	case !args.Exists() || args.Type == gjson.Null:
		return "{}"
	case args.IsObject():
		return compactJSON(args.Raw)
	}
	return `{"` + mapping.RawArgumentsKey + `":` + mapping.Quote(args.Raw) + `}`
}

// readCall reads a functionCall object as its tool_call part carries it: the name
// ("unknown" when it has none), the canonical input, and the id (callID). The stream
// editor reads a streamed call with it too.
func readCall(fc gjson.Result, seen callIDs) mapping.ToolCall {
	mapping.NoteCallDecode()
	name := fc.Get("name").String()
	input := callInput(fc)
	c := mapping.ToolCall{ID: seen.callID(fc, name, input), Name: name, Input: json.RawMessage(input)}
	if c.Name == "" {
		c.Name = "unknown"
	}
	return c
}

// isDerivedCallID reports whether id was derived by callID (so it is not sent upstream).
func isDerivedCallID(id string) bool { return strings.HasPrefix(id, "gcall_") }

// Gemini reads its JSON as protobuf JSON, which accepts every field under its lowerCamelCase
// name and under its proto (snake_case) name, and clients following the REST docs send
// system_instruction, inline_data, function_response. Both spellings are read, and the one
// the client used is the one patched; an object that spells a field both ways is refused,
// since which one the upstream would read is not certain.
func field(obj gjson.Result, camel string) (v gjson.Result, key string, err error) {
	snake := snakeCase(camel)
	v, key = obj.Get(camel), camel
	if snake == camel {
		return v, key, nil
	}
	if sv := obj.Get(snake); sv.Exists() {
		if v.Exists() {
			return gjson.Result{}, "", fmt.Errorf("has both %s and %s", camel, snake)
		}
		v, key = sv, snake
	}
	return v, key, nil
}

func snakeCase(camel string) string {
	var b strings.Builder
	for _, r := range camel {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// partMembers are the data members of a part, read in one pass (a part is read on every
// request, so not by a lookup per member and spelling).
type partMembers struct {
	text, thought gjson.Result
	vals          [numData]gjson.Result // by the d* constants
	keys          [numData]string       // the spelling each was found under
	err           error                 // a member spelled both ways
}

const (
	dCall = iota
	dResponse
	dInline
	dFile
	numData
)

var dataNames = [numData][2]string{
	dCall: {"functionCall", "function_call"}, dResponse: {"functionResponse", "function_response"},
	dInline: {"inlineData", "inline_data"}, dFile: {"fileData", "file_data"},
}

func readPart(p gjson.Result) partMembers {
	var m partMembers
	p.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "text":
			m.text = v
			return true
		case "thought":
			m.thought = v
			return true
		}
		for i, names := range dataNames {
			if k.Str == names[0] || k.Str == names[1] {
				if m.vals[i].Exists() {
					m.err = fmt.Errorf("has both %s and %s", names[0], names[1])
					return false
				}
				m.vals[i], m.keys[i] = v, k.Str
			}
		}
		return true
	})
	return m
}

// isCall and isResponse say what decodePart reads a part as; a part with several data
// members is read by the first of text, functionCall, functionResponse, everywhere.
func (m *partMembers) isCall() bool { return !m.text.Exists() && m.vals[dCall].Exists() }

func (m *partMembers) isResponse() bool {
	return !m.text.Exists() && !m.vals[dCall].Exists() && m.vals[dResponse].Exists()
}

func isCall(p gjson.Result) bool {
	if !p.IsObject() {
		return false
	}
	m := readPart(p)
	return m.err == nil && m.isCall()
}

// decodePart maps one native part onto a canonical part: roles on the message, text inline,
// structure serialized into text (AHP-CONTENT-001).
func decodePart(p gjson.Result, id string, seen callIDs) (decodedPart, error) {
	if !p.IsObject() {
		return decodedPart{}, errors.New("is not an object")
	}
	m := readPart(p)
	return decodeMembers(p, &m, id, seen)
}

// decodeMembers maps a part whose members m holds.
func decodeMembers(p gjson.Result, m *partMembers, id string, seen callIDs) (decodedPart, error) {
	if m.err != nil {
		return decodedPart{}, m.err
	}
	d := decodedPart{raw: p.Raw}
	thought := m.thought.Type == gjson.True
	vals, keys := m.vals, m.keys
	switch {
	case m.text.Exists():
		t := m.text
		if t.Type != gjson.String {
			return decodedPart{}, errors.New("text is not a string")
		}
		d.kind, d.part = kindText, ahp.TextPart(id, t.Str)
		if thought {
			d.kind, d.part.Category = kindThought, ahp.CategoryReasoning
		}
	case vals[dCall].Exists():
		fc := vals[dCall]
		d.key = keys[dCall]
		if !fc.IsObject() {
			return decodedPart{}, errors.New("functionCall is not an object")
		}
		d.kind = kindCall
		d.call = readCall(fc, seen)
		d.part = mapping.ToolCallPart(id, d.call)
	case vals[dResponse].Exists():
		fr := vals[dResponse]
		d.key = keys[dResponse]
		if !fr.IsObject() {
			return decodedPart{}, errors.New("functionResponse is not an object")
		}
		d.kind = kindResponse
		d.respName, d.respID = fr.Get("name").String(), fr.Get("id").String()
		resp := fr.Get("response")
		d.respBody = "{}"
		if resp.Exists() {
			d.respBody = compactJSON(resp.Raw)
		}
		d.respErr = resp.IsObject() && resp.Get("error").Exists() && !resp.Get("output").Exists()
		d.part = ahp.TextPart(id, d.respBody)
		d.part.Category = ahp.CategoryToolResult
	case vals[dInline].Exists():
		d.key = keys[dInline]
		d.kind, d.part = inlinePart(vals[dInline], id)
	case vals[dFile].Exists():
		mtv, _, err := field(vals[dFile], "mimeType")
		if err != nil {
			return decodedPart{}, err
		}
		mt := mtv.String()
		if validAttachmentType(mt) {
			d.kind, d.part = kindAttachment, ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mt, Selection: ahp.SelectionMetadata}
		} else {
			d.kind, d.part = kindOther, gapPart(id, "a file referenced by URI ("+quoteOr(mt, "no media type")+") is not fetched by hookproxy")
		}
	default:
		d.kind, d.part = kindOther, gapPart(id, "a Gemini part of kind "+partName(p)+" has no canonical form; it is carried natively")
	}
	return d, nil
}

// inlinePart maps inline bytes: an attachment with its size and digest, or, for a text
// media type, the decoded text (attachments cannot be text/*; text is inline and the
// policies see it like any other text: AHP-CONTENT-001, AHP-CONTENT-002).
func inlinePart(in gjson.Result, id string) (partKind, ahp.Part) {
	mtv, _, _ := field(in, "mimeType") // both spellings: read as no type, a gap
	mt := mtv.String()
	data, err := base64.StdEncoding.DecodeString(in.Get("data").String())
	if err != nil {
		data, err = base64.URLEncoding.DecodeString(in.Get("data").String())
	}
	// Text under any textual type (text/*, application/json, application/xml, YAML,
	// scripts, ...) is text the policies read, whether or not the type could also name an
	// attachment: a credential in a JSON or XML document is as much text as in text/plain.
	if err == nil && utf8.Valid(data) && mapping.TextualMediaType(mt) {
		return kindInlineText, ahp.TextPart(id, string(data))
	}
	if !validAttachmentType(mt) {
		return kindOther, gapPart(id, "inline data of type "+quoteOr(mt, "none")+" could not be read as text")
	}
	p := ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mt, Selection: ahp.SelectionMetadata}
	if err == nil {
		n := int64(len(data))
		sum := sha256.Sum256(data)
		p.Size, p.SHA256 = &n, hex.EncodeToString(sum[:])
	}
	return kindAttachment, p
}

// gapPart is a text part whose content hookproxy cannot show.
func gapPart(id, reason string) ahp.Part {
	return ahp.Part{ID: id, Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody,
		Gap: &ahp.Gap{Reason: reason}}
}

// partName is the first member of a part that is not one of its common attributes.
func partName(p gjson.Result) string {
	name := "unknown"
	p.ForEach(func(k, _ gjson.Result) bool {
		switch k.Str {
		case "thought", "thoughtSignature", "thought_signature", "partMetadata", "part_metadata", "mediaResolution", "media_resolution":
			return true
		}
		name = mapping.Quote(k.Str)
		return false
	})
	return name
}

func quoteOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return mapping.Quote(s)
}

// validAttachmentType reports whether mt may be an attachment's media type (not text/*
// and not JSON, AHP-CONTENT-001) and looks like a media type at all.
func validAttachmentType(mt string) bool {
	l := strings.ToLower(mt)
	if i := strings.IndexByte(l, ';'); i >= 0 {
		l = l[:i]
	}
	l = strings.TrimSpace(l)
	slash := strings.IndexByte(l, '/')
	if slash <= 0 || slash == len(l)-1 || strings.HasPrefix(l, "text/") {
		return false
	}
	return !strings.HasSuffix(l, "/json") && !strings.HasSuffix(l, "+json")
}

// renderPart renders canonical part p as a native part. orig is the decoded native part
// the canonical part came from (nil for a new part): it is copied byte for byte when p is
// unchanged, and patched when only its text or arguments changed.
func renderPart(p *ahp.Part, orig *decodedPart) (string, error) {
	if orig != nil && mapping.PartEqual(p, &orig.part) {
		return orig.raw, nil
	}
	if c, ok := mapping.ParseToolCall(p); ok {
		input := compactJSON(string(c.Input))
		if orig != nil && orig.kind == kindCall {
			raw := orig.raw
			var err error
			if c.Name != orig.call.Name {
				if raw, err = mapping.SetRaw(raw, orig.key+".name", mapping.Quote(c.Name)); err != nil {
					return "", err
				}
			}
			return mapping.SetRaw(raw, orig.key+".args", input)
		}
		fc := `{"name":` + mapping.Quote(c.Name) + `,"args":` + input
		if !isDerivedCallID(c.ID) {
			fc += `,"id":` + mapping.Quote(c.ID)
		}
		return `{"functionCall":` + fc + `}}`, nil
	}
	if p.Kind == ahp.KindAttachment || p.Text == nil {
		if orig != nil && (orig.kind == kindAttachment || orig.kind == kindOther) && p.ID == orig.part.ID {
			return orig.raw, nil // attachments are immutable; a gap part's content is native
		}
		return "", fmt.Errorf("gemini: part %q has no content hookproxy can render", p.ID)
	}
	text := *p.Text
	if orig != nil {
		switch orig.kind {
		case kindText, kindThought:
			return mapping.SetRaw(orig.raw, "text", mapping.Quote(text))
		case kindInlineText:
			return mapping.SetRaw(orig.raw, orig.key+".data", mapping.Quote(base64.StdEncoding.EncodeToString([]byte(text))))
		}
	}
	if p.Category == ahp.CategoryReasoning {
		return `{"text":` + mapping.Quote(text) + `,"thought":true}`, nil
	}
	return `{"text":` + mapping.Quote(text) + `}`, nil
}
