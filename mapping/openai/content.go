package openai

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Gap reasons shared by the OpenAI translators.
const (
	gapRemoteURL  = "remote URL not fetched"
	gapProviderID = "file held by provider (file_id) not fetched"
	gapUndecoded  = "data URL could not be decoded"
)

// mediaOctetStream is the media type of an attachment whose real type is unknown or is a
// type the protocol does not allow for attachments.
const mediaOctetStream = "application/octet-stream"

// messageID derives the id of a native message that has none: position, native role and
// content, so the same message at the same position keeps its id while the conversation
// grows (SPEC-DIGEST §15.4). Whitespace outside strings does not count.
func messageID(index int, role, raw string) string {
	h := sha256.New()
	var buf [24]byte
	h.Write(strconv.AppendInt(buf[:0], int64(index), 10))
	h.Write([]byte{0})
	io.WriteString(h, role)
	h.Write([]byte{0})
	writeCompact(h, raw)
	var sum [sha256.Size]byte
	return "m" + hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// partID is the id of the n-th part of message id.
func partID(messageID string, n int) string {
	return messageID + ".p" + strconv.Itoa(n)
}

// legacyCallID names a deprecated function_call, which has no native id. It depends only on
// the call itself, so the call keeps its id from the response that produced it to every
// later request that replays it.
func legacyCallID(name, arguments string) string {
	h := sha256.New()
	io.WriteString(h, name)
	h.Write([]byte{0})
	io.WriteString(h, arguments)
	var sum [sha256.Size]byte
	return "fc_" + hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// dataURL is a parsed RFC 2397 data: URL.
type dataURL struct {
	mediaType string // lower case, "" when the URL names none
	payload   string
	base64    bool
}

// parseDataURL parses u when it is a data: URL.
func parseDataURL(u string) (dataURL, bool) {
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return dataURL{}, false
	}
	meta, payload, ok := strings.Cut(u[5:], ",")
	if !ok {
		return dataURL{}, false
	}
	d := dataURL{payload: payload}
	params := strings.Split(meta, ";")
	if n := len(params); n > 1 && strings.EqualFold(strings.TrimSpace(params[n-1]), "base64") {
		d.base64 = true
		params = params[:n-1]
	}
	if mt := strings.ToLower(strings.TrimSpace(params[0])); strings.Contains(mt, "/") {
		d.mediaType = mt
	}
	return d, true
}

// digest returns the size and sha256 of the decoded bytes without holding them.
func (d dataURL) digest() (size int64, sum string, ok bool) {
	if !d.base64 {
		b, err := url.PathUnescape(d.payload)
		if err != nil {
			return 0, "", false
		}
		s := sha256.Sum256([]byte(b))
		return int64(len(b)), hex.EncodeToString(s[:]), true
	}
	// Padded first; some clients drop the padding. The decoder skips line breaks.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		h := sha256.New()
		n, err := io.Copy(h, base64.NewDecoder(enc, strings.NewReader(d.payload)))
		if err == nil {
			return n, hex.EncodeToString(h.Sum(nil)), true
		}
	}
	return 0, "", false
}

// bytes decodes the payload.
func (d dataURL) bytes() ([]byte, bool) {
	if !d.base64 {
		b, err := url.PathUnescape(d.payload)
		return []byte(b), err == nil
	}
	p := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, d.payload)
	b, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(p)
	}
	return b, err == nil
}

// forbiddenAttachmentType is the schema's rule: attachments are never text or JSON
// (content-item.schema.json, mediaType "not" pattern).
var forbiddenAttachmentType = regexp.MustCompile(`^(?i:text/|[^/]+/(?:[^;]+\+)?json(?:;|$))`)

// isTextMediaType reports whether content of media type mt must be carried as text.
func isTextMediaType(mt string) bool { return forbiddenAttachmentType.MatchString(mt) }

