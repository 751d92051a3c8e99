package mcp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// Content item types of MCP 2025-06-18 / 2025-11-25.
const (
	ItemText         = "text"
	ItemImage        = "image"
	ItemAudio        = "audio"
	ItemResource     = "resource"
	ItemResourceLink = "resource_link"
)

// resultKeys are the CallToolResult members hookproxy reads or writes.
var resultKeys = []string{"content", "structuredContent", "isError", "resultType"}

// Result is a decoded CallToolResult.
type Result struct {
	Raw []byte
	// IsError is the tool's own error flag (tool.after outcome "error").
	IsError bool
	// InputRequired marks a multi-round-trip result (MCP 2026-07-28 SEP-2322): the server
	// asks the client for input and the client calls again. It is not a resolved call.
	InputRequired bool

	items         []gjson.Result
	structured    gjson.Result
	hasStructured bool
}

// ParseResult decodes the result of a tools/call response from the MCP server. Content
// item types this package does not know are accepted (a later MCP version may add some)
// and are carried as serialized text. A malformed result is an error naming the problem.
func ParseResult(raw []byte) (*Result, error) { return parseResult(raw, false) }

// ParseSupplied decodes a result supplied by a policy (a return effect at tool.before).
// The engine checked only that it is JSON; here it must be a CallToolResult an MCP client
// can decode: a content array of known, complete items, a boolean isError if any.
func ParseSupplied(raw []byte) (*Result, error) { return parseResult(raw, true) }

func parseResult(raw []byte, strict bool) (*Result, error) {
	if err := CheckJSON(raw); err != nil {
		msg := err.Error()
		var je *Error
		if errors.As(err, &je) {
			msg = strings.TrimPrefix(je.Message, "invalid JSON-RPC request: ")
		}
		return nil, fmt.Errorf("CallToolResult: %s", msg)
	}
	v := gjson.ParseBytes(raw)
	if !v.IsObject() {
		return nil, fmt.Errorf("CallToolResult: not a JSON object")
	}
	if k := caseVariant(v, resultKeys); k != "" {
		return nil, fmt.Errorf("CallToolResult: member %q differs from a result member only in letter case", k)
	}
	r := &Result{Raw: raw}
	if rt := v.Get("resultType"); rt.Type == gjson.String && rt.Str == "input_required" && !strict {
		r.InputRequired = true
		return r, nil
	}
	switch e := v.Get("isError"); {
	case !e.Exists():
	case e.IsBool():
		r.IsError = e.Bool()
	default:
		return nil, fmt.Errorf("CallToolResult: isError must be a boolean")
	}
	content := v.Get("content")
	if !content.IsArray() {
		return nil, fmt.Errorf("CallToolResult: content must be an array")
	}
	r.items = content.Array()
	for i, it := range r.items {
		if err := checkItem(it, strict); err != nil {
			return nil, fmt.Errorf("CallToolResult: content[%d]: %w", i, err)
		}
	}
	if s := v.Get("structuredContent"); s.Exists() {
		r.structured, r.hasStructured = s, true
	}
	return r, nil
}

// checkItem validates one content item: an object with a string type, and for the known
// types the members a client needs to decode it.
func checkItem(it gjson.Result, strict bool) error {
	if !it.IsObject() {
		return fmt.Errorf("not an object")
	}
	typ := it.Get("type")
	if typ.Type != gjson.String || typ.Str == "" {
		return fmt.Errorf("type must be a non-empty string")
	}
	need := func(paths ...string) error {
		for _, p := range paths {
			if it.Get(p).Type != gjson.String {
				return fmt.Errorf("%s item needs a string %s", typ.Str, p)
			}
		}
		return nil
	}
	switch typ.Str {
	case ItemText:
		return need("text")
	case ItemImage, ItemAudio:
		return need("data", "mimeType")
	case ItemResourceLink:
		return need("uri", "name")
	case ItemResource:
		res := it.Get("resource")
		if !res.IsObject() || res.Get("uri").Type != gjson.String {
			return fmt.Errorf("resource item needs a resource object with a string uri")
		}
		if res.Get("text").Type != gjson.String && res.Get("blob").Type != gjson.String {
			return fmt.Errorf("resource item needs a string text or blob")
		}
		return nil
	}
	if strict {
		return fmt.Errorf("unknown content type %q", typ.Str)
	}
	return nil
}

