package anthropic

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
)

// Native content block types this package maps (SDK ContentBlockParamUnion,
// ContentBlockUnion).
const (
	blockText             = "text"
	blockImage            = "image"
	blockDocument         = "document"
	blockThinking         = "thinking"
	blockRedactedThinking = "redacted_thinking"
	blockToolUse          = "tool_use"
	blockToolResult       = "tool_result"
	blockSearchResult     = "search_result"
)

const mediaOctetStream = "application/octet-stream"

// origin ties a canonical part to the native block it was decoded from, so that encoding
// can copy an unchanged block byte for byte or patch only the field that changed.
type origin struct {
	part *ahp.Part // as decoded, in the translator's own list of the items (requestState.items)
	raw  string    // native block JSON; "" when the part stands for several blocks
	typ  string    // native block type
	// item and at place part in the translator's own list (request side), until it is pointed at.
	item, at int32
}

// decodedBlock is one native block decoded into a canonical part.
type decodedBlock struct {
	part        ahp.Part
	typ         string
	fingerprint string // content identity for id hashing when the part has no text or digest
	gap         string // set when the block is carried natively only
	// tool_use blocks: the call, as the part's text holds it (input compacted).
	callID, name, input string
}

// blockFieldNames are the members of a content block that decoding reads, all in one pass
// over the block (each gjson Get would rescan it); the b* constants index them in a
// blockFields.
var blockFieldNames = [...]string{bType: "type", bText: "text", bThinking: "thinking", bData: "data",
	bID: "id", bName: "name", bInput: "input", bSource: "source", bCacheControl: "cache_control",
	bToolUseID: "tool_use_id", bIsError: "is_error", bContent: "content",
	bTitle: "title", bContext: "context", bCitations: "citations"}

const (
	bType = iota
	bText
	bThinking
	bData
	bID
	bName
	bInput
	bSource
	bCacheControl
	bToolUseID
	bIsError
	bContent
	// Read only to tell whether the request has a messages residue (hasResidue).
	bTitle
	bContext
	bCitations
	numBlockFields
)

// blockFields holds a block's members, indexed by the b* constants; a member the block does
// not have does not Exist.
type blockFields [numBlockFields]gjson.Result

// mayHaveResidue reports whether a block with these members could give the messages
// residue (appendResidue) anything: a member it keeps (of any type), a source, or a
// nested tool_result. Conservative: a false answer for every block of a request means its
// residue is empty, so the residue pass is skipped.
func (f *blockFields) mayHaveResidue() bool {
	return f[bTitle].Exists() || f[bContext].Exists() || f[bCitations].Exists() || f[bSource].Exists()
}

// sourceFieldNames are the members of an image or document source that decoding reads.
var sourceFieldNames = [...]string{sType: "type", sMediaType: "media_type", sData: "data"}

const (
	sType = iota
	sMediaType
	sData
	numSourceFields
)

// blockReader decodes content blocks. A request decode gives it an arena for the strings
// and text pointers it makes; with a nil arena each is allocated on its own.
type blockReader struct {
	arena   *mapping.Arena
	scratch []byte // reused for building texts before they go to the arena
}

// fields reads the members of b (a parsed block) in one pass; b need not be an object.
func (r *blockReader) fields(b gjson.Result, f *blockFields) {
	if b.IsObject() {
		r.arena.Pick(b, blockFieldNames[:], f[:])
	}
}

// textPart is ahp.TextPart with its text pointer from the arena.
func (r *blockReader) textPart(id, text string) ahp.Part {
	return ahp.Part{ID: id, Kind: ahp.KindText, MediaType: ahp.MediaTypeText, Selection: ahp.SelectionBody,
		Text: r.arena.Text(text)}
}

// decodeBlock maps one content block (user, assistant or tool_result content) to its part.
// Errors describe the block; callers add its location.
func decodeBlock(b gjson.Result, id string) (decodedBlock, error) {
	var r blockReader
	var f blockFields
	r.fields(b, &f)
	return r.decode(b, &f, id)
}

