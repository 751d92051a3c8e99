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
	dst = append(dst, '[')
	for i := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		m := &msgs[i]
		dst = append(dst, `{"id":`...)
		dst = appendJSONString(dst, m.ID)
		dst = append(dst, `,"role":`...)
		dst = appendJSONString(dst, m.Role)
		dst = append(dst, `,"parts":[`...)
		for j := range m.Parts {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendPart(dst, &m.Parts[j])
		}
		dst = append(dst, ']')
		if m.Synthesized {
			dst = append(dst, `,"synthesized":true`...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendPart(dst []byte, p *ahp.Part) []byte {
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
		dst = appendJSONString(dst, *p.Text)
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
	n := 2
	for i := range msgs {
		n += 64
		for j := range msgs[i].Parts {
			n += 96 + len(msgs[i].Parts[j].TextOf())
		}
	}
	return appendMessages(make([]byte, 0, n+n/16), msgs)
}
