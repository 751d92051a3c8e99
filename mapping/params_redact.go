package mapping

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// RedactParams applies hookproxy.redact_params redactions (ahp.ExtRedactParams) to a
// native request body: every occurrence of each Find in every string value under the
// top-level members that make up the request's params (Request.Params: every member but
// the message-bearing ones) is replaced by its Replace. Members and strings that hold no
// Find keep their bytes; a changed string is re-encoded by sjson in place. It reports
// whether anything changed.
func RedactParams(body []byte, params []byte, reds []ahp.ParamsRedaction) ([]byte, bool, error) {
	if len(reds) == 0 || !gjson.ValidBytes(params) {
		return body, false, nil
	}
	var sets []stringSet
	gjson.ParseBytes(params).ForEach(func(k, v gjson.Result) bool {
		path := gjson.Escape(k.String())
		if ResidueMembers[k.String()] {
			// The strings sit in messages the codec and the policies' edits may have moved
			// since decoding: every message of the body as it is now is patched where the
			// residue has strings (a name, a title), whatever its index.
			var t residueShape
			t.add(v)
			sets = t.collect(sets, path, gjson.GetBytes(body, path), reds)
			return true
		}
		sets = collectRedactions(sets, path, v, reds)
		return true
	})
	if len(sets) == 0 {
		return body, false, nil
	}
	out := body
	for _, s := range sets {
		var err error
		if out, err = sjson.SetBytes(out, s.path, s.value); err != nil {
			return body, false, err
		}
	}
	return out, true, nil
}

type stringSet struct{ path, value string }

// ResidueMembers name the params members that are not request parameters but a residue of
// the message list (chat and Anthropic "messages", Responses "input", Gemini "contents"):
// for each message or item (in body order), an object holding only the strings the
// canonical view has no place for — a chat message's "name", an Anthropic document's
// "title" and "context", a block's "citations", file names and remote URLs. A member of
// this name that is a real parameter (the "input" of an embeddings request) is patched
// exactly as any other, since its shape is the body's own. Policies read them as they read params
// (they are text the model reads); hookproxy.redact_params redactions apply to the same
// members of every message of the body.
var ResidueMembers = map[string]bool{"messages": true, "input": true, "contents": true}

// residueShape is the union of the shapes of a residue's values: which members (and
// array elements) hold strings.
type residueShape struct {
	str bool
	obj map[string]*residueShape
	arr *residueShape
}

func (t *residueShape) add(v gjson.Result) {
	switch {
	case v.Type == gjson.String:
		t.str = true
	case v.IsArray():
		if t.arr == nil {
			t.arr = &residueShape{}
		}
		v.ForEach(func(_, e gjson.Result) bool {
			t.arr.add(e)
			return true
		})
	case v.IsObject():
		v.ForEach(func(k, e gjson.Result) bool {
			if t.obj == nil {
				t.obj = map[string]*residueShape{}
			}
			c := t.obj[k.String()]
			if c == nil {
				c = &residueShape{}
				t.obj[k.String()] = c
			}
			c.add(e)
			return true
		})
	}
}

// collect records the new value of every string of v (at sjson path) that the shape
// covers and that holds a Find.
func (t *residueShape) collect(dst []stringSet, path string, v gjson.Result, reds []ahp.ParamsRedaction) []stringSet {
	switch {
	case v.Type == gjson.String && t.str:
		dst = collectRedactions(dst, path, v, reds)
	case v.IsArray() && t.arr != nil:
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			dst = t.arr.collect(dst, path+"."+strconv.Itoa(i), e, reds)
			i++
			return true
		})
	case v.IsObject() && t.obj != nil:
		v.ForEach(func(k, e gjson.Result) bool {
			if c := t.obj[k.String()]; c != nil {
				dst = c.collect(dst, path+"."+gjson.Escape(k.String()), e, reds)
			}
			return true
		})
	}
	return dst
}

// collectRedactions walks v (at sjson path) and records the new value of every string
// that holds a Find.
func collectRedactions(dst []stringSet, path string, v gjson.Result, reds []ahp.ParamsRedaction) []stringSet {
	switch {
	case v.Type == gjson.String:
		s := v.String()
		changed := false
		for _, r := range reds {
			if r.Find != "" && strings.Contains(s, r.Find) {
				s, changed = strings.ReplaceAll(s, r.Find, r.Replace), true
			}
		}
		if changed {
			dst = append(dst, stringSet{path: path, value: s})
		}
	case v.IsArray():
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			dst = collectRedactions(dst, path+"."+strconv.Itoa(i), e, reds)
			i++
			return true
		})
	case v.IsObject():
		v.ForEach(func(k, e gjson.Result) bool {
			dst = collectRedactions(dst, path+"."+gjson.Escape(k.String()), e, reds)
			return true
		})
	}
	return dst
}