// decode is decodeBlock for a block whose members f holds (fields).
func (r *blockReader) decode(b gjson.Result, f *blockFields, id string) (decodedBlock, error) {
	if !b.IsObject() {
		return decodedBlock{}, errors.New("content block must be an object")
	}
	t := f[bType]
	if t.Type != gjson.String || t.Str == "" {
		return decodedBlock{}, errors.New("content block needs a string type")
	}
	d := decodedBlock{typ: t.Str}
	switch t.Str {
	case blockText:
		s, err := stringValue(f[bText], "text")
		if err != nil {
			return d, err
		}
		d.part = r.textPart(id, s)
	case blockThinking:
		s, err := stringValue(f[bThinking], "thinking")
		if err != nil {
			return d, err
		}
		// The signature stays in the native block only: it is provider proof, not content.
		d.part = r.textPart(id, s)
		d.part.Category = ahp.CategoryReasoning
	case blockRedactedThinking:
		// Encrypted reasoning: classified, never given invented text.
		d.part = ahp.Part{ID: id, Kind: ahp.KindText, MediaType: ahp.MediaTypeText,
			Selection: ahp.SelectionMetadata, Category: ahp.CategoryReasoning}
		d.fingerprint = f[bData].String()
	case blockToolUse:
		callID, err := stringValue(f[bID], "id")
		if err != nil {
			return d, err
		}
		name, err := stringValue(f[bName], "name")
		if err != nil {
			return d, err
		}
		if callID == "" || name == "" {
			return d, errors.New("tool_use block needs a non-empty id and name")
		}
		mapping.NoteCallDecode()
		input := `{}`
		if in := f[bInput]; in.Exists() {
			if !in.IsObject() {
				return d, errors.New("tool_use input must be an object")
			}
			input = in.Raw
		}
		d.part, d.input = r.arena.ToolCallPart(id, callID, name, input)
		d.callID, d.name = callID, name
	case blockImage:
		var src [numSourceFields]gjson.Result
		r.arena.Pick(f[bSource], sourceFieldNames[:], src[:])
		d.part = sourceAttachment(id, &src, "")
		d.part.Category = imageCategory(d.part.MediaType)
		if d.part.SHA256 == "" {
			d.fingerprint = fingerprint(b, f)
		}
	case blockDocument:
		var src [numSourceFields]gjson.Result
		r.arena.Pick(f[bSource], sourceFieldNames[:], src[:])
		switch src[sType].String() {
		case "text":
			// Plain-text documents are text: attachments may not be text/* (AHP-CONTENT-001).
			s, err := stringValue(src[sData], "data")
			if err != nil {
				return d, fmt.Errorf("document source: %w", err)
			}
			d.part = r.textPart(id, s)
		case "base64":
			// A text/* document in base64 is text the model reads: decoded, it is a text
			// part like a plain-text source (rendered back in base64).
			if s, ok := base64Text(src[sMediaType].String(), src[sData].String()); ok {
				d.part = r.textPart(id, s)
				break
			}
			d.part = sourceAttachment(id, &src, "application/pdf")
			if d.part.SHA256 == "" {
				d.fingerprint = fingerprint(b, f)
			}
		case "url", "file":
			d.part = sourceAttachment(id, &src, "application/pdf")
			if d.part.SHA256 == "" {
				d.fingerprint = fingerprint(b, f)
			}
		case "content":
			// A custom-content document: its text blocks, joined, as one text part.
			if s, ok := subTexts(b.Get("source.content")); ok {
				d.part = r.textPart(id, s)
				break
			}
			d = gapBlock(b, f, id, t.Str+" with a content source that is not text blocks")
		default:
			d = gapBlock(b, f, id, t.Str+" with a "+quoteOr(src[sType].String(), "missing")+" source")
		}
	case blockSearchResult:
		// Search results are text the model reads (and cites): their text blocks, joined,
		// as one text part; source and title stay native.
		if s, ok := subTexts(f[bContent]); ok {
			d.part = r.textPart(id, s)
			break
		}
		d = gapBlock(b, f, id, t.Str)
	default:
		d = gapBlock(b, f, id, t.Str)
	}
	return d, nil
}

// base64Text decodes a text/* document's base64 data; ok is false for another media type
// or data that is not base64 of UTF-8 text.
func base64Text(mediaType, data string) (string, bool) {
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(mediaType)), "text/") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw), true
}

// subTexts joins the text of a content array made only of text blocks (search_result and
// custom-content document content). ok is false when it holds anything else.
func subTexts(c gjson.Result) (string, bool) {
	if !c.IsArray() {
		return "", false
	}
	var b strings.Builder
	ok, n := true, 0
	c.ForEach(func(_, e gjson.Result) bool {
		t := e.Get("text")
		if e.Get("type").String() != blockText || t.Type != gjson.String {
			ok = false
			return false
		}
		if n > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(t.Str)
		n++
		return true
	})
	return b.String(), ok && n > 0
}

