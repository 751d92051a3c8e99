package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/mapping"
	"github.com/hookproxy/hookproxy/mapping/openai/internal/oaiwire"
)

// messageID derives the id of a native message that has none: position, native role and
// content, so the same message at the same position keeps its id while the conversation
// grows. Whitespace outside strings does not count. The id is held in
// a, or allocated when a is nil.
func messageID(a *mapping.Arena, index int, role, raw string) string {
	ih := idHashes.Get().(*idHash)
	defer idHashes.Put(ih)
	ih.h.Reset()
	head := strconv.AppendInt(ih.buf[:0], int64(index), 10)
	head = append(append(append(head, 0), role...), 0)
	ih.h.Write(head)
	oaiwire.HashCompact(ih.h, raw)
	var id [17]byte
	id[0] = 'm'
	hex.Encode(id[1:], ih.h.Sum(ih.sum[:0])[:8])
	return a.String(id[:]) // a nil arena allocates
}

// idHash is a digest with its scratch space, pooled so that deriving an id for every
// message of a long conversation on every request allocates only the ids.
type idHash struct {
	h   hash.Hash
	buf [64]byte
	sum [sha256.Size]byte
}

var idHashes = sync.Pool{New: func() any { return &idHash{h: sha256.New()} }}

// partID is the id of the n-th part of message id.
func partID(messageID string, n int) string {
	return messageID + ".p" + strconv.Itoa(n)
}

// legacyCallID names a deprecated function_call, which has no native id. It depends only on
// the call itself, so the call keeps its id from the response that produced it to every
// later request that replays it.
func legacyCallID(name, arguments string) string {
	return mapping.HashID("fc_", 8, name, arguments)
}

// --- attachment entries ---

// typeFromName guesses a media type from a file name or URL path extension. Chat
// Completions also names .mp3 and .wav itself rather than leave them to the system's table.
func typeFromName(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".mp3":
		return "audio/mpeg"
	case ".wav":
		return "audio/wav"
	}
	return oaiwire.TypeFromName(name)
}

// imagePart is the part of an image URL: a data: URL names its bytes (metadata, size,
// sha256); a remote URL is not fetched, so its body is a gap.
func imagePart(id, u string, np *nativePart) ahp.Part {
	if du, ok := oaiwire.ParseDataURL(u); ok {
		np.inline = &inlineData{data: du, hasData: true}
		return oaiwire.MetadataAttachment(id, oaiwire.AttachmentType(du.MediaType, "image/*"), du)
	}
	return oaiwire.GapAttachment(id, remoteImageType(u), oaiwire.GapRemoteURL)
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
	du, ok := oaiwire.InlineData(data)
	mt := oaiwire.AudioType(format)
	if ok && du.MediaType != "" {
		mt = oaiwire.AttachmentType(du.MediaType, mt)
	}
	np.inline = &inlineData{data: du, hasData: true}
	return oaiwire.MetadataAttachment(id, mt, du)
}

// filePart decodes a file entry whose fields sit under prefix ("file." in a content
// entry): inline data (a data URL or bare base64), a remote file_url, or a provider-held
// file_id. A text file becomes a text part (oaiwire.FileData).
func filePart(e gjson.Result, id, prefix string, np *nativePart) (ahp.Part, error) {
	name := e.Get(prefix + "filename").String()
	if fd := e.Get(prefix + "file_data"); fd.Type == gjson.String && fd.Str != "" {
		p, du, textType := oaiwire.FileData(id, fd.Str, typeFromName(name))
		if textType != "" {
			np.src, np.field = srcFileText, prefix+"file_data"
			np.inline = &inlineData{fileType: textType}
		} else {
			np.inline = &inlineData{data: du, hasData: true}
		}
		return p, nil
	}
	if fu := e.Get(prefix + "file_url"); fu.Type == gjson.String && fu.Str != "" {
		return oaiwire.GapAttachment(id, oaiwire.AttachmentType(typeFromName(name), oaiwire.MediaOctetStream), oaiwire.GapRemoteURL), nil
	}
	if fid := e.Get(prefix + "file_id"); fid.Type == gjson.String && fid.Str != "" {
		return oaiwire.GapAttachment(id, oaiwire.AttachmentType(typeFromName(name), oaiwire.MediaOctetStream), oaiwire.GapProviderFile), nil
	}
	return ahp.Part{}, fmt.Errorf("file part without file_data, file_url or file_id")
}
