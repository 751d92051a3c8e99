package anthropic

import (
	"strings"

	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/internal/jsontext"
	"github.com/hookproxy/hookproxy/mapping"
)

// The messages residue: the members of the content blocks a canonical part has no place
// for (mapping.ResidueMembers), kept in the request's params.

// withResidue adds the messages residue of the messages whose residue entries are given
// (appendResidue) to params. A decode lists them only when a block may have one
// (blockFields.mayHaveResidue).
func withResidue(params []byte, entries []string) []byte {
	if r, ok := joinResidue(entries); ok {
		if p, err := sjson.SetRawBytes(params, "messages", []byte(r)); err == nil {
			return p
		}
	}
	return params
}

// residueBlockMembers are the strings of a content block the canonical part has no place
// for, though the model reads them: a document's title and context, a search result's
// title and source, and the citations of a text block or a search result (and, below, the
// URL of an image or document source).
var residueBlockMembers = [...]string{"title", "context", "source", "citations"}

// noResidue is the residue entry of a message without any.
const noResidue = "{}"

// appendResidue appends the residue entry of each message of the array arr to entries.
func appendResidue(entries []string, arr string) []string {
	// One pass over each message and block that skips every value it does not keep
	// undecoded (a tool result's text above all), as the decode itself does.
	mapping.ElementsRaw(arr, func(m string) bool {
		content := ""
		mapping.MembersRaw(m, func(k, v string) bool {
			if k == "content" {
				content = v
				return false
			}
			return true
		})
		if r, ok := blocksResidue(content); ok {
			entries = append(entries, `{"content":`+r+`}`)
		} else {
			entries = append(entries, noResidue)
		}
		return true
	})
	return entries
}

// joinResidue is the messages residue of the messages whose entries are given; ok is
// false when none has one.
func joinResidue(entries []string) (string, bool) {
	for _, e := range entries {
		if e != noResidue {
			return "[" + strings.Join(entries, ",") + "]", true
		}
	}
	return "", false
}

// blocksResidue is the residue of a content array (its raw JSON): one object per block.
func blocksResidue(content string) (string, bool) {
	if content == "" || content[0] != '[' {
		return "", false
	}
	var entries []string
	found := false
	mapping.ElementsRaw(content, func(b string) bool {
		var members []string
		if b[0] == '{' {
			// The first value of each member asked for, as gjson's Get finds it.
			var picked [len(residueBlockMembers)]string
			var typ, inner string
			mapping.MembersRaw(b, func(k, v string) bool {
				for j, name := range residueBlockMembers {
					if k == name && picked[j] == "" {
						picked[j] = v
					}
				}
				if k == "type" && typ == "" {
					typ = v
				}
				if k == "content" && inner == "" {
					inner = v
				}
				return true
			})
			for j, k := range residueBlockMembers {
				if v := picked[j]; v != "" && (v[0] == '"' || (k == "citations" && v[0] == '[')) {
					members = append(members, mapping.Quote(k)+":"+v)
				}
			}
			// An image or document fetched by URL: a signed URL carries a credential.
			if src := picked[2]; src != "" && src[0] == '{' {
				url := ""
				mapping.MembersRaw(src, func(k, v string) bool {
					if k == "url" {
						url = v
						return false
					}
					return true
				})
				if url != "" && url[0] == '"' {
					members = append(members, `"source":{"url":`+url+`}`)
				}
			}
			if typ != "" && typ[0] == '"' && jsontext.Unquote(typ) == "tool_result" {
				if r, ok := blocksResidue(inner); ok {
					members = append(members, `"content":`+r)
				}
			}
		}
		if len(members) > 0 {
			found = true
		}
		entries = append(entries, "{"+strings.Join(members, ",")+"}")
		return true
	})
	return "[" + strings.Join(entries, ",") + "]", found
}