// renderSubTexts renders an edited text onto a content array of text blocks (path in
// raw): the first block takes the whole text, the others are dropped, so every other
// member of the block (source, title, citations settings) survives.
func renderSubTexts(raw, path, text string) (string, error) {
	first := gjson.Get(raw, path+".0")
	blk, err := mapping.SetRaw(first.Raw, "text", mapping.Quote(text))
	if err != nil {
		return "", err
	}
	return mapping.SetRaw(raw, path, "["+blk+"]")
}

// gapBlock is a block the canonical model cannot carry (server tool blocks, search
// results, ...): a text part with a gap, so its position and identity stay visible and a
// removal still removes it, while the bytes travel natively. f holds b's members.
func gapBlock(b gjson.Result, f *blockFields, id, what string) decodedBlock {
	reason := "anthropic " + what + " block is carried natively only"
	return decodedBlock{
		part: ahp.Part{ID: id, Kind: ahp.KindText, MediaType: ahp.MediaTypeText,
			Selection: ahp.SelectionBody, Gap: &ahp.Gap{Reason: reason}},
		typ:         f[bType].String(),
		fingerprint: fingerprint(b, f),
		gap:         reason,
	}
}

func quoteOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return fmt.Sprintf("%q", s)
}

// sourceAttachment maps an image or document source to a metadata attachment. base64 data
// is measured and hashed (never fetched or uploaded here); url and file sources carry no
// bytes, so they get no size. src holds the source's members.
func sourceAttachment(id string, src *[numSourceFields]gjson.Result, defaultMedia string) ahp.Part {
	mt := src[sMediaType].String()
	switch src[sType].String() {
	case "url":
		if mt == "" {
			mt = defaultMedia
		}
	case "base64":
		if mt == "" {
			mt = defaultMedia
		}
	}
	if mt == "" || !validAttachmentType(mt) {
		mt = mediaOctetStream
	}
	p := ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mt, Selection: ahp.SelectionMetadata}
	if src[sType].String() == "base64" {
		if size, sum, ok := measureBase64(src[sData].String()); ok {
			p.Size = &size
			p.SHA256 = sum
		}
	}
	return p
}

// validAttachmentType rejects media types an attachment may not have (AHP-CONTENT-001).
func validAttachmentType(mt string) bool {
	l := strings.ToLower(mt)
	if strings.HasPrefix(l, "text/") {
		return false
	}
	if i := strings.IndexByte(l, ';'); i >= 0 {
		l = l[:i]
	}
	return !strings.HasSuffix(l, "/json") && !strings.HasSuffix(l, "+json")
}

// imageCategory keeps an image whose media type is unknown classified as an image for
// content selection.
func imageCategory(mediaType string) string {
	if strings.HasPrefix(mediaType, "image/") {
		return ""
	}
	return "images"
}