// attachmentType returns mt when it is usable for an attachment part, else fallback.
func attachmentType(mt, fallback string) string {
	if mt == "" || isTextMediaType(mt) {
		return fallback
	}
	return mt
}

// typeFromName guesses a media type from a file name or URL path extension.
func typeFromName(name string) string {
	ext := strings.ToLower(path.Ext(name))
	switch ext {
	case "":
		return ""
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".png":
		return "image/png"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".pdf":
		return "application/pdf"
	case ".mp3":
		return "audio/mpeg"
	case ".wav":
		return "audio/wav"
	}
	mt, _, _ := strings.Cut(mime.TypeByExtension(ext), ";")
	return strings.ToLower(mt)
}

// audioType maps an input_audio format ("wav", "mp3") to a media type.
func audioType(format string) string {
	switch strings.ToLower(format) {
	case "mp3", "mpeg":
		return "audio/mpeg"
	case "":
		return "audio/*"
	}
	f := strings.ToLower(format)
	if !isToken(f) {
		return "audio/*"
	}
	return "audio/" + f
}

// isToken reports whether s is a plausible media subtype token.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '+') {
			return false
		}
	}
	return s != ""
}

// metadataAttachment is an attachment part that names its bytes without carrying them.
func metadataAttachment(id, mediaType string, d *dataURL) ahp.Part {
	p := ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaType, Selection: ahp.SelectionMetadata}
	if d != nil {
		if size, sum, ok := d.digest(); ok {
			p.Size, p.SHA256 = &size, sum
		} else {
			p.Selection = ahp.SelectionBody
			p.Gap = &ahp.Gap{Reason: gapUndecoded}
		}
	}
	return p
}

// gapAttachment is an attachment part whose body hookproxy cannot supply.
func gapAttachment(id, mediaType, reason string) ahp.Part {
	return ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaType, Selection: ahp.SelectionBody,
		Gap: &ahp.Gap{Reason: reason}}
}

