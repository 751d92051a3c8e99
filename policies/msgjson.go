package policies

// A reflection-free encoder for canonical message lists, the value of every message-list
// modify and inject effect. encoding/json spends most of a redaction's time walking a
// 32 KiB list through reflection; this writes the same JSON (the member names and
// omissions of the ahp struct tags) in one pass. A test keeps it in step with the ahp
// types.

import (
	"strconv"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// appendMessages encodes msgs as a JSON array. A nil parts list is written as [] (the
// protocol requires the member to be an array).
func appendMessages(dst []byte, msgs []ahp.Message) []byte {
	return appendEditedMessages(dst, msgs, nil, nil)
}

// textEdit writes the JSON string literal that replaces the text of the part that hits[k]
// names.
type textEdit func(dst []byte, p *ahp.Part, k int) []byte

// appendEditedMessages encodes msgs as appendMessages does, except that the text of each
// part named by hits (in message and part order, as scanItems lists them) is written by
// edit. A redacting policy encodes its edited copy of the list this way, straight from the
// original messages: no copy of the list, its parts or the edited texts is built (see
// appendRedactedText).
func appendEditedMessages(dst []byte, msgs []ahp.Message, hits []partHit, edit textEdit) []byte {
	k := 0
	dst = append(dst, '[')
	for i := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		m := &msgs[i]
		if p, ok := m.AsPart(); ok {
			// A bare part item of a generic slot: encoded as the part it is. The
			// policies scan message parts only, so it is never an edit target.
			dst = appendPart(dst, &p, nil, 0)
			continue
		}
		dst = append(dst, `{"id":`...)
		dst = appendJSONString(dst, m.ID)
		dst = append(dst, `,"role":`...)
		dst = appendJSONString(dst, m.Role)
		dst = append(dst, `,"parts":[`...)
		for j := range m.Parts {
			if j > 0 {
				dst = append(dst, ',')
			}
			if k < len(hits) && hits[k].msg == i && hits[k].part == j {
				dst = appendPart(dst, &m.Parts[j], edit, k)
				k++
				continue
			}
			dst = appendPart(dst, &m.Parts[j], nil, 0)
		}
		dst = append(dst, ']')
		if m.Synthesized {
			dst = append(dst, `,"synthesized":true`...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendPart encodes p; when edit is not nil, it writes the value of the text member
// (p.Text is then not nil: only text parts are scanned).
func appendPart(dst []byte, p *ahp.Part, edit textEdit, k int) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, p.ID)
	dst = append(dst, `,"kind":`...)
	dst = appendJSONString(dst, p.Kind)
	dst = append(dst, `,"mediaType":`...)
	dst = appendJSONString(dst, p.MediaType)
	dst = append(dst, `,"selection":`...)
	dst = appendJSONString(dst, p.Selection)
	if p.Category != "" {
		dst = append(dst, `,"category":`...)
		dst = appendJSONString(dst, p.Category)
	}
	if p.Text != nil {
		dst = append(dst, `,"text":`...)
		if edit != nil {
			dst = edit(dst, p, k)
		} else {
			dst = appendJSONString(dst, *p.Text)
		}
	}
	if p.Body != nil {
		dst = append(dst, `,"body":{"ref":`...)
		dst = appendJSONString(dst, p.Body.Ref)
		dst = append(dst, '}')
	}
	if p.Gap != nil {
		dst = append(dst, `,"gap":{`...)
		if p.Gap.Path != "" {
			dst = append(dst, `"path":`...)
			dst = appendJSONString(dst, p.Gap.Path)
			dst = append(dst, ',')
		}
		dst = append(dst, `"reason":`...)
		dst = appendJSONString(dst, p.Gap.Reason)
		dst = append(dst, '}')
	}
	if p.Size != nil {
		dst = append(dst, `,"size":`...)
		dst = strconv.AppendInt(dst, *p.Size, 10)
	}
	if p.SHA256 != "" {
		dst = append(dst, `,"sha256":`...)
		dst = appendJSONString(dst, p.SHA256)
	}
	if p.Synthesized {
		dst = append(dst, `,"synthesized":true`...)
	}
	return append(dst, '}')
}

// messagesJSON encodes msgs into a buffer sized for the texts they carry.
func messagesJSON(msgs []ahp.Message) []byte {
	return appendMessages(make([]byte, 0, messagesJSONCap(msgs)), msgs)
}

// messagesJSONCap is a buffer size that holds the encoding of msgs unless it needs many
// escapes: the texts, room for the other members, and a sixteenth for escapes.
func messagesJSONCap(msgs []ahp.Message) int {
	n := 2
	for i := range msgs {
		n += 64
		for j := range msgs[i].Parts {
			n += 96 + len(msgs[i].Parts[j].TextOf())
		}
	}
	return n + n/16
}