// measureBase64 returns the decoded size and SHA-256 of base64 data without holding the
// decoded bytes. ok is false when the data is not base64; the upstream will reject it.
func measureBase64(data string) (int64, string, bool) {
	h := sha256.New()
	n, err := io.Copy(h, base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	if err != nil {
		return 0, "", false
	}
	return n, hex.EncodeToString(h.Sum(nil)), true
}

// fingerprint is a block's identity for id hashing: its JSON without cache_control, which
// clients move between turns. f holds b's members.
func fingerprint(b gjson.Result, f *blockFields) string {
	if !f[bCacheControl].Exists() {
		return b.Raw
	}
	s, err := sjson.Delete(b.Raw, "cache_control")
	if err != nil {
		return b.Raw
	}
	return s
}

// stringValue returns the string value v of member key, or the error that names it.
func stringValue(v gjson.Result, key string) (string, error) {
	if v.Type != gjson.String {
		return "", fmt.Errorf("%s must be a string", key)
	}
	return v.Str, nil
}

// ---- rendering canonical parts as native blocks ----

// renderPart renders one canonical part as a native content block. o is the part's origin
// when its id was decoded by this translator, else nil. ok is false when the part renders
// to nothing (an emptied text: Anthropic rejects empty text blocks).
func renderPart(p *ahp.Part, o *origin) (block string, ok bool, err error) {
	if o != nil && o.raw != "" && mapping.PartEqual(p, o.part) {
		return o.raw, true, nil
	}
	switch {
	case p.Kind == ahp.KindAttachment:
		// Attachments are immutable and hookproxy holds no bytes for new ones: only the
		// original block can be sent. Selection, size or body changes are views of it.
		if o == nil || o.raw == "" || o.part.Kind != ahp.KindAttachment {
			return "", false, fmt.Errorf("anthropic: part %s: new attachments cannot be rendered", p.ID)
		}
		if p.MediaType != o.part.MediaType || p.SHA256 != "" && p.SHA256 != o.part.SHA256 {
			return "", false, fmt.Errorf("anthropic: part %s: attachments are immutable", p.ID)
		}
		return o.raw, true, nil

	case p.Text == nil:
		// A metadata, omitted or gap view carries no new content: the original stands.
		if o != nil && o.raw != "" {
			return o.raw, true, nil
		}
		return "", false, fmt.Errorf("anthropic: part %s has no text to render", p.ID)

	case p.Category == ahp.CategoryToolCall:
		return renderToolUse(p, o)

	case p.Category == ahp.CategoryReasoning:
		if o != nil && o.typ == blockThinking && o.part.Text != nil && *o.part.Text == *p.Text {
			return o.raw, true, nil
		}
		return "", false, fmt.Errorf("%w (part %s)", ErrReasoningImmutable, p.ID)
	}

	text := *p.Text
	if o != nil && o.raw != "" {
		switch o.typ {
		case blockText:
			if text == "" {
				return "", false, nil
			}
			b, err := mapping.SetRaw(o.raw, "text", mapping.Quote(text))
			return b, err == nil, err
		case blockDocument:
			if o.part.Kind == ahp.KindText { // a text document: plain, base64 or content
				var b string
				var err error
				switch gjson.Get(o.raw, "source.type").String() {
				case "base64":
					b, err = mapping.SetRaw(o.raw, "source.data", mapping.Quote(base64.StdEncoding.EncodeToString([]byte(text))))
				case "content":
					b, err = renderSubTexts(o.raw, "source.content", text)
				default:
					b, err = mapping.SetRaw(o.raw, "source.data", mapping.Quote(text))
				}
				return b, err == nil, err
			}
		case blockSearchResult:
			if o.part.Kind == ahp.KindText && o.part.Gap == nil {
				b, err := renderSubTexts(o.raw, "content", text)
				return b, err == nil, err
			}
		}
	}
	if text == "" {
		return "", false, nil
	}
	return `{"type":"text","text":` + mapping.Quote(text) + `}`, true, nil
}

// renderToolUse renders a tool_call part as a tool_use block: the original block with
// only the changed fields patched (so cache_control, caller and unknown fields survive),
// or a new block.
func renderToolUse(p *ahp.Part, o *origin) (string, bool, error) {
	call, ok := mapping.ParseToolCall(p)
	if !ok {
		return "", false, fmt.Errorf("anthropic: part %s: tool_call text is not a {id,name,input} object", p.ID)
	}
	if o == nil || o.raw == "" || o.typ != blockToolUse {
		return writeToolUse(call, "", mapping.ToolCall{}, p.ID)
	}
	prev, _ := mapping.ParseToolCall(o.part)
	return writeToolUse(call, o.raw, prev, p.ID)
}

// writeToolUse renders call as the tool_use block raw, which was decoded as prev, with
// only the changed fields patched; raw "" is a new block. The stream editor renders a
// judged call with it too.
func writeToolUse(call mapping.ToolCall, raw string, prev mapping.ToolCall, partID string) (string, bool, error) {
	in := gjson.ParseBytes(call.Input)
	if !in.IsObject() {
		return "", false, fmt.Errorf("anthropic: part %s: tool input must be a JSON object", partID)
	}
	input, err := mapping.Compact(call.Input)
	if err != nil {
		return "", false, fmt.Errorf("anthropic: part %s: tool input: %w", partID, err)
	}
	input = mapping.UnescapeHTML(input)
	if raw == "" {
		return `{"type":"tool_use","id":` + mapping.Quote(call.ID) + `,"name":` + mapping.Quote(call.Name) + `,"input":` + input + `}`, true, nil
	}
	b := raw
	if call.ID != prev.ID {
		if b, err = mapping.SetRaw(b, "id", mapping.Quote(call.ID)); err != nil {
			return "", false, err
		}
	}
	if call.Name != prev.Name {
		if b, err = mapping.SetRaw(b, "name", mapping.Quote(call.Name)); err != nil {
			return "", false, err
		}
	}
	if prevInput, _ := mapping.Compact(prev.Input); input != mapping.UnescapeHTML(prevInput) {
		if b, err = mapping.SetRaw(b, "input", input); err != nil {
			return "", false, err
		}
	}
	return b, true, nil
}