// textFromDataURL returns the decoded text of a text-typed data URL.
func textFromDataURL(d dataURL) (string, bool) {
	b, ok := d.bytes()
	if !ok || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// encodeDataURL renders text as a base64 data URL of media type mt.
func encodeDataURL(mt, text string) string {
	if mt == "" {
		mt = ahp.MediaTypeText
	}
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString([]byte(text))
}

// --- canonical comparisons and copies ---

// partsEqual compares two parts field by field (pointers by value).
func partsEqual(a, b *ahp.Part) bool {
	if a.ID != b.ID || a.Kind != b.Kind || a.MediaType != b.MediaType || a.Selection != b.Selection ||
		a.Category != b.Category || a.SHA256 != b.SHA256 || a.Synthesized != b.Synthesized {
		return false
	}
	if (a.Text == nil) != (b.Text == nil) || a.Text != nil && *a.Text != *b.Text {
		return false
	}
	if (a.Size == nil) != (b.Size == nil) || a.Size != nil && *a.Size != *b.Size {
		return false
	}
	if (a.Body == nil) != (b.Body == nil) || a.Body != nil && *a.Body != *b.Body {
		return false
	}
	if (a.Gap == nil) != (b.Gap == nil) || a.Gap != nil && *a.Gap != *b.Gap {
		return false
	}
	return true
}

// partListsEqual compares two part lists.
func partListsEqual(a, b []ahp.Part) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !partsEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// messagesEqual compares id, role and parts. The synthesized flag is ignored: a hook that
// hands a message back without it has not changed what the model sees.
func messagesEqual(a, b *ahp.Message) bool {
	return a.ID == b.ID && a.Role == b.Role && partListsEqual(a.Parts, b.Parts)
}

// itemsEqual compares two message lists without allocating.
func itemsEqual(a, b []ahp.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !messagesEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// cloneParts deep-copies parts so that later edits by other packages cannot alter the
// translator's record of the original.
func cloneParts(ps []ahp.Part) []ahp.Part {
	out := make([]ahp.Part, len(ps))
	for i, p := range ps {
		if p.Text != nil {
			t := *p.Text
			p.Text = &t
		}
		if p.Size != nil {
			s := *p.Size
			p.Size = &s
		}
		if p.Body != nil {
			b := *p.Body
			p.Body = &b
		}
		if p.Gap != nil {
			g := *p.Gap
			p.Gap = &g
		}
		out[i] = p
	}
	return out
}

// cloneItems deep-copies a message list.
func cloneItems(ms []ahp.Message) []ahp.Message {
	out := make([]ahp.Message, len(ms))
	for i, m := range ms {
		m.Parts = cloneParts(m.Parts)
		out[i] = m
	}
	return out
}

// textPart builds a body text part with a category.
func textPart(id, text, category string) ahp.Part {
	p := ahp.TextPart(id, text)
	p.Category = category
	return p
}

// --- attachment entries shared by the OpenAI APIs ---

// imagePart is the part of an image URL: a data: URL names its bytes (metadata, size,
// sha256); a remote URL is not fetched, so its body is a gap.
func imagePart(id, u string, np *nativePart) ahp.Part {
	if du, ok := parseDataURL(u); ok {
		np.data, np.hasData = du, true
		return metadataAttachment(id, attachmentType(du.mediaType, "image/*"), &du)
	}
	return gapAttachment(id, remoteImageType(u), gapRemoteURL)
}

// remoteImageType guesses an image type from a URL's extension; "image/*" otherwise.
func remoteImageType(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if mt := typeFromName(u.Path); strings.HasPrefix(mt, "image/") {
			return mt
		}
	}
	return "image/*"
}

// audioPart is the part of base64 audio data (or a data: URL) in the given format.
func audioPart(id, data, format string, np *nativePart) ahp.Part {
	du, ok := parseDataURL(data)
	if !ok {
		du = dataURL{payload: data, base64: true}
	}
	mt := audioType(format)
	if ok && du.mediaType != "" {
		mt = attachmentType(du.mediaType, mt)
	}
	np.data, np.hasData = du, true
	return metadataAttachment(id, mt, &du)
}

// filePart decodes a file entry whose fields sit under prefix ("file." in Chat
// Completions, "" in Responses): inline data (a data URL or bare base64), a remote
// file_url, or a provider-held file_id. A text file becomes a text part, because the
// protocol carries text inline and never as an attachment (SPEC-DIGEST §4.2).
func filePart(e gjson.Result, id, prefix string, np *nativePart) (ahp.Part, error) {
	name := e.Get(prefix + "filename").String()
	if fd := e.Get(prefix + "file_data"); fd.Type == gjson.String && fd.Str != "" {
		du, ok := parseDataURL(fd.Str)
		if !ok {
			du = dataURL{payload: fd.Str, base64: true}
		}
		mt := du.mediaType
		if mt == "" {
			mt = typeFromName(name)
		}
		if isTextMediaType(mt) {
			if text, ok := textFromDataURL(du); ok {
				np.src, np.fileType, np.field = srcFileText, mt, prefix+"file_data"
				return ahp.TextPart(id, text), nil
			}
			mt = mediaOctetStream
		}
		np.data, np.hasData = du, true
		return metadataAttachment(id, attachmentType(mt, mediaOctetStream), &du), nil
	}
	if fu := e.Get(prefix + "file_url"); fu.Type == gjson.String && fu.Str != "" {
		return gapAttachment(id, attachmentType(typeFromName(name), mediaOctetStream), gapRemoteURL), nil
	}
	if fid := e.Get(prefix + "file_id"); fid.Type == gjson.String && fid.Str != "" {
		return gapAttachment(id, attachmentType(typeFromName(name), mediaOctetStream), gapProviderID), nil
	}
	return ahp.Part{}, fmt.Errorf("file part without file_data, file_url or file_id")
}
