package responses

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

// Gap reasons. The first is the digest's own wording for server-held history (§15.4).
const (
	gapServerHistory = "earlier context held by provider"
	gapServerPrompt  = "prompt template held by provider"
	gapRemoteURL     = "remote URL not fetched"
	gapProviderFile  = "file held by provider (file_id) not fetched"
	gapUndecoded     = "data URL could not be decoded"
)

// mediaOctetStream is the media type of an attachment whose real type is unknown or is a
// type the protocol does not allow for attachments.
const mediaOctetStream = "application/octet-stream"

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

// digest returns size and sha256 of the decoded bytes without holding them all.
func (d dataURL) digest() (size int64, sum string, ok bool) {
	if !d.base64 {
		b, err := url.PathUnescape(d.payload)
		if err != nil {
			return 0, "", false
		}
		s := sha256.Sum256([]byte(b))
		return int64(len(b)), hex.EncodeToString(s[:]), true
	}
	buf := make([]byte, 4096) // io.Copy would take 32 KiB per attachment
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		h := sha256.New()
		n, err := io.CopyBuffer(h, base64.NewDecoder(enc, strings.NewReader(d.payload)), buf)
		if err == nil {
			return n, hex.EncodeToString(h.Sum(nil)), true
		}
	}
	return 0, "", false
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

// remoteType guesses a media type from a URL's extension, else fallback.
func remoteType(raw, fallback string) string {
	if u, err := url.Parse(raw); err == nil {
		if mt := typeFromName(u.Path); mt != "" && !isTextMediaType(mt) {
			return mt
		}
	}
	return fallback
}

// audioType maps an input_audio format ("wav", "mp3") to a media type.
func audioType(format string) string {
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

// metadataAttachment is an attachment part that names its bytes (size, sha256) without
// carrying them; bytes that cannot be decoded become a body gap instead.
func metadataAttachment(id, mediaType string, d dataURL) ahp.Part {
	p := ahp.Part{ID: id, Kind: ahp.KindAttachment, MediaType: mediaType, Selection: ahp.SelectionMetadata}
	if size, sum, ok := d.digest(); ok {
		p.Size, p.SHA256 = &size, sum
	} else {
		p.Selection = ahp.SelectionBody
		p.Gap = &ahp.Gap{Reason: gapUndecoded}
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

// textPart builds a body text part with a category.
func textPart(id, text, category string) ahp.Part {
	p := ahp.TextPart(id, text)
	p.Category = category
	return p
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
	return (a.Gap == nil) == (b.Gap == nil) && (a.Gap == nil || *a.Gap == *b.Gap)
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

// messagesEqual compares id, role and parts. The synthesized flag does not count: a hook that
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

// cloneParts deep-copies parts, so that later edits elsewhere cannot alter the translator's
// record of the original.
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