// partOrigin says which native member a canonical part came from.
type partOrigin struct {
	index      int    // content index; -1 for structuredContent
	text       string // the part's original text (text parts)
	attachment bool
	textPath   string // sjson path of the item's own text; "" when the part is the serialized item
	base64     bool   // the text at textPath is base64-encoded (a text resource's blob)
}

// blobText decodes the base64 blob of a resource whose media type is textual and whose
// bytes are UTF-8 text.
func blobText(mediaType, blob string) (string, bool) {
	if !mapping.TextualMediaType(mediaType) {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(blob)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(blob); err != nil {
			return "", false
		}
	}
	if !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// Output is the canonical view of one CallToolResult (the items of tool.after) together
// with what is needed to render an effective output back onto it.
type Output struct {
	Result *Result
	Items  []ahp.Message
	origin map[string]partOrigin
}

// NewOutput builds the tool.after items of r: one role "tool" message with id messageID.
// Part ids are messageID + ".c<n>" for content[n] and messageID + ".structured".
func NewOutput(messageID string, r *Result) *Output {
	o := &Output{Result: r, origin: make(map[string]partOrigin, len(r.items)+1)}
	msg := ahp.Message{ID: messageID, Role: ahp.RoleTool, Parts: make([]ahp.Part, 0, len(r.items)+1), Synthesized: true}
	for i, it := range r.items {
		id := messageID + ".c" + strconv.Itoa(i)
		p, org := itemPart(id, it)
		org.index = i
		p.Synthesized = true
		msg.Parts = append(msg.Parts, p)
		o.origin[id] = org
	}
	if r.hasStructured {
		id := messageID + ".structured"
		p := toolText(id, r.structured.Raw)
		p.Synthesized = true
		msg.Parts = append(msg.Parts, p)
		o.origin[id] = partOrigin{index: -1, text: r.structured.Raw}
	}
	o.Items = []ahp.Message{msg}
	return o
}

func toolText(id, text string) ahp.Part {
	p := ahp.TextPart(id, text)
	p.Category = ahp.CategoryToolResult
	return p
}

// itemPart maps one content item to its canonical part.
func itemPart(id string, it gjson.Result) (ahp.Part, partOrigin) {
	switch it.Get("type").Str {
	case ItemText:
		t := it.Get("text").Str
		return toolText(id, t), partOrigin{text: t, textPath: "text"}
	case ItemImage, ItemAudio:
		return attachment(id, it.Get("mimeType").Str, it.Get("data").Str), partOrigin{attachment: true}
	case ItemResource:
		res := it.Get("resource")
		if t := res.Get("text"); t.Type == gjson.String {
			return toolText(id, t.Str), partOrigin{text: t.Str, textPath: "resource.text"}
		}
		// A text resource sent as a base64 blob (a JSON or YAML file, source code) is text
		// the policies read like resource.text; an edit is written back as base64.
		if t, ok := blobText(res.Get("mimeType").Str, res.Get("blob").Str); ok {
			return toolText(id, t), partOrigin{text: t, textPath: "resource.blob", base64: true}
		}
		return attachment(id, res.Get("mimeType").Str, res.Get("blob").Str), partOrigin{attachment: true}
	}
	// resource_link and unknown types: the protocol has no JSON part kind, so the item is
	// serialized into text (AHP-CONTENT-001).
	return toolText(id, it.Raw), partOrigin{text: it.Raw}
}

// octetStream is the media type of an attachment whose declared type is missing or one
// that attachments may not have.
const octetStream = "application/octet-stream"

var (
	// notAttachmentType is the protocol's rule: attachments are never text or JSON.
	notAttachmentType = regexp.MustCompile(`(?i)^(?:text/|[^/]+/(?:[^;]+\+)?json(?:;|$))`)
	// mediaTypeShape is a type/subtype pair without spaces.
	mediaTypeShape = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(?:;.*)?$`)
)

// attachment describes base64 data by metadata only: hookproxy never uploads bytes, and
// size and sha256 let a policy recognise known content without seeing it.
func attachment(id, mediaType, data string) ahp.Part {
	if !mediaTypeShape.MatchString(mediaType) || notAttachmentType.MatchString(mediaType) {
		mediaType = octetStream
	}
	p := ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaType, Selection: ahp.SelectionMetadata}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(data)
	}
	if err == nil {
		n := int64(len(b))
		sum := sha256.Sum256(b)
		p.Size, p.SHA256 = &n, hex.EncodeToString(sum[:])
	}
	return p
}

// Apply renders the effective output (the tool.after items after accepted edits) back
// onto the result and returns the new CallToolResult. Members other than content and
// structuredContent keep their bytes; see the package documentation for the rules. An
// edit that cannot be rendered (a new or altered attachment, a part without text) is an
// error: the unedited result must not reach the caller in its place.
func (o *Output) Apply(effective []ahp.Message) ([]byte, error) {
	var (
		items             [][]byte
		seen              = make(map[string]bool, len(o.origin))
		textChanged       bool
		structuredKept    bool
		structuredEdited  bool
		newStructuredText string
	)
	for _, m := range effective {
		for _, p := range m.Parts {
			org, known := o.origin[p.ID]
			if known {
				seen[p.ID] = true
			}
			switch {
			case p.Kind == ahp.KindAttachment:
				if !known || !org.attachment {
					return nil, fmt.Errorf("mcp: part %s: hookproxy holds no bytes for a new attachment", p.ID)
				}
				items = append(items, []byte(o.Result.items[org.index].Raw))
			case p.Kind != ahp.KindText || p.Text == nil:
				return nil, fmt.Errorf("mcp: part %s: a part without inline text cannot be rendered", p.ID)
			case known && org.attachment:
				return nil, fmt.Errorf("mcp: part %s: an attachment cannot become text", p.ID)
			case known && org.index < 0:
				structuredKept = true
				if *p.Text != org.text {
					structuredEdited, newStructuredText = true, *p.Text
				}
			case known && *p.Text == org.text:
				items = append(items, []byte(o.Result.items[org.index].Raw))
			case known && org.textPath != "":
				textChanged = true
				text := *p.Text
				if org.base64 {
					text = base64.StdEncoding.EncodeToString([]byte(text))
				}
				it, err := sjson.SetBytes([]byte(o.Result.items[org.index].Raw), org.textPath, text)
				if err != nil {
					return nil, fmt.Errorf("mcp: part %s: %w", p.ID, err)
				}
				items = append(items, it)
			default:
				// A changed serialized item, or a new part: a plain text item.
				if known {
					textChanged = true
				}
				items = append(items, textItem(*p.Text))
			}
		}
	}
	for id, org := range o.origin {
		if !seen[id] && !org.attachment && org.index >= 0 {
			textChanged = true // removed text is changed text
		}
	}
	out, err := sjson.SetRawBytes(o.Result.Raw, "content", EncodeBatch(items))
	if err != nil {
		return nil, fmt.Errorf("mcp: set content: %w", err)
	}
	if !o.Result.hasStructured {
		return out, nil
	}
	switch {
	case structuredEdited && json.Valid([]byte(newStructuredText)):
		// The policy rewrote the structured value itself: that is the effective value.
		out, err = sjson.SetRawBytes(out, "structuredContent", []byte(newStructuredText))
	case structuredKept && !structuredEdited && !textChanged:
		// Only additions: the original structured value still agrees with the text.
	default:
		// Text was rewritten or removed, or the structured part was dropped or is no longer
		// JSON: keeping the original would return what the policy took out.
		out, err = sjson.DeleteBytes(out, "structuredContent")
	}
	if err != nil {
		return nil, fmt.Errorf("mcp: set structuredContent: %w", err)
	}
	return out, nil
}

// textItem renders a text content item.
func textItem(text string) []byte {
	return append(appendString([]byte(`{"type":"text","text":`), text), '}')
}

// DenialResult renders a refusal as the CallToolResult the caller receives in place of the
// tool's: the reason as text, isError true. The agent's model reads it like any tool error
// and can adapt, which a transport-level error would not allow.
func DenialResult(reason string) []byte {
	out := append(textItem(reason), `],"isError":true}`...)
	return append([]byte(`{"content":[`), out...)
}

// DenialError renders a refusal as a JSON-RPC error response: code CodePolicyDenied,
// message REASON, data {"code": CODE}.
func DenialError(id json.RawMessage, reason, code string) []byte {
	data := appendString([]byte(`{"code":`), code)
	return ErrorResponse(id, CodePolicyDenied, reason, append(data, '}'))
}

// ReplaceResult returns the raw response msg with its result replaced by result.
func ReplaceResult(msg []byte, result []byte) ([]byte, error) {
	out, err := sjson.SetRawBytes(msg, "result", result)
	if err != nil {
		return nil, fmt.Errorf("mcp: set result: %w", err)
	}
	return out, nil
}
