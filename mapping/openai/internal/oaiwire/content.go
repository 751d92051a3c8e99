package oaiwire

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"mime"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Gap reasons shared by the OpenAI translators.
const (
	GapRemoteURL    = "remote URL not fetched"
	GapProviderFile = "file held by provider (file_id) not fetched"
	GapUndecoded    = "data URL could not be decoded"
)

// MediaOctetStream is the media type of an attachment whose real type is unknown or is a
// type the protocol does not allow for attachments.
const MediaOctetStream = "application/octet-stream"

// DataURL is a parsed RFC 2397 data: URL, or bare base64 data.
type DataURL struct {
	MediaType string // lower case, "" when the URL names none
	Payload   string
	Base64    bool
}

// ParseDataURL parses u when it is a data: URL.
func ParseDataURL(u string) (DataURL, bool) {
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return DataURL{}, false
	}
	meta, payload, ok := strings.Cut(u[5:], ",")
	if !ok {
		return DataURL{}, false
	}
	d := DataURL{Payload: payload}
	params := strings.Split(meta, ";")
	if n := len(params); n > 1 && strings.EqualFold(strings.TrimSpace(params[n-1]), "base64") {
		d.Base64 = true
		params = params[:n-1]
	}
	if mt := strings.ToLower(strings.TrimSpace(params[0])); strings.Contains(mt, "/") {
		d.MediaType = mt
	}
	return d, true
}

// InlineData parses s as a data: URL; anything else is taken as bare base64. isURL reports
// which it was.
func InlineData(s string) (d DataURL, isURL bool) {
	d, isURL = ParseDataURL(s)
	if !isURL {
		d = DataURL{Payload: s, Base64: true}
	}
	return d, isURL
}

// Digest returns the size and sha256 of the decoded bytes without holding them all.
func (d DataURL) Digest() (size int64, sum string, ok bool) {
	if !d.Base64 {
		b, err := url.PathUnescape(d.Payload)
		if err != nil {
			return 0, "", false
		}
		s := sha256.Sum256([]byte(b))
		return int64(len(b)), hex.EncodeToString(s[:]), true
	}
	// Padded first; some clients drop the padding. The decoder skips line breaks.
	buf := make([]byte, 4096) // io.Copy would take 32 KiB per attachment
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		h := sha256.New()
		n, err := io.CopyBuffer(h, base64.NewDecoder(enc, strings.NewReader(d.Payload)), buf)
		if err == nil {
			return n, hex.EncodeToString(h.Sum(nil)), true
		}
	}
	return 0, "", false
}

// Bytes decodes the payload.
func (d DataURL) Bytes() ([]byte, bool) {
	if !d.Base64 {
		b, err := url.PathUnescape(d.Payload)
		return []byte(b), err == nil
	}
	p := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, d.Payload)
	b, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(p)
	}
	return b, err == nil
}

// Text returns the decoded payload when it is valid UTF-8.
func (d DataURL) Text() (string, bool) {
	b, ok := d.Bytes()
	if !ok || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// EncodeDataURL renders text as a base64 data URL of media type mt.
func EncodeDataURL(mt, text string) string {
	if mt == "" {
		mt = ahp.MediaTypeText
	}
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString([]byte(text))
}

// forbiddenAttachmentType is the schema's rule: attachments are never text or JSON
// (content-item.schema.json, mediaType "not" pattern).
var forbiddenAttachmentType = regexp.MustCompile(`^(?i:text/|[^/]+/(?:[^;]+\+)?json(?:;|$))`)

// IsTextMediaType reports whether content of media type mt must be carried as text.
func IsTextMediaType(mt string) bool { return forbiddenAttachmentType.MatchString(mt) }

// AttachmentType returns mt when it is usable for an attachment part, else fallback.
func AttachmentType(mt, fallback string) string {
	if mt == "" || IsTextMediaType(mt) {
		return fallback
	}
	return mt
}

// TypeFromName guesses a media type from a file name or URL path extension.
func TypeFromName(name string) string {
	switch ext := strings.ToLower(path.Ext(name)); ext {
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
	default:
		mt, _, _ := strings.Cut(mime.TypeByExtension(ext), ";")
		return strings.ToLower(mt)
	}
}

// AudioType maps an input_audio format ("wav", "mp3") to a media type.
func AudioType(format string) string {
	f := strings.ToLower(format)
	switch f {
	case "mp3", "mpeg":
		return "audio/mpeg"
	case "":
		return "audio/*"
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '+') {
			return "audio/*"
		}
	}
	return "audio/" + f
}

// MetadataAttachment is an attachment part that names its bytes (size, sha256) without
// carrying them; bytes that cannot be decoded become a body gap instead.
func MetadataAttachment(id, mediaType string, d DataURL) ahp.Part {
	p := ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaType, Selection: ahp.SelectionMetadata}
	if size, sum, ok := d.Digest(); ok {
		p.Size, p.SHA256 = &size, sum
	} else {
		p.Selection = ahp.SelectionBody
		p.Gap = &ahp.Gap{Reason: GapUndecoded}
	}
	return p
}

// GapAttachment is an attachment part whose body hookproxy cannot supply.
func GapAttachment(id, mediaType, reason string) ahp.Part {
	return ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaType, Selection: ahp.SelectionBody,
		Gap: &ahp.Gap{Reason: reason}}
}

// FileData decodes the file_data of a file entry (a data URL or bare base64); nameType is
// the media type guessed from the entry's file name, used when the data names none. A text
// file becomes a text part and textType is its media type, because the protocol carries
// text inline and never as an attachment (AHP-CONTENT-001); anything else is a metadata
// attachment whose bytes are d.
func FileData(id, data, nameType string) (p ahp.Part, d DataURL, textType string) {
	d, _ = InlineData(data)
	mt := d.MediaType
	if mt == "" {
		mt = nameType
	}
	if IsTextMediaType(mt) {
		if text, ok := d.Text(); ok {
			return ahp.TextPart(id, text), d, mt
		}
		mt = MediaOctetStream
	}
	return MetadataAttachment(id, AttachmentType(mt, MediaOctetStream), d), d, ""
}

// TextPart builds a body text part with a category.
func TextPart(id, text, category string) ahp.Part {
	p := ahp.TextPart(id, text)
	p.Category = category
	return p
}
